"""The programs of benchmarks/cuda.py beyond the examples (BSR on tensor cores, 2:4 f16),
and the examples' operands."""

from __future__ import annotations

from typing import Any

import numpy as np


def operands(op: str, a: Any, k: int | None, rng: np.random.Generator) -> tuple:
    """``examples/<op>.mlir``'s arguments for the matrix ``a``: SpMV ``(a, x)``, SpMM ``(a,
    B)`` with ``k`` columns, SDDMM ``(a, X, Y)`` with ``k``; float32, standard normal."""
    m, n = a.shape
    if op == "spmv":
        return (a, rng.standard_normal(n).astype(np.float32))
    if op == "spmm":
        return (a, rng.standard_normal((n, k)).astype(np.float32))
    return (a, rng.standard_normal((m, k)).astype(np.float32),
            rng.standard_normal((n, k)).astype(np.float32))  # fmt: skip


#: SpMM with the matrix as 16x16 blocks: tensor cores on a CUDA target.
BSR_SPMM = """
#blocks = #sparse_iter.sparsity<block[16, 16], density = 0.1>
func.func @spmm(%A: tensor<?x?xf32, #blocks>, %B: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %A, %c0 : tensor<?x?xf32, #blocks>
  %n = tensor.dim %B, %c1 : tensor<?x?xf32>
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %C = linalg.fill ins(%zero : f32) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
  %r = linalg.matmul ins(%A, %B : tensor<?x?xf32, #blocks>, tensor<?x?xf32>)
                     outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
"""
#: Matrices the tensor-core BSR kernel runs on.
BLOCKED = ("block16",)
#: SpMM with the matrix as 3x3 blocks (FEM node blocks): several to an MMA on a CUDA target.
BSR3_SPMM = BSR_SPMM.replace("block[16, 16], density = 0.1", "block[3, 3]")
#: Matrices with 3x3 node blocks (three unknowns per mesh node).
NODE_BLOCKED = ("bcsstk16",)
#: 2:4 f16 SpMM with an outs operand: sparse tensor cores on a CUDA target.
NM_SPMM = """
#s = #sparse_iter.sparsity<nm[2, 4]>
func.func @spmm(%A: tensor<?x?xf16, #s>, %B: tensor<?x?xf16>,
                %C: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %r = linalg.matmul ins(%A, %B : tensor<?x?xf16, #s>, tensor<?x?xf16>)
                     outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
"""
#: Matrices the 2:4 kernel runs on (as f16).
TWO_FOUR = ("2:4",)
#: SpMV over hyb (ELL buckets of widths 1 .. 32, CSR rest of longer rows), outs y:
#: the power-law rows' load balance on a CUDA target.
HYB_SPMV = """
#hyb = {attr}
func.func @spmv(%A: tensor<?x?xf32, #hyb>, %x: tensor<?xf32>, %y: tensor<?xf32>)
    -> tensor<?xf32> {{
  %r = linalg.matvec ins(%A, %x : tensor<?x?xf32, #hyb>, tensor<?xf32>)
                     outs(%y : tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}}
"""
#: Matrices the hyb SpMV runs on.
POWER_LAW = ("rmat",)
