"""What the tensor-core tests share: a product's program and numpy's reference.

``PRODUCT`` is ``C = A B + C`` with ``A`` in a ``#sparse_iter.sparsity`` form
(``{sparsity}``, ``{el}`` the inputs' type, ``{acc}`` the result's);
:func:`tf32` rounds as the kernels do before a tf32 MMA, and
:func:`reference` is the exact product of the rounded inputs.
"""

from __future__ import annotations

import numpy as np

PRODUCT = """
#s = #sparse_iter.sparsity<{sparsity}>
func.func @matmul(%A: tensor<?x?x{el}, #s>, %B: tensor<?x?x{el}>,
                  %C: tensor<?x?x{acc}>) -> tensor<?x?x{acc}> {{
  %r = linalg.matmul ins(%A, %B : tensor<?x?x{el}, #s>, tensor<?x?x{el}>)
                     outs(%C : tensor<?x?x{acc}>) -> tensor<?x?x{acc}>
  return %r : tensor<?x?x{acc}>
}}
"""
DTYPES = {"f32": np.float32, "f16": np.float16}


def tf32(x: np.ndarray) -> np.ndarray:
    """``x`` rounded to tf32 (nearest, ties away: ``cvt.rna.tf32.f32``), as float64."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return (((bits + 0x1000) & 0xFFFFE000).astype(np.uint32)).view(np.float32).astype(np.float64)


def reference(el: str, a: np.ndarray, b: np.ndarray, cin: np.ndarray) -> np.ndarray:
    """``a b + cin`` in float64 of the inputs as an MMA of ``el`` inputs sees them."""
    rounded = tf32 if el == "f32" else (lambda x: x.astype(np.float64))
    return rounded(a) @ rounded(b) + cin.astype(np.float64)
