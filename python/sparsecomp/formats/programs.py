"""The MLIR of the standard sparse ops for a given layout of the sparse operand.

Used to compile a kernel per candidate layout: by the calibration of the
layout cost model (:mod:`sparsecomp.tools.calibrate`), by
``Executable.prepare`` and by ``benchmarks/format_choice.py``. No MLIR
import: these are texts.

``op`` is ``"spmm"`` (``C = A B``), ``"spmv"`` (``y = A x``) or ``"sddmm"``
(``S .* (X Y^T)``, whose result has ``S``'s layout); ``layout`` a layout
name or object (:func:`~sparsecomp.formats.parse_layout`) or ``"dense"``
for the dense baseline.
"""

from __future__ import annotations

from sparsecomp.errors import SparsecompError
from sparsecomp.formats.names import AnyLayout, parse_layout

OPS = ("spmm", "spmv", "sddmm")

_SPMM = """
func.func @spmm(%A: tensor<?x?x{t}{enc}>, %B: tensor<?x?x{t}>) -> tensor<?x?x{t}> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : {t}
  %m = tensor.dim %A, %c0 : tensor<?x?x{t}{enc}>
  %n = tensor.dim %B, %c1 : tensor<?x?x{t}>
  %e = tensor.empty(%m, %n) : tensor<?x?x{t}>
  %C = linalg.fill ins(%zero : {t}) outs(%e : tensor<?x?x{t}>) -> tensor<?x?x{t}>
  %r = linalg.matmul ins(%A, %B : tensor<?x?x{t}{enc}>, tensor<?x?x{t}>)
                     outs(%C : tensor<?x?x{t}>) -> tensor<?x?x{t}>
  return %r : tensor<?x?x{t}>
}}
"""

_SPMV = """
func.func @spmv(%A: tensor<?x?x{t}{enc}>, %x: tensor<?x{t}>) -> tensor<?x{t}> {{
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : {t}
  %m = tensor.dim %A, %c0 : tensor<?x?x{t}{enc}>
  %e = tensor.empty(%m) : tensor<?x{t}>
  %y = linalg.fill ins(%zero : {t}) outs(%e : tensor<?x{t}>) -> tensor<?x{t}>
  %r = linalg.matvec ins(%A, %x : tensor<?x?x{t}{enc}>, tensor<?x{t}>)
                     outs(%y : tensor<?x{t}>) -> tensor<?x{t}>
  return %r : tensor<?x{t}>
}}
"""

_SDDMM = """
func.func @sddmm(%S: tensor<?x?x{t}{enc}>, %X: tensor<?x?x{t}>, %Y: tensor<?x?x{t}>)
    -> tensor<?x?x{t}{enc}> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %S, %c0 : tensor<?x?x{t}{enc}>
  %n = tensor.dim %S, %c1 : tensor<?x?x{t}{enc}>
  %e = tensor.empty(%m, %n) : tensor<?x?x{t}{enc}>
  %r = linalg.generic {{
      indexing_maps = [affine_map<(i, j, k) -> (i, j)>, affine_map<(i, j, k) -> (i, k)>,
                       affine_map<(i, j, k) -> (j, k)>, affine_map<(i, j, k) -> (i, j)>],
      iterator_types = ["parallel", "parallel", "reduction"]}}
    ins(%S, %X, %Y : tensor<?x?x{t}{enc}>, tensor<?x?x{t}>, tensor<?x?x{t}>)
    outs(%e : tensor<?x?x{t}{enc}>) {{
  ^bb0(%s: {t}, %x: {t}, %y: {t}, %o: {t}):
    %xy = arith.mulf %x, %y : {t}
    %v = arith.mulf %s, %xy : {t}
    %acc = arith.addf %o, %v : {t}
    linalg.yield %acc : {t}
  }} -> tensor<?x?x{t}{enc}>
  return %r : tensor<?x?x{t}{enc}>
}}
"""

_TEMPLATES = {"spmm": _SPMM, "spmv": _SPMV, "sddmm": _SDDMM}
_TYPES = {"float32": "f32", "float64": "f64"}


def program(op: str, layout: str | AnyLayout, dtype: str = "float32") -> str:
    """The MLIR text of ``op`` with its sparse operand in ``layout`` (see the module)."""
    if op not in _TEMPLATES:
        raise SparsecompError(f"unknown op '{op}'; expected one of {', '.join(OPS)}")
    if dtype not in _TYPES:
        raise SparsecompError(f"unknown dtype '{dtype}'; expected float32 or float64")
    if layout == "dense":
        enc = ""
    else:
        enc = ", " + parse_layout(layout).attr_text()
    return _TEMPLATES[op].format(t=_TYPES[dtype], enc=enc)
