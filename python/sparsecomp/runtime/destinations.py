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
from sparsecomp.runtime.abi import Signature
from sparsecomp.runtime.marshal import check_shape

_log = logging.getLogger("sparsecomp")

#: ``{result: argument or None (a new one)} -> the variant's callable and signature``
MakeVariant = Callable[[Mapping[int, int | None]], tuple[Callable[..., Any], Signature]]
#: a key of :class:`Destinations`' cache: per result with an ``out`` array, where it goes
Key = tuple[tuple[int, int | None], ...]


class Destinations:
    """``out=`` for one function: its variants per kind of destination, compiled on need."""

    def __init__(
        self, signature: Signature, call: Callable[..., Any], make: MakeVariant | None
    ) -> None:
        self.signature = signature
        self._call = call  # the function itself (for a call whose result is copied)
        self._make = make
        self._variants: dict[Key, tuple[Callable[..., Any], Signature] | str] = {}
        self._said: set[str] = set()

    def __call__(self, args: tuple[Any, ...], out: Any) -> Any:
        outs = _outs(self.signature, out)
        key, why = _key(self.signature, args, outs)
        variant = self._variant(key) if why is None else why
        if isinstance(variant, str):
            self._say(variant)
            return self._copied(args, outs)
        call, sig = variant
        fresh = [outs[r] for r, k in key if k is None]
        _check_shapes(sig, (*args, *fresh), outs, key, len(args))
        returned = call(*args, *fresh)
        return _assemble(self.signature, outs, returned)

    def _variant(self, key: Key) -> tuple[Callable[..., Any], Signature] | str:
        if key in self._variants:
            return self._variants[key]
        if self._make is None:
            found: tuple[Callable[..., Any], Signature] | str = (
                "the executable cannot compile variants (loaded from a directory, or built "
                "for a GPU)"
            )
        else:
            started = time.perf_counter()
            try:
                found = self._make(dict(key))
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
            except SparsecompError as err:
                found = f"its variant did not compile: {_first_error(str(err))}"
            else:
                expected = _expected(self.signature, key, len(self.signature.args))
                if set(found[1].destinations) != expected:
                    found = "its kernel does not take destinations (an upstream-sparsifier one)"
        self._variants[key] = found
        return found

    def _copied(self, args: tuple[Any, ...], outs: dict[int, np.ndarray]) -> Any:
        """The plain call, its results copied into ``outs``."""
        got = self._call(*args)
        results = got if len(self.signature.results) > 1 else (got,)
        for r, array in outs.items():
            value = np.asarray(results[r])
            if value.shape != array.shape:
                raise ArgumentError(
                    f"'{self.signature.name}': out= array for result {r} has shape "
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
            f"'{name}' has {len(sig.results)} result(s): out= takes "
            + ("an array" if len(sig.results) == 1 else f"a tuple of {len(sig.results)}")
            + (f", got {type(out).__name__}" if not isinstance(out, tuple) else "")
        )
    found = {}
    for r, (spec, array) in enumerate(zip(sig.results, out, strict=True)):
        if array is None:
            continue
        where = f"'{name}' out= for result {r}"
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
        for axis, want in enumerate(spec.shape):
            if isinstance(want, int) and array.shape[axis] != want:
                raise ArgumentError(
                    f"{where}: expected size {want} in dimension {axis}, got {array.shape}"
                )
        found[r] = array
    if not found:
        raise ArgumentError(f"'{name}': out= names no array")
    return found


#: the arrays of a scipy.sparse matrix, by format
_SCIPY_ARRAYS = ("data", "indices", "indptr", "row", "col", "offsets")


def _arrays(value: Any) -> list[np.ndarray]:
    """The numpy arrays an operand holds (a scipy matrix's, a SparseTensor's buffers)."""
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, SparseTensor):
        return [a for _, a in value.buffers()]
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
    for r, array in sorted(outs.items()):
        same = [
            k
            for k, (spec, arg) in enumerate(zip(sig.args, args, strict=False))
            if arg is array and spec.kind == "dense"
        ]
        key.append((r, same[0] if same else None))
    claimed = {k for _, k in key if k is not None}
    for r, array in outs.items():
        for k, arg in enumerate(args):
            if k in claimed and arg is array:
                continue
            if any(np.shares_memory(array, a) for a in _arrays(arg)):
                return tuple(key), f"the out= array for result {r} shares memory with argument {k}"
        if any(other is not array and np.shares_memory(array, other) for other in outs.values()):
            return tuple(key), "two out= arrays share memory"
    return tuple(key), None


def _expected(sig: Signature, key: Key, count: int) -> set[tuple[int, int]]:
    """The ``(result, argument)`` pairs a variant for ``key`` says it writes."""
    pairs, new = set(), count
    for r, k in key:
        if k is None:
            k, new = new, new + 1
        pairs.add((r, k))
    return pairs


def _check_shapes(
    sig: Signature, given: tuple[Any, ...], outs: dict[int, np.ndarray], key: Key, count: int
) -> None:
    """Check each ``out`` array's shape against the sizes the other arguments give."""
    sizes: dict[str, tuple[int, str]] = {}
    for n, (spec, value) in enumerate(zip(sig.args[:count], given[:count], strict=True)):
        shape = getattr(value, "shape", None)
        if spec.kind != "scalar" and isinstance(shape, tuple) and len(shape) == spec.rank:
            try:
                check_shape(spec, tuple(int(d) for d in shape), ("", f"argument {n}"), sizes)
            except ArgumentError:
                pass  # the call itself says what is wrong with the arguments
    fresh = [r for r, k in key if k is None]
    for r, k in key:
        index = k if k is not None else count + fresh.index(r)
        check_shape(
            sig.args[index],
            outs[r].shape,
            (f"'{sig.name}' out= for result {r}", f"out[{r}]"),
            sizes,
        )


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
