"""``sparsecomp.sparsify``: apply a sparsifier to a host array.

Thin entry point: the sparsifiers live in :mod:`sparsecomp.formats.sparsifiers`
(conventions there), imported on first call so that ``import sparsecomp``
stays cheap and MLIR-free.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, overload

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import ArrayLike

    from sparsecomp.formats.sparsifiers import Sparsifier

__all__ = ["sparsify"]


@overload
def sparsify(x: ArrayLike, sparsifier: str | Sparsifier, layout: None = None) -> np.ndarray: ...
@overload
def sparsify(x: ArrayLike, sparsifier: str | Sparsifier, layout: Any) -> Any: ...
def sparsify(x: ArrayLike, sparsifier: str | Sparsifier, layout: Any = None) -> Any:
    """Keep the elements of ``x`` that ``sparsifier`` chooses.

    ``x``: a numeric (integer, float or complex) numpy array, rank >= 1
    (>= 2 for ``block_fraction``). ``sparsifier``: a
    :class:`~sparsecomp.formats.sparsifiers.Sparsifier` or its text
    (``"nm:2:4"``, ``"scalar_fraction:0.9"``, ``#sparse_iter.sparsifier<...>``).

    With ``layout=None`` returns a new dense array of ``x``'s shape and dtype
    (in this machine's byte order: a ``>f4`` array gives ``float32``) with the
    dropped elements set to zero. With a layout (a short name such
    as ``"csr"`` or a :class:`~sparsecomp.formats.Layout`) returns a
    :class:`sparsecomp.formats.tensor.SparseTensor` holding exactly the kept
    elements (``Sparsifier.mask``), kept exact zeros included as explicit
    zeros (``keep_all`` keeps nonzeros only).

    Raises :class:`~sparsecomp.errors.FormatError` for a bad sparsifier or array.
    """
    from sparsecomp.formats.sparsifiers import sparsify_array

    return sparsify_array(x, sparsifier, layout)
