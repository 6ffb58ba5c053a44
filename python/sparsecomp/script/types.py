"""The annotations of a Python kernel's arguments and results.

A tensor argument is annotated ``Tensor[dtype, shape]`` or ``Tensor[dtype,
shape, encoding]``:

* ``dtype``: one of the element types below (``f32``, ``f64``, ``i32``...)
  or a string naming a type variable (``"T"``), bound at the first call
  to the argument's dtype, as a C++ template parameter is;
* ``shape``: a tuple of sizes, each a string (a size symbol: ``"M"``; one
  symbol names one size everywhere it appears) or an int (a static size),
  or a single string for a vector (``"N"``);
* ``encoding``: what is known of the sparsity, one of
  - a sparsity hint: ``"unstructured"``, ``"nm[2, 4]"``, ``"block[4, 4]"``,
    ``"ragged"``, optionally with a density: ``sparsity("unstructured",
    density=0.01)``; the target picks the layout
    (``sparse-iter-specialize-encodings``);
  - a concrete layout: a name :func:`~sparsecomp.formats.names.parse_layout`
    takes (``"csr"``, ``"bsr:4x4"``, ``"nm:2:4"``...);
  - MLIR attribute text: ``"#sparse_tensor.encoding<{...}>"`` or
    ``"#sparse_iter.layout<{...}>"``.

A scalar argument is annotated with its element type alone (``alpha: f32``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from sparsecomp.errors import SparsecompError

#: the sparsity hints' kinds (``#sparse_iter.sparsity<kind...>``)
HINTS = ("unstructured", "nm", "block", "ragged")


@dataclass(frozen=True)
class Scalar:
    """An element type: its MLIR name and numpy dtype."""

    name: str
    dtype: np.dtype[Any]

    @property
    def is_float(self) -> bool:
        return self.name.startswith(("f", "bf"))

    def __repr__(self) -> str:
        return self.name


f16 = Scalar("f16", np.dtype(np.float16))
f32 = Scalar("f32", np.dtype(np.float32))
f64 = Scalar("f64", np.dtype(np.float64))
i8 = Scalar("i8", np.dtype(np.int8))
i16 = Scalar("i16", np.dtype(np.int16))
i32 = Scalar("i32", np.dtype(np.int32))
i64 = Scalar("i64", np.dtype(np.int64))
#: MLIR's ``index``: a scalar argument only (a size or an offset), 64-bit here
index = Scalar("index", np.dtype(np.int64))
#: every element type, by MLIR name
SCALARS = {s.name: s for s in (f16, f32, f64, i8, i16, i32, i64, index)}


def scalar_of(dtype: Any) -> Scalar:
    """The element type of a numpy (or torch) dtype."""
    name = str(dtype).removeprefix("torch.")
    found = next((s for s in SCALARS.values() if s.dtype.name == name), None)
    if found is None:
        raise SparsecompError(
            f"no element type for dtype {name}",
            hint=f"kernels take {', '.join(dict.fromkeys(s.dtype.name for s in SCALARS.values()))}",
        )
    return found


def sparsity(kind: str, density: float | None = None) -> str:
    """A sparsity hint as encoding text: ``sparsity("nm[2, 4]")``,
    ``sparsity("unstructured", density=0.01)``."""
    if kind.split("[")[0].strip() not in HINTS:
        raise SparsecompError(f"unknown sparsity '{kind}'", hint=f"one of {', '.join(HINTS)}")
    extra = "" if density is None else f", density = {float(density)}"
    return f"#sparse_iter.sparsity<{kind}{extra}>"


def encoding_text(encoding: str, rank: int = 2) -> str:
    """The MLIR attribute text of an annotation's encoding (see the module), a layout
    name's for a tensor of ``rank`` (``"coo"`` on a 3-D tensor: its rank-3 COO)."""
    text = encoding.strip()
    if text.startswith("#"):
        return text
    if text.split("[")[0].strip() in HINTS:
        return sparsity(text)
    from sparsecomp.formats.names import parse_layout

    return parse_layout(text, rank).attr_text()


@dataclass(frozen=True)
class TensorType:
    """``Tensor[dtype, shape, encoding]``: see the module."""

    dtype: Scalar | str
    shape: tuple[str | int, ...]
    encoding: str | None = None

    @property
    def rank(self) -> int:
        return len(self.shape)

    def element(self, bound: dict[str, Scalar]) -> Scalar:
        """The element type, type variables taken from ``bound``."""
        if isinstance(self.dtype, Scalar):
            return self.dtype
        if self.dtype not in bound:
            raise SparsecompError(f"type variable '{self.dtype}' is not bound")
        return bound[self.dtype]


class _TensorFactory:
    """``Tensor[dtype, shape, encoding?]`` builds a :class:`TensorType`."""

    def __getitem__(self, params: Any) -> TensorType:
        if not isinstance(params, tuple) or len(params) not in (2, 3):
            raise SparsecompError(
                "write Tensor[dtype, shape] or Tensor[dtype, shape, encoding]",
                hint='for example Tensor[f32, ("M", "K"), "csr"]',
            )
        dtype, shape, *rest = params
        if not isinstance(dtype, Scalar | str):
            raise SparsecompError(f"Tensor's first parameter is an element type, not {dtype!r}")
        dims = (shape,) if isinstance(shape, str | int) else tuple(shape)
        for d in dims:
            if not isinstance(d, str | int) or isinstance(d, bool):
                raise SparsecompError(f"a size is a symbol (str) or an int, not {d!r}")
        encoding = rest[0] if rest else None
        if encoding is not None and not isinstance(encoding, str):
            raise SparsecompError(f"an encoding is text, not {encoding!r}")
        return TensorType(dtype, dims, encoding)


Tensor = _TensorFactory()
