"""The compiled kernels behind :mod:`sparsecomp.torch`: SpMM and the pattern SDDMM.

Two MLIR programs per value type (``f32``, ``f64``), compiled on first use
with :func:`sparsecomp.compile` (so kept by the compile cache across
processes) and specialized per storage layout with ``Executable.recompile``:

* ``spmm``: ``C = A B``, ``A`` sparse ``m x k`` in any layout, ``B`` dense
  ``k x n`` row-major, ``C`` dense ``m x n``. A linear layer's forward
  pass is ``Y^T = W X^T``: the batch is ``B``'s (long, contiguous) rows.
* ``spmm_bias``: ``C = A B + bias[:, None]`` (``Y^T = W X^T + b``); the
  compiler starts each output row's accumulators from its bias element, so
  the bias costs no pass over ``C``.
* ``linear`` / ``linear_bias``: ``Y = X A^T (+ bias)``, a linear layer's
  forward pass with ``X`` and ``Y`` row-major, as torch holds them. For
  layouts whose blocks span rows or that store rows one by one
  (:func:`row_major`): the compiler packs each panel of ``X`` transposed in
  registers and stores each jammed block row's (or group of eight rows')
  accumulators transposed into ``Y`` (:mod:`sparsecomp.lowering.pack`,
  :mod:`sparsecomp.lowering.jam`), so the layer needs no transpose of its
  input or output; the panels run in parallel, each thread owning its
  tokens' rows of ``Y``.
* ``linear_gelu``, ``linear_bias_relu``...: the same with an activation
  (:data:`ACTIVATIONS`) after it, which the compiler applies to the
  accumulators in registers as it stores them
  (:mod:`sparsecomp.lowering.epilogue`): no second pass over ``Y``. On this
  project's 2-core AVX-512 machine, BERT's 3072x768 FFN weight at 90%
  (``bsr:8x1``, 1024 tokens) took 4.7-5.0 ms with GELU fused, against
  5.5-5.9 ms for the kernel then ``torch.nn.GELU``.
* ``sddmm``: ``out = S .* (X Y^T)`` at the stored entries of a CSR ``S``,
  ``X`` ``m x n`` and ``Y`` ``k x n`` row-major (the reduction runs along
  contiguous rows of both). With ``S``'s values all one it is the gradient
  of a sparse weight at its stored entries: ``dW = dY^T X`` sampled at W.

Kernels are looked up by ``(dtype, layout)``; a layout is any name or
attribute text :func:`~sparsecomp.formats.names.parse_layout` accepts.

They are compiled with :func:`options`: the host's widest vectors and 8 of
them in flight. A linear layer's ``B`` has a row per token (1024 for BERT's
batch 8 x 128), far wider than the general default (256-bit vectors, 4 in
flight) assumes; on this project's AVX-512 machine that halved an FFN
weight's SpMM time at 70% sparsity (``benchmarks/torch_bert.py``).

SpMM over layouts whose blocks span rows (BSR ``R x C`` with ``R >= 2``,
grouped n:m's ``R x 1``: the nests whose rows are jammed, see
:mod:`sparsecomp.lowering.jam`) is compiled with :data:`PANEL_BYTES` as well:
``B`` is packed and read in column panels that stay in cache
(``NestEmitter.panels``). On that machine it took BERT's 3072x768 FFN
weight at 70% sparsity, ``bsr:8x1``, from 22 to 8-9 ms, and the 768x768
projections in ``bsr:4x4`` / ``bsr:8x8`` from 5.5 / 5.1 to 2.7 / 2.2 ms. CSR
does not gain (each entry feeds one row: the panels' extra passes over the
weight cost more than the cache saves), so it keeps the plain nest.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sparsecomp import forksafe
from sparsecomp.errors import SparsecompError
from sparsecomp.formats.composable import Composable
from sparsecomp.formats.names import parse_layout

#: value types with kernels: numpy dtype name -> MLIR element type
ELEMENTS = {"float32": "f32", "float64": "f64"}

_CSR = (
    "#sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed), "
    "posWidth = 32, crdWidth = 32}>"
)

_SPMM = """
#csr = {csr}
func.func @spmm(%A: tensor<?x?x{t}, #csr>, %B: tensor<?x?x{t}>) -> tensor<?x?x{t}> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : {t}
  %m = tensor.dim %A, %c0 : tensor<?x?x{t}, #csr>
  %n = tensor.dim %B, %c1 : tensor<?x?x{t}>
  %e = tensor.empty(%m, %n) : tensor<?x?x{t}>
  %C = linalg.fill ins(%zero : {t}) outs(%e : tensor<?x?x{t}>) -> tensor<?x?x{t}>
  %r = linalg.matmul ins(%A, %B : tensor<?x?x{t}, #csr>, tensor<?x?x{t}>)
                     outs(%C : tensor<?x?x{t}>) -> tensor<?x?x{t}>
  return %r : tensor<?x?x{t}>
}}
"""

_SPMM_BIAS = """
#csr = {csr}
func.func @spmm_bias(%A: tensor<?x?x{t}, #csr>, %B: tensor<?x?x{t}>,
                     %bias: tensor<?x{t}>) -> tensor<?x?x{t}> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %A, %c0 : tensor<?x?x{t}, #csr>
  %n = tensor.dim %B, %c1 : tensor<?x?x{t}>
  %e = tensor.empty(%m, %n) : tensor<?x?x{t}>
  %C = linalg.broadcast ins(%bias : tensor<?x{t}>) outs(%e : tensor<?x?x{t}>) dimensions = [1]
  %r = linalg.matmul ins(%A, %B : tensor<?x?x{t}, #csr>, tensor<?x?x{t}>)
                     outs(%C : tensor<?x?x{t}>) -> tensor<?x?x{t}>
  return %r : tensor<?x?x{t}>
}}
"""

#: ``Y = X A^T`` (``Y[j, i] += A[i, k] X[j, k]``, ``X`` and ``Y`` row-major);
#: formatted twice: per kernel (``name``, ``extra`` arguments, how ``Y``
#: starts), then per value type as the others are
_LINEAR = """
#csr = {{csr}}
#linear = {{{{
  indexing_maps = [affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (j, k)>,
                   affine_map<(i, j, k) -> (j, i)>],
  iterator_types = ["parallel", "parallel", "reduction"]
}}}}
func.func @{name}(%A: tensor<?x?x{{t}}, #csr>, %X: tensor<?x?x{{t}}>{extra})
    -> tensor<?x?x{{t}}> {{{{
  %c0 = arith.constant 0 : index
  %m = tensor.dim %A, %c0 : tensor<?x?x{{t}}, #csr>
  %n = tensor.dim %X, %c0 : tensor<?x?x{{t}}>
  %e = tensor.empty(%n, %m) : tensor<?x?x{{t}}>
  {start}
  %r = linalg.generic #linear
      ins(%A, %X : tensor<?x?x{{t}}, #csr>, tensor<?x?x{{t}}>) outs(%Y : tensor<?x?x{{t}}>) {{{{
    ^bb0(%a: {{t}}, %x: {{t}}, %acc: {{t}}):
      %p = arith.mulf %a, %x : {{t}}
      %s = arith.addf %acc, %p : {{t}}
      linalg.yield %s : {{t}}
  }}}} -> tensor<?x?x{{t}}>
  {finish}
}}}}
"""

#: ``Y = activation(X A^T + b)``: an elementwise op on the result, which the
#: compiler applies to the accumulators as it stores them
#: (:mod:`sparsecomp.lowering.epilogue`); ``{body}`` maps ``%a`` to ``%y``
_LINEAR_ACTIVATION = """%e2 = tensor.empty(%n, %m) : tensor<?x?x{{t}}>
  %g = linalg.generic {{{{
      indexing_maps = [affine_map<(j, i) -> (j, i)>, affine_map<(j, i) -> (j, i)>],
      iterator_types = ["parallel", "parallel"]}}}}
      ins(%r : tensor<?x?x{{t}}>) outs(%e2 : tensor<?x?x{{t}}>) {{{{
    ^bb0(%a: {{t}}, %o: {{t}}):
      {body}
      linalg.yield %y : {{t}}
  }}}} -> tensor<?x?x{{t}}>
  return %g : tensor<?x?x{{t}}>"""

#: the activations a linear kernel can end with: exact (erf) GELU, as
#: ``torch.nn.GELU()``, and ReLU
ACTIVATIONS = {
    "gelu": """%half = arith.constant 0.5 : {t}
      %one = arith.constant 1.0 : {t}
      %rsqrt2 = arith.constant 0.70710678118654752440 : {t}
      %s = arith.mulf %a, %rsqrt2 : {t}
      %erf = math.erf %s : {t}
      %p = arith.addf %one, %erf : {t}
      %h = arith.mulf %a, %half : {t}
      %y = arith.mulf %h, %p : {t}""",
    "relu": """%floor = arith.constant 0.0 : {t}
      %y = arith.maximumf %a, %floor : {t}""",
}

#: ``Y = X A^T + b`` as it is
_LINEAR_PLAIN = "return %r : tensor<?x?x{t}>"

#: ``Y`` starts from zero ...
_LINEAR_ZERO = """%zero = arith.constant 0.0 : {t}
  %Y = linalg.fill ins(%zero : {t}) outs(%e : tensor<?x?x{t}>) -> tensor<?x?x{t}>"""
#: ... or from the bias, broadcast along the tokens
_LINEAR_START_BIAS = """%Y = linalg.broadcast ins(%bias : tensor<?x{t}>) outs(%e : tensor<?x?x{t}>)
      dimensions = [0]"""

_SDDMM = """
#csr = {csr}
#sddmm = {{
  indexing_maps = [affine_map<(i, j, k) -> (i, j)>, affine_map<(i, j, k) -> (i, k)>,
                   affine_map<(i, j, k) -> (j, k)>, affine_map<(i, j, k) -> (i, j)>],
  iterator_types = ["parallel", "parallel", "reduction"]
}}
func.func @sddmm(%S: tensor<?x?x{t}, #csr>, %X: tensor<?x?x{t}>,
                 %Y: tensor<?x?x{t}>) -> tensor<?x?x{t}, #csr> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %S, %c0 : tensor<?x?x{t}, #csr>
  %n = tensor.dim %S, %c1 : tensor<?x?x{t}, #csr>
  %empty = tensor.empty(%m, %n) : tensor<?x?x{t}, #csr>
  %out = linalg.generic #sddmm
      ins(%S, %X, %Y : tensor<?x?x{t}, #csr>, tensor<?x?x{t}>, tensor<?x?x{t}>)
      outs(%empty : tensor<?x?x{t}, #csr>) {{
    ^bb0(%s: {t}, %x: {t}, %y: {t}, %acc: {t}):
      %p = arith.mulf %x, %y : {t}
      %q = arith.mulf %s, %p : {t}
      %r = arith.addf %acc, %q : {t}
      linalg.yield %r : {t}
  }} -> tensor<?x?x{t}, #csr>
  return %out : tensor<?x?x{t}, #csr>
}}
"""

_GELU_SPARSIFY = (
    """
#csr = {csr}
func.func @gelu_sparsify(%x: tensor<?x?x{t}>) -> tensor<?x?x{t}, #csr> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %x, %c0 : tensor<?x?x{t}>
  %n = tensor.dim %x, %c1 : tensor<?x?x{t}>
  %e = tensor.empty(%m, %n) : tensor<?x?x{t}>
  %act = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>,
                                          affine_map<(i, j) -> (i, j)>],
                         iterator_types = ["parallel", "parallel"]}}
    ins(%x : tensor<?x?x{t}>) outs(%e : tensor<?x?x{t}>) {{
  ^bb0(%a: {t}, %o: {t}):
      """
    + ACTIVATIONS["gelu"]
    + """
    linalg.yield %y : {t}
  }} -> tensor<?x?x{t}>
  %r = "sparse_iter.sparsify"(%act) {{sparsifier = #sparse_iter.sparsifier<threshold[{threshold}]>}}
      : (tensor<?x?x{t}>) -> tensor<?x?x{t}, #csr>
  return %r : tensor<?x?x{t}, #csr>
}}
"""
)


def _linears() -> dict[str, str]:
    """The ``linear`` kernels: ``linear[_bias][_<activation>]``."""
    out = {}
    for bias, extra, start in (
        ("", "", _LINEAR_ZERO),
        ("_bias", ", %bias: tensor<?x{t}>", _LINEAR_START_BIAS),
    ):
        finishes = {"": _LINEAR_PLAIN}
        for act, body in ACTIVATIONS.items():
            finishes["_" + act] = _LINEAR_ACTIVATION.format(body=body)
        for suffix, finish in finishes.items():
            name = f"linear{bias}{suffix}"
            out[name] = _LINEAR.format(name=name, extra=extra, start=start, finish=finish)
    return out


_SOURCES = {
    "spmm": _SPMM,
    "spmm_bias": _SPMM_BIAS,
    **_linears(),
    "sddmm": _SDDMM,
    "gelu_sparsify": _GELU_SPARSIFY,
}
#: the cache a panel of ``B`` may fill, for layouts with multi-row blocks
PANEL_BYTES = 1024 * 1024

_lock = forksafe.lock()
_programs: dict[tuple[str, str, float, bool, str, bool], Any] = {}
_variants: dict[tuple[str, str, str, str, bool], Any] = {}


def element(dtype: Any) -> str:
    """The MLIR element type for a numpy or torch dtype; a clear error for others."""
    name = str(dtype).removeprefix("torch.")
    if name not in ELEMENTS:
        raise SparsecompError(
            f"sparsecomp.torch has kernels for {', '.join(ELEMENTS)} values, not {name}",
            hint="convert the module or tensor with .float() or .double()",
        )
    return ELEMENTS[name]


def activation(name: str) -> str:
    """``name`` if it is one of :data:`ACTIVATIONS`; else a clear error."""
    if name not in ACTIVATIONS:
        raise SparsecompError(
            f"no fused activation '{name}'; sparsecomp.torch fuses "
            f"{', '.join(repr(a) for a in ACTIVATIONS)}"
        )
    return name


def linear_name(bias: bool, name: str = "") -> str:
    """The linear kernel for a layer with or without a bias and activation ``name``
    (``""``: none): ``linear``, ``linear_bias``, ``linear_gelu``, ..."""
    return ("linear_bias" if bias else "linear") + (f"_{activation(name)}" if name else "")


def source(op: str, dtype: Any, threshold: float = 0.0) -> str:
    """The MLIR text of kernel ``op`` for ``dtype``: ``spmm``, ``spmm_bias``,
    ``linear``, ``linear_bias`` (each also with ``_gelu`` or ``_relu``: the
    activation applied as the result is stored), ``sddmm``, or ``gelu_sparsify`` (GELU, exact
    (erf) form, with the elements of magnitude below ``threshold`` dropped in
    the same loop: a CSR result)."""
    if not threshold >= 0.0:  # (NaN too)
        raise SparsecompError(f"a sparsifying threshold is >= 0, got {threshold}")
    return _SOURCES[op].format(csr=_CSR, t=element(dtype), threshold=_mlir_float(threshold))


def _mlir_float(value: float) -> str:
    """``value`` as an MLIR float literal: Python writes ``1e-05``, which MLIR's
    attribute parser does not read as a float (``1.0e-05`` it does)."""
    text = repr(float(value))
    if "." in text or "inf" in text or "nan" in text:
        return text
    mantissa, _, exponent = text.partition("e")
    return f"{mantissa}.0e{exponent}" if exponent else f"{mantissa}.0"


def options() -> tuple[int, int]:
    """``(vector_bits, unroll)`` these kernels are compiled with (see the module);
    ``(-1, 4)``, the compiler's defaults, off x86_64."""
    from sparsecomp.targets.cpu import detect_host

    host = detect_host()
    return (host.max_vector_bits, 8) if host.arch == "x86_64" else (-1, 4)


def program(
    op: str, dtype: Any, threshold: float = 0.0, panels: bool = False, target: str = "host"
) -> Any:
    """The compiled ``op`` program for ``dtype`` (an ``Executable``; compiled once),
    with ``B`` in packed column panels if ``panels`` (see the module); for
    ``target`` (``"host"``, or a GPU's ``cuda:sm_XX`` / ``cuda-emu:sm_XX``: its own
    schedule, no CPU options, see :mod:`.device`; f32 products on tf32 tensor cores
    only where torch allows tf32 for its own matmuls, :func:`allow_tf32`)."""
    tf32 = target != "host" and allow_tf32()
    key = (op, element(dtype), float(threshold), panels, target, tf32)
    with _lock:
        if key not in _programs:
            from sparsecomp.compiler.driver import compile as compile_mlir

            text = source(op, dtype, threshold)
            if target != "host":
                _programs[key] = compile_mlir(text, target, gpu_tf32=tf32)
            else:
                bits, unroll = options()
                panel_bytes = PANEL_BYTES if panels else 0
                _programs[key] = compile_mlir(
                    text, "host", vector_bits=bits, unroll=unroll, panel_bytes=panel_bytes
                )
        return _programs[key]


def allow_tf32() -> bool:
    """Whether torch lets f32 matmuls on CUDA run as tf32
    (``torch.backends.cuda.matmul.allow_tf32``, off by default, set by
    ``torch.set_float32_matmul_precision("high")``): GPU kernels follow it, so a
    sparse layer keeps the precision its dense twin has."""
    import torch

    return bool(torch.backends.cuda.matmul.allow_tf32)


def kernel(op: str, dtype: Any, layout: str, target: str = "host") -> Any:
    """The ``Function`` computing ``op`` for ``dtype`` with its sparse operand in ``layout``,
    compiled for ``target`` (see :func:`program`)."""
    tf32 = target != "host" and allow_tf32()
    found = _variants.get((op, str(dtype), layout, target, tf32))  # the call path: no parsing
    if found is not None:
        return found
    parsed = parse_layout(layout)
    attr = parsed.attr_text()
    key = (op, element(dtype), attr, target, tf32)
    panels = target == "host" and (
        op.startswith("linear") or (op.startswith("spmm") and block_rows(parsed) >= 2)
    )
    exe = program(op, dtype, panels=panels, target=target)
    with _lock:
        if key not in _variants:
            if attr == _CSR:
                _variants[key] = exe.functions[op]
            else:
                assert exe.recompile is not None
                _variants[key] = exe.recompile(op, {0: attr}).functions[op]
        _variants[(op, str(dtype), layout, target, tf32)] = _variants[key]
        return _variants[key]


def install(op: str, dtype: Any, layout: str, target: str, function: Any) -> None:
    """Make ``function`` (a loaded executable's, :func:`sparsecomp.load`) what
    :func:`kernel` returns for these arguments, in place of a compile: how a machine
    without MLIR runs kernels compiled elsewhere (``benchmarks/torch_bert_gpu.py``).
    Keyed as :func:`kernel` looks it up, torch's tf32 setting included."""
    tf32 = target != "host" and allow_tf32()
    with _lock:
        _variants[(op, str(dtype), layout, target, tf32)] = function


def block_rows(layout: Any) -> int:
    """Rows per block of a parsed layout (1: rows one by one, a composable one too)."""
    return 1 if isinstance(layout, Composable) else layout.dim_to_lvl.block_sizes()[0]


def row_major(layout: str) -> bool:
    """Whether a linear layer in ``layout`` runs the ``linear`` kernels (``X`` and ``Y``
    row-major, see the module): layouts whose blocks span rows (jammed), and
    layouts stored row by row, a ``dense`` first level over the rows (CSR,
    ELL, n:m: rows grouped by eight, see :mod:`sparsecomp.lowering.jam`)."""
    parsed = parse_layout(layout)
    if isinstance(parsed, Composable):
        return False
    if block_rows(parsed) >= 2:
        return True
    first = parsed.dim_to_lvl.results[0]
    return parsed.levels[0].name == "dense_fixed" and first.op == "id" and first.dim == 0


def numpy_dtype(dtype: Any) -> np.dtype[Any]:
    """The numpy dtype of a torch dtype with kernels."""
    return np.dtype(str(dtype).removeprefix("torch."))
