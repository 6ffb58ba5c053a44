"""A sparse weight's stored pattern, and its storage in a kernel's layout.

A sparse parameter (:class:`~sparsecomp.torch.nn.SparseLinear`) keeps its
*pattern* as CSR index arrays (``indptr``, ``indices``) and its values in
CSR order: one number per kept entry, whatever layout the kernels use. That
is what an optimizer updates and what ``state_dict`` holds, so a checkpoint
does not depend on the layout.

A kernel reads the weight in a storage layout (CSR, BSR, ``nm:N:M``,
``hyb``...). :func:`place` packs the pattern in that layout once, with each
stored slot holding its entry's CSR index plus one: the slots then give
``perm``, the gather from CSR order to storage order (``-1``, read as the
appended zero, for fill: the zeros inside a BSR block or an n:m group). A
call gathers the current values through ``perm`` (nothing for CSR itself)
and hands the kernel the packed index buffers. The transposed placement
(``transpose=True``) stores ``W^T`` the same way: the backward pass's
``dX = dY W`` is an SpMM with it.

Index buffers travel as torch tensors (they are module buffers); the op
implementations turn them back into a :class:`SparseTensor` through
:func:`tensor_of`, which validates buffers it has not seen (after
``load_state_dict``, in a new process) and remembers them by address and
version counter.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from sparsecomp import forksafe
from sparsecomp.errors import FormatError
from sparsecomp.formats.composable import Composable
from sparsecomp.formats.layout import Layout, short_name
from sparsecomp.formats.names import parse_layout
from sparsecomp.formats.tensor import SparseTensor


@dataclass(frozen=True)
class Placement:
    """A pattern packed in one layout: what a kernel call needs besides the values."""

    #: the layout, as attribute text
    layout: str
    #: the stored matrix's shape (transposed for a transposed placement)
    shape: tuple[int, int]
    #: storage slot -> CSR entry (``-1``: fill); empty where the two orders agree
    perm: np.ndarray
    #: per part, its stored entries, then every index buffer in ``buffers()`` order
    index: tuple[np.ndarray, ...]
    #: the packed tensor (its values are the entries' CSR indices plus one)
    tensor: SparseTensor


def version(t: Any) -> int:
    """``t``'s version counter; ``-1`` for an inference tensor, which has none
    (``torch.inference_mode``): a cache that serves a result computed from such
    a tensor compares it with a :func:`snapshot` instead (:func:`unchanged`)."""
    return -1 if t.is_inference() else int(t._version)


def snapshot(t: Any) -> Any:
    """What :func:`unchanged` compares ``t`` with later: ``None`` where ``t``'s
    version counter tells (it grows at every in-place change), a copy of an
    inference tensor, which has none. In inference mode a residual block that
    adds into its input (``x += self.fc1(x); x += self.fc2(x)``) changes it
    between two layers that read it, and without the copy the second took the
    rows or the transpose the first computed from the old values."""
    return t.detach().clone() if t.is_inference() else None


def unchanged(t: Any, snap: Any) -> bool:
    """Whether ``t`` still holds what :func:`snapshot` copied (true without a copy:
    the version counter, in the caller's key, says)."""
    return snap is None or bool(torch.equal(t, snap))


def set_entries(param: torch.nn.Parameter, data: torch.Tensor) -> None:
    """``param.data = data`` where ``data`` may hold another number of entries (a
    re-sparsified or loaded pattern): the same Parameter, which an optimizer keeps
    holding, with a fresh gradient accumulator.

    torch keeps a parameter's ``AccumulateGrad`` node while any graph holds it
    and reuses it for the next graph unless the parameter's dtype or device
    changed, whatever its shape: with a previous step's ``loss`` still alive
    (``loss = crit(model(x), y)`` in a loop keeps it until the next
    assignment), the next backward failed ("invalid gradient at index 0 -
    got [192] but expected shape compatible with [224]"). Passing through
    another dtype drops the stale node."""
    if data.shape != param.shape:
        other = torch.float64 if data.dtype != torch.float64 else torch.float32
        param.data = data.to(other)
    param.data = data


def transposed_layout(layout: str) -> str:
    """The layout used for ``W^T`` in the backward pass, given ``W``'s.

    BSR keeps its blocks (transposed), but for ``R x 1`` blocks (grouped
    n:m), whose transposed ``1 x R`` blocks ran 1.2-2.2x slower than CSR for
    ``dX`` here, and an n:m pattern, whose transpose is not n:m, ``W^T`` is
    stored as CSR; every other layout is packed anew for ``W^T``.
    """
    parsed = parse_layout(layout)
    if isinstance(parsed, Layout):
        if parsed.is_structured:
            return parse_layout("csr").attr_text()
        name = short_name(parsed) or ""
        if name.startswith("bsr:"):
            r, c = name.removeprefix("bsr:").split("x")
            if c == "1":  # 1 x R blocks: no rows to keep in registers together (lowering/jam)
                return parse_layout("csr").attr_text()
            return parse_layout(f"bsr:{c}x{r}").attr_text()
        return parsed.attr_text()
    return parsed.attr_text()


def coordinates(indptr: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row and column of every entry of a CSR pattern, in CSR order."""
    rows = np.repeat(np.arange(indptr.shape[0] - 1, dtype=np.int64), np.diff(indptr))
    return rows, indices.astype(np.int64)


def place(
    indptr: np.ndarray,
    indices: np.ndarray,
    shape: tuple[int, int],
    layout: str,
    *,
    transpose: bool = False,
) -> Placement:
    """Pack a CSR pattern (``indptr``, ``indices``) in ``layout``; see the module."""
    rows, cols = coordinates(indptr, indices)
    nnz = rows.shape[0]
    if transpose:
        rows, cols, shape = cols, rows, (shape[1], shape[0])
    attr = parse_layout(layout).attr_text()
    ids = np.arange(1, nnz + 1, dtype=np.float64)
    tensor = SparseTensor.from_coo(shape, np.stack([rows, cols]), ids, attr)
    slots = np.concatenate([a for n, a in tensor.buffers() if n.endswith("values")])
    perm = np.rint(slots).astype(np.int64) - 1
    if perm.shape[0] == nnz and np.array_equal(perm, np.arange(nnz)):
        perm = np.zeros(0, np.int64)
    index = (_counts(tensor), *(a for n, a in tensor.buffers() if not n.endswith("values")))
    return Placement(attr, shape, perm, index, tensor)


def _counts(tensor: SparseTensor) -> np.ndarray:
    parts = tensor.parts if tensor.parts else (tensor,)
    return np.array([p.nse for p in parts], dtype=np.int64)


# -- from torch buffers back to a SparseTensor -------------------------------------------

_lock = forksafe.lock()
_known: OrderedDict[tuple[Any, ...], tuple[SparseTensor, tuple[Any, ...]]] = OrderedDict()
#: placements remembered by the address and version of their index tensors
KNOWN_LIMIT = 256


def _key(layout: str, shape: tuple[int, ...], index: tuple[Any, ...]) -> tuple[Any, ...]:
    marks = tuple((t.data_ptr(), version(t), t.numel(), str(t.dtype)) for t in index)
    return (layout, tuple(shape), marks)


def remember(
    layout: str, shape: tuple[int, ...], index: tuple[Any, ...], tensor: SparseTensor
) -> None:
    """Tell :func:`tensor_of` that these index tensors hold ``tensor``'s structure."""
    with _lock:
        _known[_key(layout, shape, index)] = (tensor, tuple(index))
        while len(_known) > KNOWN_LIMIT:
            _known.popitem(last=False)


def tensor_of(layout: str, shape: tuple[int, ...], index: tuple[Any, ...]) -> SparseTensor:
    """The packed structure stored in torch ``index`` tensors (values: placeholders).

    ``index`` is a :class:`Placement`'s ``index`` as torch tensors. Buffers not
    seen before are validated fully (a :class:`FormatError` names the fault).
    """
    key = _key(layout, shape, index)
    with _lock:
        found = _known.get(key)
        if found is not None:
            _known.move_to_end(key)
            return found[0]
    tensor = _rebuild(layout, tuple(shape), [t.numpy() for t in index])
    remember(layout, tuple(shape), index, tensor)
    return tensor


def _rebuild(layout: str, shape: tuple[int, ...], arrays: list[np.ndarray]) -> SparseTensor:
    parsed = parse_layout(layout)
    counts, rest = arrays[0], list(arrays[1:])
    lays = [p.layout for p in parsed.parts] if isinstance(parsed, Composable) else [parsed]
    if counts.shape != (len(lays),):
        raise FormatError(f"a {layout} weight needs {len(lays)} part counts, got {counts.shape}")
    empty = SparseTensor.from_coo(shape, np.zeros((2, 0), np.int64), np.zeros(0), parsed)
    names = [n for n, _ in empty.buffers() if not n.endswith("values")]
    if len(names) != len(rest):
        raise FormatError(f"a {layout} weight has {len(names)} index buffers, got {len(rest)}")
    built = []
    for i, (lay, nse) in enumerate(zip(lays, counts, strict=True)):
        prefix = f"part{i}." if isinstance(parsed, Composable) else ""
        mine = {
            n.removeprefix(prefix): a
            for n, a in zip(names, rest, strict=True)
            if n.startswith(prefix)
        }
        levels = len(lay.levels)
        built.append(
            SparseTensor.from_buffers(
                shape,
                lay,
                [mine.get(f"pos{lvl}") for lvl in range(levels)],
                [mine.get(f"crd{lvl}") for lvl in range(levels)],
                np.zeros(int(nse), np.float32),
            )
        )
    if not isinstance(parsed, Composable):
        return built[0]
    return SparseTensor(shape, parsed, np.dtype(np.float32), None, tuple(built))
