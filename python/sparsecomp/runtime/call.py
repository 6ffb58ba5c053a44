"""One public function's C call: flattened arguments in, Python results out.

:class:`Caller` is built once per function (on its first call) and holds
everything that depends only on the signature: the ctypes function with
its argument types, the fast argument checks (:mod:`.fastpath`), where each
array's descriptor goes in the call's int64 word buffer, and the
``struct`` format the result struct is read back with. A call then

1. flattens the arguments: the fast path, else the careful path
   (:func:`~sparsecomp.runtime.marshal.flatten`, which raises the errors);
2. writes every array's descriptor into one fresh ctypes int64 buffer and
   passes pointers into it (descriptors travel by pointer, scalars by value);
3. calls the kernel with the GIL released (ctypes does), with a pointer to
   a fresh result struct first when there are results;
4. reads the result struct in one ``struct.unpack_from`` and builds arrays
   and tensors (:func:`~sparsecomp.runtime.results.unflatten`).

Where the C extension is built, :attr:`Caller.native` does all of this in
C for the calls the fast path takes (:mod:`.fastcall`), and
:meth:`Caller.__call__` tries it first.

Nothing is shared between calls, so concurrent calls from several threads
are safe.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from sparsecomp.runtime.abi import ArgSpec, Signature, packed_symbol
from sparsecomp.runtime.conversions import Conversions
from sparsecomp.runtime.fastcall import MISS, extension, native_kernel
from sparsecomp.runtime.fastpath import FastArgs, Out
from sparsecomp.runtime.marshal import c_signature, flatten
from sparsecomp.runtime.memref import address, descriptor_words
from sparsecomp.runtime.results import result_array, scalar, unflatten

#: ``struct`` codes of scalar results inside the result struct (native alignment).
_CODES = {
    "bool": "B",
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "float16": "H",  # the bits; results.scalar reinterprets them
    "float32": "f",
    "float64": "d",
}
_addressof = ctypes.addressof


def item_ranks(specs: tuple[ArgSpec, ...]) -> list[int | None]:
    """Per flattened item of ``specs``: its rank if it is an array (a descriptor), else None."""
    out: list[int | None] = []
    for spec in specs:
        if spec.kind == "scalar":
            out.append(None)
        elif spec.kind == "dense":
            out.append(spec.rank)
        else:
            out += [1] * len(spec.buffers) + [None] * spec.rank
    return out


def result_format(specs: tuple[ArgSpec, ...]) -> str:
    """The ``struct`` format of the flattened results (descriptors as int64 words)."""
    codes = []
    for spec, rank in zip(_item_specs(specs), item_ranks(specs), strict=True):
        if rank is not None:
            codes.append("PPq" + "q" * (2 * rank))
        else:
            codes.append(_CODES[spec.dtype.name] if spec.kind == "scalar" else "q")
    return "@" + "".join(codes)


def _item_specs(specs: tuple[ArgSpec, ...]) -> list[ArgSpec]:
    out = []
    for spec in specs:
        n = 1 if spec.kind != "sparse" else len(spec.buffers) + spec.rank
        out += [spec] * n
    return out


class Caller:
    """Calls one kernel function: ``caller(args)`` -> ``None``, one result or a tuple."""

    #: whether calls may take the C path (a subclass that calls otherwise says False)
    NATIVE = True

    def __init__(
        self, library: ctypes.CDLL, sig: Signature, *, scipy_limit: np.ndarray | None = None
    ) -> None:
        """``scipy_limit``: the C path declines scipy operands with at least
        ``scipy_limit[0]`` entries (read at each call; < 0: none), so that the
        Python path can pick a guarded variant (:mod:`.specialize`)."""
        argtypes, restype, result_struct = c_signature(sig)  # rejects float16 scalars
        cfunc = library[sig.symbol]
        cfunc.argtypes = [_as_address(t) for t in argtypes]
        cfunc.restype = restype
        self.sig = sig
        self.cfunc = cfunc
        self.fast = FastArgs(sig)
        self.conversions = Conversions(sig.name)
        #: before the careful path: ``divert(args)`` gives what to call with the
        #: arguments instead (a prepared operand's or an index-width variant), or None
        self.divert: Callable[[tuple[Any, ...]], Any] | None = None
        self.ranks = tuple(item_ranks(sig.args))
        status_words = descriptor_words(1) if sig.status else 0
        n_words = sum(descriptor_words(r) for r in self.ranks if r is not None) + status_words
        self.words_type: Any = ctypes.c_int64 * n_words if n_words else None
        self.result_struct = result_struct
        self.unpack = None
        one = sig.results[0] if len(sig.results) == 1 else None
        self.one_array = (one.rank, one.dtype) if one is not None and one.kind == "dense" else None
        if result_struct is not None:
            layout = struct.Struct(result_format(sig.results))
            assert layout.size <= ctypes.sizeof(result_struct), "result struct layout"
            self.unpack = layout.unpack_from
        elif len(sig.results) == 1:  # one scalar, returned by value
            self.unpack = struct.Struct("@" + _CODES[sig.results[0].dtype.name]).unpack_from
        #: the packed entry point, the parameters' and the result's ctypes types: the
        #: ctypes path calls it through ``_fastcall.guarded_call``, so that a run-time
        #: check that fails in the kernel raises (KernelError) instead of exiting;
        #: None without the extension (then ``cfunc`` itself)
        self.guarded = _guarded_entry(library, sig, cfunc.argtypes, restype)
        #: the C call path of this function (:mod:`.fastcall`), or None
        self.native = (
            native_kernel(library, sig, self.fast, result_struct, self._finish, scipy_limit)
            if self.NATIVE
            else None
        )

    def _finish(self, raw: bytes, inputs: dict[int, Any]) -> Any:
        """The results of a C-path call from its raw result bytes (see :mod:`.fastcall`)."""
        assert self.unpack is not None
        values = self.unpack(raw)
        if self.result_struct is None:
            return scalar(self.sig.results[0], values[0])
        if self.one_array is not None:
            rank, dtype = self.one_array
            return result_array(values, rank, dtype, inputs, {})
        return unflatten(self.sig, values, inputs)

    def __call__(self, args: tuple[Any, ...]) -> Any:
        native = self.native
        if native is not None and (got := native(args)) is not MISS:
            return got
        return self._ctypes_call(args, careful=False)

    def call_diverted(self, args: tuple[Any, ...]) -> Any:
        """The call, where the caller's ``divert`` was asked already (the CUDA caller
        skips asking again)."""
        return self(args)

    def _ctypes_call(self, args: tuple[Any, ...], careful: bool) -> Any:
        """One call through ctypes: the fast path unless ``careful``, else (or where it
        declines) the careful path. A guarded kernel that reports a coordinate out of
        range makes a fast-path call again the careful way, which raises the error."""
        out = self.result_struct() if self.result_struct is not None else None
        results = [] if out is None else [_addressof(out)]
        buf = self.words_type() if self.words_type is not None else None
        base = _addressof(buf) if buf is not None else 0
        call = Out(base, results.copy())
        if careful or not self.fast.emit(args, call):
            divert = None if careful else self.divert
            if divert is not None and (other := divert(args)) is not None:
                return other(*args)
            call = self._careful(args, Out(base, results))
            careful = True
        status = None
        if self.sig.status:
            status = np.zeros(1, np.int32)
            call.array(status, address(status))
        if buf is not None:
            buf[:] = call.words
        # args, call and buf stay alive until here
        returned = self._guarded(call.params) if self.guarded else self.cfunc(*call.params)
        got: Any = None
        if out is None:
            got = scalar(self.sig.results[0], returned) if self.sig.results else None
        else:
            assert self.unpack is not None
            if self.one_array is not None:  # one dense result: no tuple, no owner sharing
                rank, dtype = self.one_array
                got = result_array(self.unpack(out), rank, dtype, call.inputs, {})
            else:
                got = unflatten(self.sig, self.unpack(out), call.inputs)
        if status is not None and status[0] and not careful:
            return self._ctypes_call(args, careful=True)  # checks all; drops these results
        return got

    def _guarded(self, params: list[Any]) -> Any:
        """``cfunc(*params)`` through the packed entry point, guarded (see ``guarded``)."""
        assert self.guarded is not None
        fn, types, restype = self.guarded
        held = [t(p) for t, p in zip(types, params, strict=True)]
        ret = restype() if restype is not None else None
        ptrs = (ctypes.c_void_p * (len(held) + 1))(*map(_addressof, held))
        if ret is not None:
            ptrs[len(held)] = _addressof(ret)
        extension().guarded_call(fn, _addressof(ptrs))
        if ret is None:
            return None
        return ret.value if isinstance(ret, ctypes._SimpleCData) else ret

    def _careful(self, args: tuple[Any, ...], call: Out) -> Out:
        """The careful path: check and convert everything (raises on bad arguments)."""
        items = flatten(self.sig, args, convert=self.conversions.convert)
        call.keep = items  # conversions (copies, packed tensors) live until the call returns
        for item, rank in zip(items, self.ranks, strict=True):
            if rank is None:
                call.params.append(item)
            else:
                call.array(item, address(item))
        return call


def _guarded_entry(
    library: ctypes.CDLL, sig: Signature, argtypes: list[Any], restype: Any
) -> tuple[int, list[Any], Any] | None:
    """What ``Caller.guarded`` holds for ``sig``'s function, or None (no extension, or
    a library without the packed form)."""
    if extension() is None:
        return None
    try:
        fn = ctypes.cast(library[packed_symbol(sig.symbol)], ctypes.c_void_p).value
    except AttributeError:
        return None
    return (fn, list(argtypes), restype) if fn else None


def _as_address(ctype: Any) -> Any:
    """Pointer parameters take plain addresses (ints) instead of ctypes pointer objects."""
    return ctypes.c_void_p if hasattr(ctype, "contents") else ctype
