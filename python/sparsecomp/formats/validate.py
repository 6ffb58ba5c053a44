"""Input validation for host-side sparse tensors.

Every constructor of :class:`~sparsecomp.formats.tensor.SparseTensor` runs its
inputs through these checks, so that bad data fails here with a
:class:`~sparsecomp.errors.FormatError` naming the problem, never later in
native code. The rules:

* values are 1-D with one of :data:`VALUE_DTYPES`; NaN is an ordinary value
  (it is stored like any nonzero);
* a shape is a tuple of non-negative ints (its length must be the layout's rank);
* coordinates are integers of shape ``(ndim, nnz)`` inside the shape;
* position and coordinate buffers use signed ints of the layout's widths
  (:func:`index_dtype`), and every value stored in them must fit
  ``[0, 2**(w-1) - 1]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sparsecomp.errors import FormatError
from sparsecomp.formats.layout import Layout

#: The value dtypes a sparse tensor may hold (bool: an ``i1`` kernel's, as its results are).
VALUE_DTYPES = tuple(
    np.dtype(t)
    for t in (
        "float16", "float32", "float64", "int8", "int16", "int32", "int64",
        "complex64", "complex128", "bool",
    )
)  # fmt: skip
_INDEX_DTYPES: dict[int, np.dtype[Any]] = {
    0: np.dtype(np.int64),
    8: np.dtype(np.int8),
    16: np.dtype(np.int16),
    32: np.dtype(np.int32),
    64: np.dtype(np.int64),
}
INT64_MAX = 2**63 - 1


class IndexWidthError(FormatError):
    """Sizes or counts overflow the layout's index widths; ``widths`` would fit them."""

    def __init__(self, message: str, *, widths: tuple[int, int], hint: str) -> None:
        self.widths = widths  # (pos_width, crd_width) that would fit
        super().__init__(message, hint=hint)


def index_dtype(width: int) -> np.dtype[Any]:
    """The signed dtype of a buffer of bit width ``width`` (0 is ``index``, i.e. int64)."""
    return _INDEX_DTYPES[width]


def index_max(width: int) -> int:
    """The largest value a position or coordinate buffer of ``width`` bits may hold."""
    return int(np.iinfo(index_dtype(width)).max)


def check_value_dtype(dtype: Any) -> np.dtype[Any]:
    """``dtype`` as a numpy dtype if it is one of :data:`VALUE_DTYPES`, else FormatError."""
    dt = np.dtype(dtype)
    if dt not in VALUE_DTYPES:
        allowed = ", ".join(str(d) for d in VALUE_DTYPES)
        raise FormatError(f"value dtype {dt} is not supported; expected one of {allowed}")
    return dt


def check_values(values: Any, count: int, what: str = "values") -> np.ndarray:
    """``values`` as a 1-D array of ``count`` elements of an allowed dtype (not copied)."""
    arr = np.asarray(values)
    check_value_dtype(arr.dtype)
    if arr.ndim != 1 or arr.shape[0] != count:
        raise FormatError(f"{what} must be 1-D with {count} elements, got shape {arr.shape}")
    return arr


def check_shape(shape: Any) -> tuple[int, ...]:
    """``shape`` as a tuple of non-negative Python ints."""
    try:
        dims = tuple(shape)
    except TypeError:
        raise FormatError(f"shape must be a sequence of ints, got {shape!r}") from None
    for d in dims:
        if isinstance(d, bool | np.bool_) or not isinstance(d, int | np.integer):
            raise FormatError(f"shape must contain ints, got {d!r} in {shape!r}")
        if d < 0:
            raise FormatError(f"shape must be non-negative, got {d} in {tuple(shape)}")
    return tuple(int(d) for d in dims)


def check_coords(shape: tuple[int, ...], coords: Any) -> np.ndarray:
    """Dimension coordinates as an int64 array ``(ndim, nnz)``, each inside ``shape``."""
    arr = np.asarray(coords)
    if arr.size == 0 and (arr.ndim == 1 or (arr.ndim == 2 and arr.shape[1] == 0)):
        arr = np.zeros((len(shape), 0), np.int64)
    if arr.dtype.kind not in "iu":
        raise FormatError(f"coordinates must be integers, got dtype {arr.dtype}")
    if arr.ndim != 2 or arr.shape[0] != len(shape):
        raise FormatError(
            f"coordinates must have shape (ndim, nnz) = ({len(shape)}, nnz), got {arr.shape}"
        )
    if arr.dtype.kind == "u" and arr.size and arr.max() > INT64_MAX:
        raise FormatError(f"coordinate {arr.max()} is out of range")
    out = arr.astype(np.int64)
    for d, size in enumerate(shape):
        row = out[d]
        bad = (row < 0) | (row >= size)
        if bad.any():
            e = int(np.argmax(bad))
            raise FormatError(
                f"coordinate {row[e]} in dimension {d} is out of range for size {size} (entry {e})"
            )
    return out


def check_crd_widths(layout: Layout, lvl_shape: tuple[int, ...]) -> None:
    """Every level with a coordinates buffer has a size that fits ``crd_width``."""
    limit = index_max(layout.crd_width)
    for lvl, (level, size) in enumerate(zip(layout.levels, lvl_shape, strict=True)):
        if level.has_coordinates and size > limit:
            raise IndexWidthError(
                f"level {lvl} ({level}) has size {size}, which does not fit "
                f"{layout.crd_width}-bit coordinates (at most {limit})",
                widths=(layout.pos_width, 64),
                hint="use a wider crd_width (Layout.with_widths)",
            )


def check_pos_fits(layout: Layout, lvl: int, count: int) -> None:
    """The ``count`` positions of level ``lvl`` fit its ``pos_width`` positions buffer."""
    limit = index_max(layout.pos_width)
    if count > limit:
        raise IndexWidthError(
            f"level {lvl} ({layout.levels[lvl]}) stores {count} entries, which overflows "
            f"{layout.pos_width or 64}-bit positions (at most {limit})",
            widths=(64, layout.crd_width),
            hint="use 64-bit positions: layout.with_widths(64, crd_width)",
        )


def check_storage_size(lvl: int, count: int) -> None:
    """A level may address at most 2**63 - 1 storage positions."""
    if count > INT64_MAX:
        raise FormatError(f"level {lvl} would need {count} storage positions, more than 2**63 - 1")
