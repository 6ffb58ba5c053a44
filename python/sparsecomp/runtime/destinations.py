"""``out=``: a call's results written into arrays the caller owns.

``exe(A, B, out=D)`` writes the result into ``D`` and returns ``D``; with
several results ``out`` is a tuple with one array (or None) per result. The
first such call compiles a variant of the function that takes each
destination as one more argument (:func:`sparsecomp.compiler.variants.with_destinations`):
the kernel builds the result in the caller's array, with no allocation and
no copy (passes ``sparse-iter-destinations`` and
``sparse-iter-drop-destination-results``). An ``out`` array that *is* a dense
argument of the result's type (``exe(A, B, C, out=C)`` for upstream's
``linalg.matmul ... outs(%C)``) makes a variant that accumulates into that
argument in place: ``C += A B``. Variants are cached per kind of
destination, like every kernel.

An ``out`` array must be a writable, C-contiguous numpy array of the
result's dtype and shape; the result's shape is known before the call from
the arguments' (its sizes are symbols of the variant's signature), so a
wrong shape is an :class:`~sparsecomp.errors.ArgumentError` before any
native code runs. Where no variant can be made (an ``out`` array sharing
memory with another operand, a loaded executable without its source, a
``cuda:sm_XX`` executable, a result whose size the arguments do not give)
the call runs as usual and its result is copied into ``out``; the
``sparsecomp`` logger says why, once per function and reason.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from sparsecomp.errors import ArgumentError, SparsecompError
from sparsecomp.formats.tensor import SparseTensor
from sparsecomp.runtime.abi import ArgSpec, Signature
from sparsecomp.runtime.fastcall import MISS

_log = logging.getLogger("sparsecomp")

#: ``{result: argument or None (a new one)} -> the variant's callable and signature``
MakeVariant = Callable[[Mapping[int, int | None]], tuple[Callable[..., Any], Signature]]
#: a key of :class:`Destinations`' cache: per result with an ``out`` array, where it goes
Key = tuple[tuple[int, int | None], ...]
#: a size an ``out`` array must have: a constant, or an argument's ``(position, dimension)``
Want = int | tuple[int, int]
#: a compiled variant: its callable, and per result the sizes its ``out`` array must have
Variant = tuple[Callable[..., Any], dict[int, list[tuple[int, Want]]]]


class Destinations:
    """``out=`` for one function: its variants per kind of destination, compiled on need."""

    def __init__(
        self, signature: Signature, call: Callable[..., Any], make: MakeVariant | None
    ) -> None:
        self.signature = signature
        self._call = call  # the function itself (for a call whose result is copied)
        self._make = make
        self._variants: dict[Key, Variant | str] = {}
        self._said: set[str] = set()

    def __call__(self, args: tuple[Any, ...], out: Any) -> Any:
        if type(out) is np.ndarray and len(self.signature.results) == 1:
            if (got := self._routed(args, out)) is not MISS:
                return got
        outs = _outs(self.signature, out)
        key, why = _key(self.signature, args, outs)
        variant = self._variant(key) if why is None else why
        if isinstance(variant, str):
            self._say(variant)
            return _as_given(self._copied(args, outs), out)
        call, sizes = variant
        fresh = []
        for r, k in key:
            array = outs[r]
            for dim, want in sizes[r]:
                _check_size(self.signature.name, r, array, dim, want, args)
            if k is None:
                fresh.append(array)
        returned = call(*args, *fresh)
        return _as_given(_assemble(self.signature, outs, returned), out)

    def _routed(self, args: tuple[Any, ...], out: np.ndarray) -> Any:
        """``out``, the call made in C by the variant a call like it compiled, or
        ``MISS``. The C path checks what the careful path below does (the out
        array's dtype, rank, layout and sizes, that it is writable and shares no
        memory with another operand: ``fastcall``) and declines anything else,
        which then takes that path: a first call, a copy, every error."""
        same = _argument(self.signature, args, out)
        found = self._variants.get(((0, same),))
        router = (
            None if found is None or isinstance(found, str) else getattr(found[0], "_router", None)
        )
        if router is None or router(args if same is not None else (*args, out)) is MISS:
            return MISS
        return out

    def _variant(self, key: Key) -> Variant | str:
        found = self._variants.get(key)
        if found is None:
            made = self._compile(key)
            found = made if isinstance(made, str) else (made[0], _sizes(made[1], key))
            self._variants[key] = found
        return found

    def _compile(self, key: Key) -> tuple[Callable[..., Any], Signature] | str:
        if self._make is None:
            found: tuple[Callable[..., Any], Signature] | str = (
                "the executable cannot compile variants (loaded from a directory, or built "
                "for a GPU)"
            )
        else:
            started = time.perf_counter()
            try:
                found = self._make(dict(key))
            except SparsecompError as err:
                return f"its variant did not compile: {_first_error(str(err))}"
            expected = _expected(self.signature, key, len(self.signature.args))
            if set(found[1].destinations) != expected:
                return "its kernel does not take destinations (an upstream-sparsifier one)"
            _log.info(
                "'%s': compiled its variant for out= (%s) in %.2f s; it writes the "
                "results into the out= arrays",
                self.signature.name,
                ", ".join(
                    f"result {r} into " + ("a new argument" if k is None else f"argument {k}")
                    for r, k in key
                ),
                time.perf_counter() - started,
            )
        return found

    def _copied(self, args: tuple[Any, ...], outs: dict[int, np.ndarray]) -> Any:
        """The plain call, its results copied into ``outs``."""
        got = self._call(*args)
        results = got if len(self.signature.results) > 1 else (got,)
        for r, array in outs.items():
            value = np.asarray(results[r])
            if value.shape != array.shape:
                raise ArgumentError(
                    f"{self.signature.name}: out= for result {r}: the array has shape "
                    f"{array.shape}, the result has shape {value.shape}"
                )
            np.copyto(array, value)
        return _assemble(self.signature, outs, None, results)

    def _say(self, why: str) -> None:
        if why not in self._said:
            self._said.add(why)
            _log.info(
                "'%s' with out=: the result is computed, then copied into out (%s)",
                self.signature.name,
                why,
            )


def _refuse(name: str, r: int, spec: ArgSpec, array: Any) -> None:
    """The ``ArgumentError`` that says why ``array`` cannot receive result ``r``."""
    where = f"{name}: out= for result {r}"
    if spec.kind != "dense":
        raise ArgumentError(
            f"{where}: out= takes arrays for dense results; this one is {spec.kind}"
        )
    if not isinstance(array, np.ndarray):
        raise ArgumentError(f"{where}: expected a numpy array, got {type(array).__name__}")
    if array.dtype != spec.dtype or array.ndim != spec.rank:
        raise ArgumentError(
            f"{where}: expected {spec.describe()}, got {array.dtype} of rank {array.ndim}"
        )
    if not array.flags.c_contiguous or not array.flags.writeable:
        raise ArgumentError(
            f"{where}: the array must be C-contiguous and writable",
            hint="pass np.ascontiguousarray(...) or a fresh np.empty(...)",
        )
    raise ArgumentError(f"{where}: expected {spec.describe()}, got shape {array.shape}")


def _first_error(text: str) -> str:
    """The line of a compiler message that says what failed."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()] or ["?"]
    return next((line for line in lines if "error:" in line), lines[0])[:300]


def _outs(sig: Signature, out: Any) -> dict[int, np.ndarray]:
    """``out`` as ``{result: array}``, each checked against its result's spec."""
    name = sig.name
    if len(sig.results) == 1 and not isinstance(out, tuple):
        out = (out,)
    if not isinstance(out, tuple) or len(out) != len(sig.results):
        raise ArgumentError(
            f"{name} has {len(sig.results)} result(s): out= takes "
            + ("an array" if len(sig.results) == 1 else f"a tuple of {len(sig.results)}")
            + (f", got {type(out).__name__}" if not isinstance(out, tuple) else "")
        )
    found = {}
    for r, (spec, array) in enumerate(zip(sig.results, out, strict=True)):
        if array is None:
            continue
        if isinstance(array, np.ndarray) and type(array) is not np.ndarray:
            array = array.view(np.ndarray)  # np.memmap...: the same memory, a plain array
        if (
            spec.kind != "dense"
            or type(array) is not np.ndarray
            or array.dtype != spec.dtype
            or array.ndim != spec.rank
            or not array.flags.c_contiguous
            or not array.flags.writeable
            or any(isinstance(w, int) and w != n for w, n in zip(spec.shape, array.shape))
        ):
            _refuse(name, r, spec, array)
        found[r] = array
    if not found:
        raise ArgumentError(f"{name}: out= names no array")
    arrays = list(found.items())
    for i, (r, array) in enumerate(arrays):
        for q, other in arrays[i + 1 :]:
            if np.shares_memory(array, other):
                raise ArgumentError(
                    f"{name}: the out= arrays for results {r} and {q} share memory; "
                    "each result needs an array of its own"
                )
    return found


#: operands that hold no array
_SCALARS = (int, float, complex, np.generic)
#: the arrays of a scipy.sparse matrix, by format
_SCIPY_ARRAYS = ("data", "indices", "indptr", "row", "col", "offsets")


def _arrays(value: Any) -> list[np.ndarray]:
    """The numpy arrays an operand holds (a scipy matrix's, a SparseTensor's buffers)."""
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, SparseTensor):
        return [a for _, a in value.buffers()]
    indptr = getattr(value, "indptr", None)
    if type(indptr) is np.ndarray:  # CSR, CSC, BSR
        return [value.data, value.indices, indptr]
    scipy_sparse = sys.modules.get("scipy.sparse")
    if scipy_sparse is not None and scipy_sparse.issparse(value):
        held = (getattr(value, n, None) for n in _SCIPY_ARRAYS)
        return [a for a in held if isinstance(a, np.ndarray)]
    return []


def _key(
    sig: Signature, args: tuple[Any, ...], outs: dict[int, np.ndarray]
) -> tuple[Key, str | None]:
    """Where each ``out`` array goes (an argument it is, or None: a new one), or why
    none can be a destination."""
    key: list[tuple[int, int | None]] = []
    for r, array in outs.items():
        same = _argument(sig, args, array)
        for k, arg in enumerate(args):
            if k == same:
                continue
            if type(arg) is np.ndarray:
                if np.shares_memory(array, arg):
                    return (), f"the out= array for result {r} shares memory with argument {k}"
            elif not isinstance(arg, _SCALARS):
                if any(np.shares_memory(array, a) for a in _arrays(arg)):
                    return (), f"the out= array for result {r} shares memory with argument {k}"
        key.append((r, same))
    return tuple(key), None


def _argument(sig: Signature, args: tuple[Any, ...], array: np.ndarray) -> int | None:
    """The dense argument ``array`` is (the result is accumulated into it), or None."""
    specs = sig.args
    for k, arg in enumerate(args):
        if arg is array and k < len(specs) and specs[k].kind == "dense":
            return k
    return None


def _expected(sig: Signature, key: Key, count: int) -> set[tuple[int, int]]:
    """The ``(result, argument)`` pairs a variant for ``key`` says it writes."""
    pairs, new = set(), count
    for r, k in key:
        if k is None:
            k, new = new, new + 1
        pairs.add((r, k))
    return pairs


def _sizes(sig: Signature, key: Key) -> dict[int, list[tuple[int, Want]]]:
    """Per result of ``key``, the sizes its ``out`` array must have, from the variant's
    signature: a destination's size symbol is the first argument dimension naming it."""
    count = len(sig.args) - sum(1 for _, k in key if k is None)
    first: dict[str, tuple[int, int]] = {}
    for n, spec in enumerate(sig.args[:count]):
        for d, size in enumerate(spec.shape if spec.kind != "scalar" else ()):
            if isinstance(size, str):
                first.setdefault(size, (n, d))
    found: dict[int, list[tuple[int, Want]]] = {}
    fresh = count
    for r, k in key:
        if k is None:
            k, fresh = fresh, fresh + 1
        wants: list[tuple[int, Want]] = []
        for d, size in enumerate(sig.args[k].shape):
            if isinstance(size, int):
                wants.append((d, size))
            elif isinstance(size, str) and first.get(size, (k, d)) != (k, d):
                wants.append((d, first[size]))
        found[r] = wants
    return found


def _check_size(
    name: str, r: int, array: np.ndarray, dim: int, want: Want, args: tuple[Any, ...]
) -> None:
    """An ``ArgumentError`` unless ``array`` has the size ``want`` in ``dim``."""
    if isinstance(want, int):
        size, origin = want, "the signature"
    else:
        shape = getattr(args[want[0]], "shape", None) if want[0] < len(args) else None
        if not isinstance(shape, tuple) or len(shape) <= want[1]:
            return  # a wrong argument: the call itself says what is wrong
        size, origin = shape[want[1]], f"argument {want[0]} dimension {want[1]}"
    if array.shape[dim] != size:
        raise ArgumentError(
            f"{name}: out= for result {r}: size {array.shape[dim]} in dimension {dim}, "
            f"expected {size} (from {origin}); got shape {array.shape}"
        )


def _as_given(value: Any, out: Any) -> Any:
    """``value`` with the caller's own ``out`` objects in place of the plain arrays the
    call wrote through (an ``np.matrix``, a ``np.memmap``: "written into, and
    returned" is that object)."""
    if not isinstance(out, tuple):
        return out if isinstance(out, np.ndarray) else value
    if not isinstance(value, tuple):
        return value
    return tuple(o if isinstance(o, np.ndarray) else v for v, o in zip(value, out, strict=False))


def _assemble(
    sig: Signature, outs: dict[int, np.ndarray], returned: Any, results: Any = None
) -> Any:
    """The call's value: the ``out`` arrays where given, the returned results elsewhere."""
    if len(sig.results) == 1:
        return outs[0]
    if results is None:
        rest = [returned] if len(sig.results) - len(outs) == 1 else list(returned or ())
        results = []
        for r in range(len(sig.results)):
            results.append(outs[r] if r in outs else rest.pop(0))
    return tuple(outs.get(r, v) for r, v in enumerate(results))
