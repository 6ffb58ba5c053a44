"""Kernels written in Python: index notation over sparse and dense tensors.

    from sparsecomp.script import kernel, Tensor, f32

    @kernel
    def spmm(A: Tensor[f32, ("M", "K"), "unstructured"],
             B: Tensor[f32, ("K", "N")]) -> Tensor[f32, ("M", "N")]:
        C[i, j] += A[i, k] * B[k, j]
        return C

A decorated function is read into statements of index notation
(:mod:`.parse`), built into stage-I MLIR (``linalg.generic`` over encoded
tensors) with the MLIR Python bindings (:mod:`.emit`, :mod:`.body`), and
compiled at its first call for the types and sizes it is called with
(:mod:`.kernel`). The annotations are described in :mod:`.types`; the guide
chapter is docs/script.md.

IR past stage I reads back as ``@loops`` functions (:mod:`.loops`): one
statement per operation, loops as Python ``for`` loops over position ranges,
buffer reads as subscripts. :func:`~.printer.to_python` prints any module in
one subset or the other, and the Python re-emits it.
"""

from __future__ import annotations

from sparsecomp.script.kernel import Kernel, assemble, kernel
from sparsecomp.script.loops import LoopKernel, loops, op
from sparsecomp.script.parse import ScriptError
from sparsecomp.script.syntax import cos, erf, exp, log, rsqrt, sin, sqrt, tanh, where
from sparsecomp.script.types import (
    Tensor,
    TensorType,
    f16,
    f32,
    f64,
    i8,
    i16,
    i32,
    i64,
    index,
    sparsity,
)

__all__ = [
    "Kernel",
    "LoopKernel",
    "ScriptError",
    "Tensor",
    "TensorType",
    "assemble",
    "cos",
    "erf",
    "exp",
    "f16",
    "f32",
    "f64",
    "i8",
    "i16",
    "i32",
    "i64",
    "index",
    "kernel",
    "log",
    "loops",
    "op",
    "rsqrt",
    "sin",
    "sparsity",
    "sqrt",
    "tanh",
    "where",
]
