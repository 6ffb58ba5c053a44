"""The C call path: a function's common calls without Python in between.

A call through :class:`~sparsecomp.runtime.call.Caller` costs 10-30 us of
Python (argument checks, ctypes, wrapping the result) before and after a
kernel that may take less. The C extension ``sparsecomp.runtime._fastcall``
(``_fastcall.c``, built by ``pip install``) does the same for the calls
:mod:`.fastpath` takes, with the same checks, and declines every other
call, which then goes the Python way (conversions, variants, errors):

* :func:`native_kernel` builds a ``_fastcall.Kernel`` for one compiled
  function from its ABI: what each argument must be, the static sizes and
  size symbols, and how results come back. It calls the function through
  its packed form ``_sparsecomp_packed_<name>(void **args)`` (pass
  ``sparse-iter-pack-entry-points``), one C prototype for every signature.
  One dense result is built in C; other results go through
  :mod:`.results` as before. A variant with destinations (``out=``,
  :mod:`.destinations`) has its ``out`` arrays checked here too: writable,
  and sharing no memory with any other array of the call.
* :func:`native_router` builds a ``_fastcall.Router`` for a public
  function: which kernel (the function's own or a variant's) takes a call,
  keyed by the dense sizes that pick a static-size variant. The Python
  path adds a route after it has resolved a call (:mod:`.executable`), so
  the next call like it runs in C from the start.

Either returns None where the C path cannot serve: the extension is not
built (no Python headers at install), the library predates packed entry
points, an argument kind it does not know, or ``SPARSECOMP_NATIVE_CALLS=0``.
Calls then take the Python path, with the same results.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from sparsecomp import knobs
from sparsecomp.formats.scipyio import compressed_kind
from sparsecomp.formats.tensor import SparseTensor
from sparsecomp.runtime.abi import ArgSpec, Signature, packed_symbol
from sparsecomp.runtime.fastpath import FastArgs
from sparsecomp.runtime.memref import Malloced

try:  # the extension itself, not through the package (whose __init__ imports this module)
    import sparsecomp.runtime._fastcall as _fastcall  # type: ignore[import-not-found]
except ImportError:  # not built: every call takes the Python path
    _fastcall = None

#: What a Kernel or Router returns for a call it does not take.
MISS: Any = _fastcall.MISS if _fastcall is not None else object()

_DENSE, _SCALAR, _SPARSE = 0, 1, 2
#: scalar dtype -> the extension's code (float16 and complex scalars: no C path)
_SCALARS = {
    "bool": 0, "int8": 1, "int16": 2, "int32": 3, "int64": 4, "float32": 5, "float64": 6,
}  # fmt: skip
_NO_RESULT, _ONE_DENSE, _STRUCT, _SCALAR_RESULT = 0, 1, 2, 3
_MAX_RANK = 8
_MAX_SIZE = 2**31 - 1  # static sizes the extension holds as C ints


def extension() -> Any:
    """The extension module (its ``guarded_call`` runs a kernel so that a failed
    run-time check raises), or None where it is not built."""
    return _fastcall


def available() -> bool:
    """Whether calls can take the C path (the extension is built and not switched off)."""
    return _fastcall is not None and knobs.native_calls()


def _arg_plan(
    spec: ArgSpec, checked: dict[int, Any] | None, scipy_limit: np.ndarray | None, dest: bool
) -> tuple[Any, ...] | None:
    if spec.rank > _MAX_RANK:
        return None
    if spec.kind == "dense":
        return (_DENSE, spec.dtype.num, spec.rank, int(dest))
    if spec.kind == "scalar":  # a scalar that is a size is checked by the Python paths
        code = _SCALARS.get(spec.dtype.name)
        return None if code is None or spec.shape else (_SCALAR, code)
    if spec.blocks:  # its shape must be whole blocks: checked by the Python paths
        return None
    names = tuple(name for name, _ in spec.buffers)
    kind = compressed_kind(spec.layout) if names == ("pos1", "crd1", "values") else None
    if kind is not None and not all(dt.itemsize in (4, 8) for _, dt in spec.buffers[:2]):
        kind = None  # scipy's index arrays are 32- or 64-bit: its checks assume so
    nums = tuple(dt.num for _, dt in spec.buffers) if kind is not None else (0, 0, 0)
    limit = None if spec.guarded else scipy_limit
    plan = (_SPARSE, checked, SparseTensor, len(spec.buffers), spec.rank, kind, *nums)
    return (*plan, int(spec.guarded), limit)


def native_kernel(
    library: ctypes.CDLL,
    sig: Signature,
    fast: FastArgs,
    result_struct: type[ctypes.Structure] | None,
    finish: Any,
    scipy_limit: np.ndarray | None = None,
) -> Any:
    """The ``_fastcall.Kernel`` of ``sig`` in ``library``, or None (no C path).

    ``fast`` is the function's Python fast path (its checked SparseTensors
    are shared); ``finish(raw, inputs)`` builds the results the extension
    does not: ``raw`` the result struct's bytes (a scalar's bytes), ``inputs``
    data address -> argument array. Scipy operands of unguarded arguments with
    at least ``scipy_limit[0]`` entries are declined (an int64 array read at each
    call: < 0 or None, none are). A function with a
    status word (guarded coordinates) gets one per call; where the kernel sets
    it, the call is declined after the fact (its results dropped), and the
    Python path, which checks everything, raises the error.
    """
    if not available():
        return None
    try:
        address = ctypes.cast(library[packed_symbol(sig.symbol)], ctypes.c_void_p).value
    except AttributeError:
        return None  # built before packed entry points
    plan = []
    written = {k for _, k in sig.destinations}  # out= arrays: writable, overlapping nothing
    for n, (spec, checked) in enumerate(zip(sig.args, fast.checked, strict=True)):
        entry = _arg_plan(spec, checked, scipy_limit, n in written)
        if entry is None:
            return None
        plan.append(entry)
    if any(size > _MAX_SIZE for _, _, size in fast.sizes.static):
        return None
    symbols = tuple((*first, *other) for first, others in fast.sizes.symbols for other in others)
    result = _result_plan(sig, result_struct)
    if result is None:
        return None
    try:
        return _fastcall.Kernel(
            address,
            library,
            tuple(plan),
            fast.sizes.static,
            symbols,
            result,
            finish,
            Malloced,
            int(sig.status),
        )
    except ValueError:  # beyond the extension's fixed limits (arguments, sizes, result bytes)
        return None


def _result_plan(
    sig: Signature, result_struct: type[ctypes.Structure] | None
) -> tuple[int, int, int, int, int] | None:
    """``(mode, bytes, rank, typenum, itemsize)`` of the results."""
    if not sig.results:
        return (_NO_RESULT, 0, 0, 0, 0)
    one = sig.results[0]
    if len(sig.results) == 1 and one.kind == "scalar":
        if one.dtype.name not in _SCALARS:
            return None
        return (_SCALAR_RESULT, one.dtype.itemsize, 0, 0, 0)
    assert result_struct is not None
    size = ctypes.sizeof(result_struct)
    if len(sig.results) == 1 and one.kind == "dense" and one.rank <= _MAX_RANK:
        return (_ONE_DENSE, size, one.rank, one.dtype.num, one.dtype.itemsize)
    return (_STRUCT, size, 0, 0, 0)


def native_router(dims: tuple[tuple[int, int], ...]) -> Any:
    """A ``_fastcall.Router`` whose routes are keyed by the sizes at ``dims``
    (``(argument, dimension)`` pairs), or None (no C path)."""
    return _fastcall.Router(dims) if available() else None
