"""Python arguments -> the flattened C parameters of ``_mlir_ciface_<name>``.

Every check happens before any native call: argument count, exact
dtypes, ranks, static sizes and size symbols (equal symbols, equal sizes,
across all arguments). Failures raise :class:`~sparsecomp.errors.ArgumentError` naming the
function, the argument's position, and what was expected versus given.
This module is the careful path, which also converts (copies, packs);
:mod:`.fastpath` makes the same checks on arguments that need no
conversion and hands everything else, errors included, to it.

MLIR's C interface (verified by test/python/test_runtime.py): parameters
are the flattened arguments in order -- a dense argument is a pointer to
its memref descriptor, a scalar is passed by value (``index`` as int64), a
sparse argument is one rank-1 descriptor pointer per buffer then its dim
sizes as int64. With results, a pointer to a struct of the flattened
results comes first (one memref: the descriptor itself, same layout);
except that a lone scalar result is the C return value.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from sparsecomp.errors import ArgumentError, FormatError
from sparsecomp.formats.layout import Layout
from sparsecomp.formats.names import AnyLayout
from sparsecomp.formats.tensor import SparseTensor
from sparsecomp.formats.validate import IndexWidthError
from sparsecomp.runtime.abi import ArgSpec, Signature
from sparsecomp.runtime.conversions import needs_conversion
from sparsecomp.runtime.memref import descriptor_type

SCALAR_CTYPES: dict[str, Any] = {
    "bool": ctypes.c_uint8,  # i1: one byte in memory; only bit 0 is meaningful
    "int8": ctypes.c_int8,
    "int16": ctypes.c_int16,
    "int32": ctypes.c_int32,
    "int64": ctypes.c_int64,
    "float16": ctypes.c_uint16,  # bits only: usable inside structs, not by value
    "float32": ctypes.c_float,
    "float64": ctypes.c_double,
}


def flat_types(spec: ArgSpec) -> list[Any]:
    """The C types one argument or result flattens to (descriptor structs by value)."""
    if spec.kind == "scalar":
        return [SCALAR_CTYPES[spec.dtype.name]]
    if spec.kind == "dense":
        return [descriptor_type(spec.rank)]
    return [descriptor_type(1)] * len(spec.buffers) + [ctypes.c_int64] * spec.rank


def c_signature(sig: Signature) -> tuple[list[Any], Any, type[ctypes.Structure] | None]:
    """``(argtypes, restype, result struct or None)`` of ``sig.symbol``."""
    params: list[Any] = []
    for i, spec in enumerate(sig.args):
        _check_by_value(sig, spec, f"argument {i}")
        params += [_by_pointer(t) for t in flat_types(spec)]
    if sig.status:  # the status word of guarded coordinates
        params += [_by_pointer(t) for t in flat_types(ArgSpec("dense", np.dtype(np.int32), (1,)))]
    for i, spec in enumerate(sig.results):
        _check_complex(sig, spec, f"result {i}")
    if len(sig.results) == 1 and sig.results[0].kind == "scalar":
        _check_by_value(sig, sig.results[0], "result 0")
        return params, SCALAR_CTYPES[sig.results[0].dtype.name], None
    if not sig.results:
        return params, None, None
    types = tuple(t for spec in sig.results for t in flat_types(spec))
    struct = _result_struct(sig.name, types)
    return [ctypes.POINTER(struct), *params], None, struct


@functools.cache
def _result_struct(name: str, types: tuple[Any, ...]) -> type[ctypes.Structure]:
    """The struct a function returns its results in, one class per name and fields:
    ctypes keeps every ``POINTER`` type it made, so a class per loaded function grew
    memory without bound (``sparsecomp.load(d)(A, x)`` in a loop, 5-8 KB a call)."""
    fields = [(f"r{i}", t) for i, t in enumerate(types)]
    return type(f"{name}_results", (ctypes.Structure,), {"_fields_": fields})


def _by_pointer(ctype: Any) -> Any:
    """Descriptors pass by pointer, everything else by value."""
    return ctypes.POINTER(ctype) if issubclass(ctype, ctypes.Structure) else ctype


def _check_by_value(sig: Signature, spec: ArgSpec, what: str) -> None:
    if spec.kind == "scalar" and spec.dtype == np.float16:
        raise ArgumentError(
            f"{sig.name}: {what} is a float16 scalar, which ctypes cannot pass by value",
            hint="use a rank-0 or rank-1 float16 tensor instead of a scalar",
        )
    _check_complex(sig, spec, what)


def _check_complex(sig: Signature, spec: ArgSpec, what: str) -> None:
    if spec.kind == "scalar" and spec.dtype.kind == "c":
        # LLVM passes {float, float} as two registers, C packs complex64 into one.
        raise ArgumentError(
            f"{sig.name}: {what} is a {spec.dtype} scalar, which has no portable C form by value",
            hint=f"use a rank-0 tensor<complex<...>> ({spec.dtype} array) instead of a scalar",
        )


#: Takes an argument another way (GPU memory): its shape and flattened items, or None.
Elsewhere = Callable[[ArgSpec, Any, str], "tuple[tuple[int, ...], list[Any]] | None"]
#: Converts argument ``i``'s value to a layout (:class:`~.conversions.Conversions`).
Convert = Callable[[int, Any, AnyLayout], SparseTensor]


def flatten(
    sig: Signature,
    args: tuple[Any, ...],
    elsewhere: Elsewhere | None = None,
    convert: Convert | None = None,
) -> list[Any]:
    """Check ``args`` against ``sig``; their flattened C parameters, in order.

    Each parameter is a C-contiguous aligned array (passed as a descriptor)
    or a Python scalar (passed by value). This is the careful path: it
    converts what it can (non-contiguous arrays are copied, scipy matrices
    packed, tensors converted to the ABI layout) and raises
    :class:`~sparsecomp.errors.ArgumentError` for the rest. :mod:`.fastpath` takes the
    common cases without it. ``elsewhere`` may take an argument first (the
    CUDA runtime's arrays in GPU memory); its shape is checked like any.
    ``convert`` makes the layout conversions (else :func:`sparse_tensor`).
    """
    if len(args) != len(sig.args):
        raise ArgumentError(
            f"{sig.name} takes {len(sig.args)} arguments, got {len(args)}",
            hint=f"signature: {sig.describe()}",
        )
    items: list[Any] = []
    sizes: dict[str, tuple[int, str]] = {}
    for i, (spec, value) in enumerate(zip(sig.args, args, strict=True)):
        label = f"argument {i}"
        where = f"{sig.name}: {label} ({spec.describe()})"
        if elsewhere is not None and (taken := elsewhere(spec, value, where)) is not None:
            check_shape(spec, taken[0], (where, label), sizes)
            items += taken[1]
        elif spec.kind == "scalar":
            items.append(scalar_value(spec, value, where))
            if spec.shape:  # an index argument that sizes a loop: checked as that size
                check_shape(spec, (int(items[-1]),), (where, label), sizes)
        elif spec.kind == "dense":
            array = dense_array(spec, value, where)
            check_shape(spec, array.shape, (where, label), sizes)
            items.append(array)
        else:
            check_shape(spec, sparse_shape(spec, value, where), (where, label), sizes)
            try:
                assert spec.layout is not None
                if convert is not None and needs_conversion(value, spec.layout):
                    tensor = convert(i, value, spec.layout)
                else:
                    tensor = sparse_tensor(spec, value)
            except IndexWidthError as err:
                raise _too_narrow(spec, err, where) from None
            items += sparse_buffers(spec, tensor, where)
            items += list(tensor.shape)
    return items


#: The largest int a float argument takes (beyond, float(value) overflows).
_FLOAT_MAX = int(np.finfo(np.float64).max)


def scalar_value(spec: ArgSpec, value: Any, where: str) -> Any:
    """A Python scalar for a scalar argument: a numpy scalar (or 0-d array) of its dtype,
    or a number: a Python one, or a numpy one of another dtype taken as its Python value
    (``np.float32(3.0)`` for an f64 argument, as ``3.0`` is; a Python kernel took them,
    the executable it compiles refused them)."""
    dtype = spec.dtype
    if isinstance(value, np.generic | np.ndarray) and np.ndim(value) == 0:
        if value.dtype == dtype:
            return int(value.item()) if dtype == np.bool_ else value.item()
        if value.dtype.kind not in "biuf":
            raise ArgumentError(f"{where}: expected dtype {dtype}, got {value.dtype}")
        value = value.item()
    if isinstance(value, bool | np.bool_):
        ok = dtype.kind == "b"
    elif isinstance(value, int):
        ok = (dtype.kind == "f" and abs(value) <= _FLOAT_MAX) or (
            dtype.kind == "i" and np.iinfo(dtype).min <= value <= np.iinfo(dtype).max
        )
    else:
        ok = isinstance(value, float) and dtype.kind == "f"
    if not ok:
        raise ArgumentError(f"{where}: expected a {dtype} scalar, got {value!r}")
    return int(value) if dtype.kind == "b" else value


def dense_array(spec: ArgSpec, value: Any, where: str) -> np.ndarray:
    """The array to pass: ``value`` itself, or a C-contiguous aligned copy of it."""
    if not isinstance(value, np.ndarray):
        hint = "use .to_dense()/.toarray()" if _is_sparse(value) else "use np.asarray(x, dtype)"
        raise ArgumentError(
            f"{where}: expected a numpy array, got {type(value).__name__}", hint=hint
        )
    if value.dtype != spec.dtype:
        raise ArgumentError(
            f"{where}: expected dtype {spec.dtype}, got {value.dtype}",
            hint=f"convert with .astype(np.{spec.dtype})",
        )
    if value.ndim != spec.rank:
        raise ArgumentError(f"{where}: expected rank {spec.rank}, got rank {value.ndim}")
    return _contiguous(value)


def _contiguous(array: np.ndarray) -> np.ndarray:
    """``array`` if C-contiguous and aligned, else such a copy."""
    flags = array.flags
    if flags.c_contiguous and flags.aligned:
        return array
    return np.require(array, requirements=["C", "A"])


def sparse_shape(spec: ArgSpec, value: Any, where: str) -> tuple[int, ...]:
    """The shape of a sparse argument, after checking its type, dtype and rank."""
    if not (_is_sparse(value) or isinstance(value, SparseTensor)):
        raise ArgumentError(
            f"{where}: expected a SparseTensor or scipy.sparse matrix, got {type(value).__name__}",
            hint="pack arrays with SparseTensor.from_dense(x, layout)",
        )
    check_dtype(spec, value.dtype, where, scipy=_is_sparse(value))
    if len(value.shape) != spec.rank:
        raise ArgumentError(f"{where}: expected rank {spec.rank}, got rank {len(value.shape)}")
    return tuple(int(d) for d in value.shape)


def sparse_tensor(spec: ArgSpec, value: Any) -> SparseTensor:
    """A checked sparse argument in the ABI layout (scipy matrices packed, others converted)."""
    assert spec.layout is not None
    if isinstance(value, SparseTensor):
        value.recheck()  # index buffers shared with the caller may have changed
        return value.to(spec.layout).summed()  # kernels assume no repeated coordinates
    return SparseTensor.from_scipy(value, spec.layout, copy=False).summed()


def _too_narrow(spec: ArgSpec, err: IndexWidthError, where: str) -> FormatError:
    """The caller cannot widen a compiled layout: say how to compile a wider one."""
    layout = spec.layout
    if not isinstance(layout, Layout):  # a composable layout: widths are per part
        return FormatError(f"{where}: {err.message}", hint=err.hint)
    wide = layout.with_widths(*err.widths).attr_text()
    return FormatError(
        f"{where}: {err.message}; the kernel was compiled for {layout.pos_width}-bit "
        f"positions and {layout.crd_width}-bit coordinates",
        hint=f"compile the kernel again with this argument's encoding written as {wide}",
    )


def check_dtype(spec: ArgSpec, dtype: np.dtype[Any], where: str, scipy: bool = False) -> None:
    """Refuse values of another dtype than ``spec``'s (no silent cast: float64 data into a
    float32 kernel would lose precision unasked), with the conversion to make as hint."""
    if dtype != spec.dtype:
        hint = f"convert the values with .astype(np.{spec.dtype}) first"
        if scipy and spec.dtype == np.float16:  # scipy.sparse refuses float16
            hint = (
                "scipy.sparse holds no float16: pass a SparseTensor, e.g. "
                "SparseTensor.from_scipy(A, 'csr').astype(np.float16)"
            )
        raise ArgumentError(f"{where}: expected dtype {spec.dtype}, got {dtype}", hint=hint)


def sparse_buffers(spec: ArgSpec, tensor: SparseTensor, where: str) -> list[np.ndarray]:
    """The tensor's buffers in ABI order, after checking their names and dtypes."""
    got = tensor.buffers()
    names = [(n, a.dtype) for n, a in got]
    if names != list(spec.buffers):
        raise ArgumentError(
            f"{where}: the tensor's buffers {_words(names)} differ from the ABI's "
            f"{_words(list(spec.buffers))}"
        )
    return [_contiguous(a) for _, a in got]


def _words(buffers: list[tuple[str, np.dtype[Any]]]) -> str:
    return "[" + ", ".join(f"{n}: {d}" for n, d in buffers) + "]"


def check_shape(
    spec: ArgSpec,
    shape: tuple[int, ...],
    where: tuple[str, str],
    sizes: dict[str, tuple[int, str]],
) -> None:
    """Check static sizes; bind or check size symbols.

    ``where`` is (message prefix, short label); ``sizes`` maps each symbol
    bound so far to its size and the place that bound it.
    """
    prefix, label = where
    value = spec.kind == "scalar"  # an index argument that is a size: its value
    if any(got % block for got, block in zip(shape, spec.blocks, strict=False)):
        blocks = "x".join(map(str, spec.blocks))
        raise ArgumentError(
            f"{prefix}: shape {tuple(shape)} does not divide into whole {blocks} blocks, "
            "which the function (compiled by the upstream sparsifier, reading the tensor's "
            "storage) holds it in"
        )
    for axis, (want, got) in enumerate(zip(spec.shape, shape, strict=True)):
        what = f"value {got}" if value else f"size {got} in dimension {axis}"
        if isinstance(want, int) and want != got:
            if value:
                raise ArgumentError(f"{prefix}: expected the value {want}, got {got}")
            raise ArgumentError(
                f"{prefix}: expected size {want} in dimension {axis}, got shape {tuple(shape)}"
            )
        if not isinstance(want, str):
            continue
        if want not in sizes:
            sizes[want] = (got, f"{label}'s value" if value else f"{label} dimension {axis}")
        elif sizes[want][0] != got:
            size, origin = sizes[want]
            raise ArgumentError(
                f"{prefix}: {what} does not match size symbol '{want}' = {size} (from {origin})"
            )


def _is_sparse(value: Any) -> bool:
    scipy_sparse = sys.modules.get("scipy.sparse")
    return scipy_sparse is not None and bool(scipy_sparse.issparse(value))


__all__ = ["SCALAR_CTYPES", "c_signature", "flat_types", "flatten"]
