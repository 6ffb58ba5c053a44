"""linalg's aggregate ops (``linalg.softmax``) compile, dense and sparse, and match numpy.

``sparse-iter-decompose-aggregates`` applies upstream's decomposition in stage I;
what it cannot take is refused there, located. The last test checks that the
pass's table of aggregate ops is this MLIR build's: of linalg's non-structured
ops, exactly those decompose.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from mlir import ir
from mlir.dialects import _linalg_ops_gen as linalg_ops
from mlir.dialects.transform import interpreter

import sparsecomp
from sparsecomp.errors import CompileError
from sparsecomp.ir.context import make_context
from sparsecomp.transforms.decompose_aggregates import AGGREGATES, script

pytestmark = pytest.mark.usefixtures("private_cache")

CSR = (
    "#sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), "
    "posWidth = 32, crdWidth = 32}>"
)


def softmax_function(name: str, ty: str, out: str, dimension: int) -> str:
    """``@name(x: ty) -> out``: ``linalg.softmax`` of ``x`` along ``dimension``."""
    dims = "%d0, %d1" if "?" in out else ""
    return f"""
func.func @{name}(%x: {ty}) -> {out} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %d0 = tensor.dim %x, %c0 : {ty}
  %d1 = tensor.dim %x, %c1 : {ty}
  %e = tensor.empty({dims}) : {out}
  %r = linalg.softmax dimension({dimension}) ins(%x : {ty}) outs(%e : {out}) -> {out}
  return %r : {out}
}}
"""


def reference(x: np.ndarray, dimension: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=dimension, keepdims=True))
    return e / e.sum(axis=dimension, keepdims=True)


def test_dense_softmax_matches_numpy() -> None:
    functions = [
        softmax_function(f"dyn{d}", "tensor<?x?xf32>", "tensor<?x?xf32>", d) for d in (0, 1)
    ] + [softmax_function(f"static{d}", "tensor<4x8xf64>", "tensor<4x8xf64>", d) for d in (0, 1)]
    exe = sparsecomp.compile("".join(functions))
    rng = np.random.default_rng(0)
    for d in (0, 1):
        for shape in [(5, 7), (1, 9), (6, 1)]:
            x = (rng.standard_normal(shape) * 10).astype(np.float32)
            got = exe.functions[f"dyn{d}"](x)
            np.testing.assert_allclose(got, reference(x, d), rtol=1e-5, atol=1e-7)
        y = rng.standard_normal((4, 8)) * 50
        np.testing.assert_allclose(exe.functions[f"static{d}"](y), reference(y, d), rtol=1e-12)


def test_sparse_softmax_counts_the_implicit_zeros() -> None:
    """All stored entries negative: the implicit zeros are each row's (column's) max."""
    ty = "tensor<?x?xf64, #csr>"
    functions = [softmax_function(f"sparse{d}", ty, "tensor<?x?xf64>", d) for d in (0, 1)]
    exe = sparsecomp.compile(f"#csr = {CSR}\n" + "".join(functions))
    a = sp.random(9, 6, density=0.3, format="csr", random_state=1)
    a.data = -np.abs(a.data) - 1
    for d in (0, 1):
        got = exe.functions[f"sparse{d}"](a)
        np.testing.assert_allclose(got, reference(a.toarray(), d), rtol=1e-12)


@pytest.mark.parametrize(
    ("types", "message"),
    [
        ("memref<4x8xf32>", "'linalg.softmax' on buffers is not supported"),
        ("tensor<4x8xi32>", "'linalg.softmax' of i32 elements is not supported"),
    ],
)
def test_undecomposable_softmax_is_refused_in_stage_one(tmp_path, types: str, message: str) -> None:
    body = f"linalg.softmax dimension(1) ins(%x : {types}) outs(%o : {types})"
    if types.startswith("tensor"):
        body = f"%r = {body} -> {types}\n  return %r : {types}"
        signature = f"(%x: {types}, %o: {types}) -> {types}"
    else:
        body += "\n  return"
        signature = f"(%x: {types}, %o: {types})"
    path = tmp_path / "softmax.mlir"
    path.write_text(f"func.func @f{signature} {{\n  {body}\n}}\n")
    with pytest.raises(CompileError) as info:
        sparsecomp.compile(path)
    assert "stage 'layouts' failed" in info.value.message
    column = 8 if types.startswith("tensor") else 3  # after "%r = "
    assert f"{path}:2:{column}: error: {message}" in info.value.message
    assert "sparsecomp-cpu-layouts" in str(info.value.hint)


#: One instance of each linalg op without a body region (the non-structured ones).
NON_STRUCTURED = {
    "linalg.softmax": (
        "(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>)",
        "linalg.softmax dimension(1) ins(%a : tensor<4x8xf32>) outs(%b : tensor<4x8xf32>)"
        " -> tensor<4x8xf32>",
    ),
    "linalg.pack": (
        "(%a: tensor<8x8xf32>, %b: tensor<2x2x4x4xf32>)",
        "linalg.pack %a inner_dims_pos = [0, 1] inner_tiles = [4, 4] into %b"
        " : tensor<8x8xf32> -> tensor<2x2x4x4xf32>",
    ),
    "linalg.unpack": (
        "(%a: tensor<2x2x4x4xf32>, %b: tensor<8x8xf32>)",
        "linalg.unpack %a inner_dims_pos = [0, 1] inner_tiles = [4, 4] into %b"
        " : tensor<2x2x4x4xf32> -> tensor<8x8xf32>",
    ),
    "linalg.winograd_filter_transform": (
        "(%a: tensor<2x3x3x5xf32>, %b: tensor<6x6x5x2xf32>)",
        "linalg.winograd_filter_transform fmr(F_4_3) ins(%a : tensor<2x3x3x5xf32>)"
        " outs(%b : tensor<6x6x5x2xf32>) -> tensor<6x6x5x2xf32>",
    ),
    "linalg.winograd_input_transform": (
        "(%a: tensor<2x10x10x5xf32>, %b: tensor<6x6x2x2x2x5xf32>)",
        "linalg.winograd_input_transform fmr(F_4_3) ins(%a : tensor<2x10x10x5xf32>)"
        " outs(%b : tensor<6x6x2x2x2x5xf32>) -> tensor<6x6x2x2x2x5xf32>",
    ),
    "linalg.winograd_output_transform": (
        "(%a: tensor<6x6x2x2x2x2xf32>, %b: tensor<2x8x8x2xf32>)",
        "linalg.winograd_output_transform fmr(F_4_3) ins(%a : tensor<6x6x2x2x2x2xf32>)"
        " outs(%b : tensor<2x8x8x2xf32>) -> tensor<2x8x8x2xf32>",
    ),
}


def _decomposes(name: str) -> bool:
    """Whether upstream's ``decompose_interface`` takes the op (has AggregatedOpInterface)."""
    signature, op = NON_STRUCTURED[name]
    with make_context():
        module = ir.Module.parse(f"func.func @f{signature} {{\n  %r = {op}\n  return\n}}")
        transforms = ir.Module.parse(script([name]))
        try:
            interpreter.apply_named_sequence(module, transforms.body.operations[0], transforms)
        except ValueError:  # the interpreter's failure
            return False
        return name not in str(module)


def test_aggregate_table_is_this_mlir_builds() -> None:
    bodiless = {
        cls.OPERATION_NAME
        for cls in vars(linalg_ops).values()
        if isinstance(cls, type) and getattr(cls, "_ODS_REGIONS", (1,))[0] == 0
    }
    assert bodiless - {"linalg.yield", "linalg.index"} == set(NON_STRUCTURED)
    assert {name for name in NON_STRUCTURED if _decomposes(name)} == set(AGGREGATES)
