"""Layout conversions a call must make: done once per operand, then only its values move.

A sparse operand in another layout than the kernel's (a CSR matrix into a
kernel compiled for ``bsr:16x16``, a ``SparseTensor`` in ``hyb`` into a CSR
kernel) is converted at the call. Converting it again at every call costs
a full repack each time (a sort, a block search: tens of milliseconds at a
million entries), silently. Instead, :class:`Conversions` (one per
function) converts each operand's *structure* once: it packs the operand
with its values replaced by their slot numbers, which gives the target's
index buffers and, for every target slot, the source slot it takes its
value from (padding: none). Each later call with the same operand only
gathers the current values into that structure, O(stored entries), so
values may change between calls, as everywhere in the runtime.

The first conversion of each kind (function, argument, source layout) is
reported once with a :class:`ConversionWarning` naming what it took and how
to avoid it (``exe.prepare(A)``, or an operand in the kernel's layout).

Which operands are remembered (by identity, while they live; at most
:data:`KEEP` per function, the oldest dropped first):

* a ``SparseTensor`` that is not ``shared``: its index buffers are read-only;
* a canonical scipy CSR/CSC/COO/BSR matrix, while its ``indptr``/``indices``
  (``row``/``col``) arrays are the same objects with the same sizes (the entry
  holds them, so a new array cannot reuse an old one's ``id``) and the same
  contents: the entry keeps a copy of them, compared at each call (a
  memory-speed pass, as the gather is), so an edit in place
  (``A.indices[:] = ...``) converts the operand again. The cached structure
  gave the old matrix's product before.

Anything else (duplicates to sum, a composable source the target cannot
number, DOK/LIL input) is converted at every call.
"""

from __future__ import annotations

import sys
import time
import warnings
import weakref
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from sparsecomp.errors import ConversionWarning, SparsecompError
from sparsecomp.formats.layout import Layout
from sparsecomp.formats.names import AnyLayout
from sparsecomp.formats.scipyio import compressed_kind
from sparsecomp.formats.storage import Storage
from sparsecomp.formats.tensor import SparseTensor
from sparsecomp.formats.validate import index_dtype

#: Operands remembered per function, at most (each holds a converted structure).
KEEP = 8
_SCIPY_FORMATS = ("csr", "csc", "coo", "bsr")


class _Entry:
    """One remembered operand: the converted structure and where its values come from."""

    __slots__ = ("guard", "kept", "ref", "structure", "take")

    def __init__(
        self,
        ref: Any,
        guard: tuple[Any, ...],
        structure: SparseTensor,
        take: list[tuple[np.ndarray, np.ndarray | None]],
        kept: tuple[np.ndarray, ...] = (),
    ) -> None:
        self.ref = ref
        self.guard = guard  # what must be unchanged for the entry to hold
        self.kept = kept  # a scipy operand's index arrays as converted (compared each call)
        self.structure = structure
        self.take = take  # per target storage: source slots, padding slots (or None)


class Conversions:
    """Per function: the structures of operands converted to its layouts."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.entries: OrderedDict[tuple[int, int], _Entry] = OrderedDict()
        self.reported: set[tuple[int, str]] = set()

    def convert(self, argument: int, value: Any, layout: AnyLayout) -> SparseTensor:
        """``value`` (a SparseTensor or scipy matrix) in ``layout``, from the cache when held."""
        key = (argument, id(value))
        entry = self.entries.get(key)
        if (
            entry is not None
            and entry.ref() is value
            and _unchanged(entry.guard, value)
            and _same_indices(entry, value)
        ):
            return _gather(entry, _source_values(value))
        started = time.perf_counter()
        converted, entry = _convert(value, layout)
        seconds = time.perf_counter() - started
        if entry is not None:
            self._remember(key, value, entry)
        self._report(argument, value, layout, seconds, entry is not None)
        return converted

    def _remember(self, key: tuple[int, int], value: Any, entry: _Entry) -> None:
        entries = self.entries
        entry.ref = weakref.ref(value, lambda _: entries.pop(key, None))
        entries[key] = entry
        while len(entries) > KEEP:
            entries.popitem(last=False)

    def _report(
        self, argument: int, value: Any, layout: AnyLayout, seconds: float, cached: bool
    ) -> None:
        source = _describe(value)
        if (argument, source) in self.reported:
            return
        self.reported.add((argument, source))
        again = (
            "later calls with the same operand only gather its values"
            if cached
            else "it is converted again at every call"
        )
        instead = "SparseTensor.from_scipy(A, layout)"
        if getattr(value, "origin", None) and "torch" in value.origin:
            instead = "t.to_sparse_csr()" if str(layout) == "csr" else "from_torch(t).to(layout)"
        warnings.warn(
            f"'{self.name}' argument {argument}: converting {source} to the kernel's layout "
            f"{layout} took {seconds * 1e3:.1f} ms; {again}. To avoid it, pass the operand in "
            f"that layout ({instead})"
            + (" or pack it once with exe.prepare(A)" if len(value.shape) == 2 else ""),
            ConversionWarning,
            stacklevel=_caller_level(),
        )


def _caller_level() -> int:
    """The ``stacklevel`` (for a warning raised by our caller) of the first frame outside
    sparsecomp and torch (``sparsecomp.torch.call`` runs under a Dynamo wrapper, which
    the warning named): the user's call."""
    inside = [str(Path(__file__).resolve().parents[1])]
    torch_file = getattr(sys.modules.get("torch"), "__file__", None)
    if torch_file:
        inside.append(str(Path(torch_file).resolve().parent))
    prefixes = tuple(inside)
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(prefixes):
        frame, level = frame.f_back, level + 1  # type: ignore[assignment]
    return level


def needs_conversion(value: Any, layout: AnyLayout) -> bool:
    """Whether packing ``value`` for ``layout`` is more than sharing or checking its arrays."""
    if isinstance(value, SparseTensor):
        return value.layout != layout
    kind = compressed_kind(layout)
    if kind is None or not isinstance(layout, Layout) or getattr(value, "format", None) != kind:
        return True
    return value.indptr.dtype != index_dtype(layout.pos_width) or value.indices.dtype != (
        index_dtype(layout.crd_width)
    )


def _describe(value: Any) -> str:
    if isinstance(value, SparseTensor):
        if value.origin:
            return f"{value.origin} (read as a SparseTensor in {value.layout})"
        return f"a SparseTensor in {value.layout}"
    fmt = getattr(value, "format", "?")
    index = getattr(value, "indices", getattr(value, "coords", (None,))[-1])
    width = f" ({index.dtype} indices)" if isinstance(index, np.ndarray) else ""
    shape = getattr(value, "shape", ())
    kind = (
        "vector" if len(shape) == 1 else "matrix" if "matrix" in type(value).__name__ else "array"
    )
    return f"a scipy {fmt} {kind}{width}"


def _guard(value: Any) -> tuple[Any, ...]:
    """What identifies ``value``'s structure: its format, shape and index arrays (the
    objects themselves, held so that no new array can take one's ``id``) with their
    sizes; () for tensors (immutable structure)."""
    if isinstance(value, SparseTensor):
        return ()
    names = ("indptr", "indices", "row", "col")
    arrays = tuple(a for n in names if (a := getattr(value, n, None)) is not None)
    return (value.format, value.shape, arrays, tuple(a.shape[0] for a in arrays))


def _kept(value: Any) -> tuple[np.ndarray, ...]:
    """Copies of a scipy operand's index arrays, as they were converted."""
    if isinstance(value, SparseTensor):
        return ()
    return tuple(np.array(a, copy=True) for a in _guard(value)[2])


def _unchanged(guard: tuple[Any, ...], value: Any) -> bool:
    """Whether ``value`` still has the structure ``guard`` (from :func:`_guard`) describes:
    the same index array objects, of the same sizes."""
    now = _guard(value)
    if not guard or not now:
        return guard == now
    same = len(now[2]) == len(guard[2]) and all(a is b for a, b in zip(now[2], guard[2]))
    return same and now[0] == guard[0] and now[1] == guard[1] and now[3] == guard[3]


def _same_indices(entry: _Entry, value: Any) -> bool:
    """Whether a scipy operand's index arrays still hold what was converted: edited in
    place (``A.indices[:] = ...``), the kept structure would be another matrix's."""
    arrays = _guard(value)[2] if entry.kept else ()
    return all(np.array_equal(a, k) for a, k in zip(arrays, entry.kept, strict=True))


def _source_values(value: Any) -> np.ndarray:
    """The operand's stored values, in the order its slots are numbered."""
    if isinstance(value, SparseTensor):
        if value.parts:
            return np.concatenate([p.values for p in value.parts])
        return value.values
    return np.asarray(value.data).reshape(-1)


def _numbered(value: Any) -> Any:
    """``value`` with its stored values replaced by their slot numbers 1, 2, ... (float64),
    or None where slots cannot be numbered (duplicates, other scipy formats)."""
    if isinstance(value, SparseTensor):
        if value.shared or value.summed() is not value:
            return None
        return value.with_values(np.arange(1, value.nse + 1, dtype=np.float64))
    if value.format not in _SCIPY_FORMATS or not value.has_canonical_format:
        return None
    data = np.asarray(value.data)
    if value.format != "bsr" and data.shape[0] != value.nnz:
        return None
    numbered = value.copy()
    numbered.data = np.arange(1, data.size + 1, dtype=np.float64).reshape(data.shape)
    return numbered


def _convert(value: Any, layout: AnyLayout) -> tuple[SparseTensor, _Entry | None]:
    """``value`` in ``layout``, and the entry that converts it again by a gather (or None)."""
    numbered = _numbered(value)
    if numbered is None or _source_values(value).size >= 2**53:
        return _plain(value, layout), None
    try:
        structure = _plain(numbered, layout)
    except SparsecompError:
        return _plain(value, layout), None
    take = []
    for part in structure.parts or (structure,):
        slots = part.values.astype(np.int64) - 1
        padding = np.flatnonzero(slots < 0)
        if padding.size:
            slots[padding] = 0
        take.append((slots, padding if padding.size else None))
    if not _one_to_one(take, _source_values(value).size):
        return _plain(value, layout), None
    entry = _Entry(None, _guard(value), structure, take, _kept(value))
    return _gather(entry, _source_values(value)), entry


def _one_to_one(take: list[tuple[np.ndarray, np.ndarray | None]], stored: int) -> bool:
    """Whether each of the operand's ``stored`` slots went to exactly one place: not so
    where the conversion summed repeated coordinates (a scipy matrix whose
    ``has_canonical_format`` is stale: its index arrays edited in place), whose sums of
    slot numbers are no slots (a gather read out of bounds)."""
    used = [
        slots if padding is None else np.delete(slots, padding) for slots, padding in take
    ]
    every = np.concatenate(used) if used else np.zeros(0, np.int64)
    if every.size != stored:
        return False
    if not stored:
        return True
    if every.min() < 0 or every.max() >= stored:
        return False
    return bool(np.bincount(every, minlength=stored).max() <= 1)


def _plain(value: Any, layout: AnyLayout) -> SparseTensor:
    if isinstance(value, SparseTensor):
        value.recheck()  # index buffers shared with the caller may have changed
        return value.to(layout).summed()  # kernels assume no repeated coordinates
    return SparseTensor.from_scipy(value, layout).summed()


def _gather(entry: _Entry, values: np.ndarray) -> SparseTensor:
    """The cached structure holding ``values`` (the operand's, in slot order)."""
    tensors = []
    for part, (slots, padding) in zip(
        entry.structure.parts or (entry.structure,), entry.take, strict=True
    ):
        if values.size:
            vals = values.take(slots)
            if padding is not None:
                vals[padding] = 0
        else:  # nothing stored: every slot is padding
            vals = np.zeros(slots.shape[0], values.dtype)
        st = part._storage
        assert st is not None
        tensors.append(
            SparseTensor(
                part.shape,
                part.layout,
                vals.dtype,
                Storage(st.positions, st.coordinates, vals),
                checked=part._checked,  # the cached structure's (checked at its first call)
            )
        )
    whole = entry.structure
    if not whole.parts:
        return tensors[0]
    return SparseTensor(whole.shape, whole.layout, values.dtype, None, tuple(tensors))
