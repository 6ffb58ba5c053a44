"""The ABI of a compiled function, read from ``manifest.json`` (``sparse_iter.abi``).

Each argument and result is one of::

    {"kind": "dense",  "dtype": "float32", "shape": [null, "k", 16]}
    {"kind": "scalar", "dtype": "float32"}
    {"kind": "scalar", "dtype": "int64", "shape": ["m"]}
    {"kind": "sparse", "dtype": "float32", "shape": ["m", "k"],
     "layout": "#sparse_iter.layout<...>",
     "buffers": [["pos1", "int32"], ["crd1", "int32"], ["values", "float32"]]}

Shape entries are static sizes (ints), size symbols (strings: equal symbols
are equal sizes) or null (any size). A scalar with a shape of one entry is an
``index`` argument that sizes a loop of the kernel (``tensor.empty(%m)``): its
value is checked as that size. A sparse result may name a
``"declared_layout"`` (a function compiled by the upstream sparsifier holds
n:m values, and BSR ones whose shape is not whole blocks, unblocked): the
runtime converts the result to it. A sparse argument
marked ``"blocks": [2, 2]`` (a BSR argument of dynamic shape that a function
compiled by the upstream sparsifier keeps blocked) must have a shape that
divides into those blocks. A sparse argument marked ``"guarded": true``
has its coordinates checked by the kernel as it reads them (pass
``sparse-iter-guard-coordinates``; ``"guarded": false``: the pass was asked to and
could not); such a function's ABI says ``"status": true``
and it takes one more argument after the others, a ``memref<1xi32>`` status
word that the kernel sets when a coordinate was out of range. See docs/cpu-abi.md.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from sparsecomp.errors import SparsecompError
from sparsecomp.formats.names import AnyLayout, layout_from_attr

#: Prefix of the C-interface wrapper of each public function (``convert-func-to-llvm``).
CIFACE = "_mlir_ciface_"
#: Prefix of its packed form ``void f(void **args)`` (``sparse-iter-pack-entry-points``).
PACKED = "_sparsecomp_packed_"


def packed_symbol(symbol: str) -> str:
    """The packed form's name for C-interface symbol ``symbol`` (``_mlir_ciface_f``)."""
    return PACKED + symbol.removeprefix(CIFACE)


DTYPES = (
    "bool", "int8", "int16", "int32", "int64", "float16", "float32", "float64",
    "complex64", "complex128",
)  # fmt: skip
#: Buffer dtypes beyond the element dtypes: ``mma.sp`` metadata words.
BUFFER_DTYPES = (*DTYPES, "uint32")
Dim = int | str | None


@dataclass(frozen=True)
class ArgSpec:
    """One argument or result: its kind, element dtype, shape and (sparse) storage."""

    kind: str
    dtype: np.dtype[Any]
    shape: tuple[Dim, ...] = ()
    layout: AnyLayout | None = None
    buffers: tuple[tuple[str, np.dtype[Any]], ...] = ()
    #: a sparse result's layout as declared, when the kernel returns another
    declared_layout: AnyLayout | None = None
    #: a sparse argument whose coordinates the kernel checks as it reads them
    guarded: bool = False
    #: a sparse argument the kernel was asked to guard and could not
    unguardable: bool = False
    #: per dimension, the block its size must be a multiple of (the upstream
    #: sparsifier's BSR of dynamic shape); () for no such rule
    blocks: tuple[int, ...] = ()

    @property
    def rank(self) -> int:
        return len(self.shape)

    def describe(self) -> str:
        """``float32``, ``dense float32[m, 16]`` or ``sparse float32[m, k] csr``."""
        return self._description

    @functools.cached_property
    def _description(self) -> str:  # computed once: error messages name it on every call
        if self.kind == "scalar":  # a size: "int64 = m"
            return f"{self.dtype} = {self.shape[0]}" if self.shape else str(self.dtype)
        dims = ", ".join("?" if d is None else str(d) for d in self.shape)
        text = f"{self.kind} {self.dtype}[{dims}]"
        return f"{text} {self.layout}" if self.layout is not None else text


@dataclass(frozen=True)
class Signature:
    """A public function: its name, C symbol, and flattened-ABI arguments and results."""

    name: str
    symbol: str
    args: tuple[ArgSpec, ...]
    results: tuple[ArgSpec, ...]
    #: the function takes a status word after its arguments (guarded coordinates)
    status: bool = False
    #: ``(result, argument)``: results written into an argument instead of returned
    #: (a variant for calls with ``out=``, :mod:`.destinations`)
    destinations: tuple[tuple[int, int], ...] = ()

    def describe(self) -> str:
        """``name(arg, ...) -> result`` in words."""
        args = ", ".join(a.describe() for a in self.args)
        res = [r.describe() for r in self.results]
        out = "()" if not res else res[0] if len(res) == 1 else f"({', '.join(res)})"
        return f"{self.name}({args}) -> {out}"


def uncallable_reason(entry: Any) -> str | None:
    """Why a manifest function cannot be called from Python (``{"uncallable": why}``), or None.

    Public functions whose signature has no Python form (memrefs, vectors)
    are compiled for the module's own callers and listed this way.
    """
    abi = entry.get("abi") if isinstance(entry, dict) else None
    if isinstance(abi, str):
        abi = _json(abi, "manifest")
    why = abi.get("uncallable") if isinstance(abi, dict) else None
    return str(why) if why is not None else None


def parse_signature(name: str, entry: Any) -> Signature:
    """A :class:`Signature` from one ``functions`` entry of ``manifest.json``."""
    where = f"manifest function '{name}'"
    if not isinstance(entry, dict) or not isinstance(entry.get("symbol"), str):
        raise SparsecompError(f"{where} needs a 'symbol' string and an 'abi' object")
    abi = entry.get("abi")
    if isinstance(abi, str):
        abi = _json(abi, where)
    if not isinstance(abi, dict):
        raise SparsecompError(f"{where} has no 'abi' object")
    args = tuple(
        _spec(a, f"{where}, argument {i}") for i, a in enumerate(_list(abi, "args", where))
    )
    results = tuple(
        _spec(r, f"{where}, result {i}") for i, r in enumerate(_list(abi, "results", where))
    )
    written = abi.get("destinations", [])
    if not isinstance(written, list) or not all(
        isinstance(w, list) and len(w) == 2 and all(isinstance(n, int) for n in w) for w in written
    ):
        raise SparsecompError(f"{where}: 'destinations' must list [result, argument] pairs")
    destinations = tuple((r, k) for r, k in written)
    return Signature(name, entry["symbol"], args, results, abi.get("status") is True, destinations)


def _json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise SparsecompError(f"{where}: the abi is not valid JSON ({err})") from None


def _list(abi: dict[str, Any], key: str, where: str) -> list[Any]:
    value = abi.get(key, [])
    if not isinstance(value, list):
        raise SparsecompError(f"{where}: abi '{key}' must be a list")
    return value


def _spec(raw: Any, where: str) -> ArgSpec:
    if not isinstance(raw, dict) or raw.get("kind") not in ("dense", "scalar", "sparse"):
        raise SparsecompError(f"{where}: expected kind dense, scalar or sparse, got {raw!r}")
    kind = raw["kind"]
    dtype = _dtype(raw.get("dtype"), where)
    if kind == "scalar":  # a "shape" of one entry: the value is that size
        return ArgSpec(kind, dtype, _shape(raw.get("shape", []), where))
    shape = _shape(raw.get("shape"), where)
    if kind == "dense":
        return ArgSpec(kind, dtype, shape)
    declared = raw.get("declared_layout")
    return ArgSpec(
        kind,
        dtype,
        shape,
        _layout(raw.get("layout"), len(shape), where),
        _buffers(raw.get("buffers"), where),
        None if declared is None else _layout(declared, len(shape), where),
        raw.get("guarded") is True,
        raw.get("guarded") is False,
        _blocks(raw.get("blocks", []), len(shape), where),
    )


def _blocks(raw: Any, rank: int, where: str) -> tuple[int, ...]:
    ok = isinstance(raw, list) and all(type(b) is int and b > 0 for b in raw)
    if not ok or len(raw) not in (0, rank):
        raise SparsecompError(f"{where}: abi 'blocks' must be {rank} positive ints, got {raw!r}")
    return tuple(raw)


def _dtype(name: Any, where: str, known: tuple[str, ...] = DTYPES) -> np.dtype[Any]:
    if name == "index":
        return np.dtype(np.int64)
    if name not in known:
        raise SparsecompError(f"{where}: unsupported dtype {name!r}; expected one of {known}")
    return np.dtype(name)


def _shape(raw: Any, where: str) -> tuple[Dim, ...]:
    ok = isinstance(raw, list) and all(
        d is None or isinstance(d, str) or (type(d) is int and d >= 0) for d in raw
    )
    if not ok:
        raise SparsecompError(f"{where}: shape must list sizes, size symbols or null, got {raw!r}")
    return tuple(raw)


def _layout(text: Any, rank: int, where: str) -> AnyLayout:
    if not isinstance(text, str):
        raise SparsecompError(f"{where}: a sparse argument needs its layout attribute text")
    layout = layout_from_attr(text)
    if layout.rank != rank:
        raise SparsecompError(f"{where}: layout {layout} has rank {layout.rank}, shape {rank}")
    return layout


def _buffers(raw: Any, where: str) -> tuple[tuple[str, np.dtype[Any]], ...]:
    if not isinstance(raw, list) or not all(
        isinstance(b, list) and len(b) == 2 and isinstance(b[0], str) for b in raw
    ):
        raise SparsecompError(f"{where}: buffers must list [name, dtype] pairs, got {raw!r}")
    return tuple((n, _dtype(d, where, BUFFER_DTYPES)) for n, d in raw)
