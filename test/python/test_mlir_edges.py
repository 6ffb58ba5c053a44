"""MLIR programs written the way upstream's users write them, at the edges (a battery,
session 43): sizes a private callee requires, 0 / 0 at implicit zeros, insertions
out of order, ops on sparse tensors neither lowering takes, quoted symbol names,
recursion. Results are checked against numpy / scipy.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import sparsecomp
from sparsecomp.errors import ArgumentError, SparsecompError

CSR = "#sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>"

TWICE = f"""
#CSR = {CSR}
func.func private @spmv(%A: tensor<?x?xf32, #CSR>, %x: tensor<?xf32>) -> tensor<?xf32> {{
  %c0 = arith.constant 0 : index
  %z = arith.constant 0.0 : f32
  %m = tensor.dim %A, %c0 : tensor<?x?xf32, #CSR>
  %e = tensor.empty(%m) : tensor<?xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %r = linalg.matvec ins(%A, %x : tensor<?x?xf32, #CSR>, tensor<?xf32>)
                     outs(%f : tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}}
func.func @twice(%A: tensor<?x?xf32, #CSR>, %x: tensor<?xf32>) -> tensor<?xf32> {{
  %y = call @spmv(%A, %x) : (tensor<?x?xf32, #CSR>, tensor<?xf32>) -> tensor<?xf32>
  %z = call @spmv(%A, %y) : (tensor<?x?xf32, #CSR>, tensor<?xf32>) -> tensor<?xf32>
  return %z : tensor<?xf32>
}}
"""


@pytest.mark.parametrize(
    "encoding", [CSR, "#sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed)}>"]
)
def test_sizes_a_private_callee_requires_are_checked(private_cache: None, encoding: str) -> None:
    """A x, then A y: A must be square and x as long as A is wide. Unchecked, a 5 x 7 A
    read past the end of y (garbage from call to call, a SIGSEGV for far columns)."""
    exe = sparsecomp.compile(TWICE.replace(CSR, encoding))
    square = sp.random(6, 6, density=0.5, format="csr", dtype=np.float32, random_state=1)
    x = np.arange(6, dtype=np.float32)
    np.testing.assert_allclose(exe.twice(square, x), square @ (square @ x), rtol=1e-5)
    wide = sp.random(5, 7, density=0.9, format="csr", dtype=np.float32, random_state=7)
    with pytest.raises(ArgumentError, match="size 7 in dimension 1"):
        exe.twice(wide, np.ones(7, np.float32))
    with pytest.raises(ArgumentError):
        exe.twice(square, np.ones(1, np.float32))


ADIVA = f"""
#CSR = {CSR}
#id = affine_map<(i, j) -> (i, j)>
func.func @adiva(%A: tensor<2x3xf64, #CSR>, %o: tensor<2x3xf64>) -> tensor<2x3xf64> {{
  %r = linalg.generic {{indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}}
    ins(%A : tensor<2x3xf64, #CSR>) outs(%o : tensor<2x3xf64>) {{
  ^bb0(%a: f64, %x: f64):
    %v = arith.divf %a, %a : f64
    linalg.yield %v : f64
  }} -> tensor<2x3xf64>
  return %r : tensor<2x3xf64>
}}
"""


def test_division_by_the_sparse_operand_is_nan_at_its_zeros(private_cache: None) -> None:
    """a / a at an implicit zero is 0 / 0: NaN, as numpy (and the command line, through
    upstream's sparsifier) give; it was 0."""
    dense = np.array([[2.0, 0.0, 3.0], [0.0, 0.0, 5.0]])
    got = sparsecomp.compile(ADIVA)(sp.csr_matrix(dense), np.full((2, 3), 7.0))
    with np.errstate(all="ignore"):
        want = dense / dense
    np.testing.assert_array_equal(got, want)


INSERTS = f"""
#S = {CSR}
func.func @k(%v: f64) -> tensor<4x4xf64, #S> {{
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %e = tensor.empty() : tensor<4x4xf64, #S>
  %r1 = tensor.insert %v into %e[%c2, %c1] : tensor<4x4xf64, #S>
  %r2 = tensor.insert %v into %r1[%c1, %c3] : tensor<4x4xf64, #S>
  %l = sparse_tensor.load %r2 hasInserts : tensor<4x4xf64, #S>
  return %l : tensor<4x4xf64, #S>
}}
"""


def test_insertions_out_of_order_are_reported(private_cache: None) -> None:
    """Out of lexicographic order, upstream's codegen built falling positions: a corrupt
    CSR came back (index widths), or a 'positions overflowed' error (32-bit)."""
    with pytest.raises(SparsecompError, match="lexicographic order"):
        sparsecomp.compile(INSERTS).k(9.0)
    in_order = INSERTS.replace("%e[%c2, %c1]", "%e[%c1, %c3]").replace(
        "%r1[%c1, %c3]", "%r1[%c2, %c1]"
    )
    got = sparsecomp.compile(in_order).k(9.0).to_dense()
    want = np.zeros((4, 4))
    want[1, 3] = want[2, 1] = 9.0
    np.testing.assert_array_equal(got, want)


def test_to_buffer_of_a_sparse_tensor_is_a_located_error() -> None:
    src = f"""#S = {CSR}
func.func @k(%A: tensor<4x4xf64, #S>) -> tensor<4x4xf64> {{
  %m = bufferization.to_buffer %A : tensor<4x4xf64, #S> to memref<4x4xf64>
  %t = bufferization.to_tensor %m : memref<4x4xf64> to tensor<4x4xf64>
  return %t : tensor<4x4xf64>
}}
"""
    with pytest.raises(SparsecompError, match=r"3:8: error: bufferization.to_buffer of a sparse"):
        sparsecomp.compile(src)


def test_tensor_extract_on_the_upstream_road_is_a_located_error() -> None:
    src = f"""#S = {CSR}
func.func @k(%A: tensor<4x4xf64, #S>) -> (f64, index) {{
  %c1 = arith.constant 1 : index
  %v = tensor.extract %A[%c1, %c1] : tensor<4x4xf64, #S>
  %n = sparse_tensor.number_of_entries %A : tensor<4x4xf64, #S>
  return %v, %n : f64, index
}}
"""
    with pytest.raises(SparsecompError, match=r"4:8: error: 'tensor.extract' on a sparse tensor"):
        sparsecomp.compile(src)


def test_a_quoted_function_name(private_cache: None) -> None:
    src = """
func.func @"row sums"(%x: tensor<?xf64>) -> tensor<?xf64> {
  return %x : tensor<?xf64>
}
"""
    exe = sparsecomp.compile(src)
    np.testing.assert_array_equal(exe.functions["row sums"](np.arange(3.0)), np.arange(3.0))


RECURSIVE = f"""
#S = {CSR}
func.func @k(%A: tensor<?x?xf64, #S>, %n: index) -> index {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %z = arith.cmpi eq, %n, %c0 : index
  %r = scf.if %z -> index {{
    %d = tensor.dim %A, %c0 : tensor<?x?xf64, #S>
    scf.yield %d : index
  }} else {{
    %m = arith.subi %n, %c1 : index
    %s = func.call @k(%A, %m) : (tensor<?x?xf64, #S>, index) -> index
    %t = arith.addi %s, %c1 : index
    scf.yield %t : index
  }}
  return %r : index
}}
"""


def test_a_recursive_function_takes_a_width_variant(
    private_cache: None, caplog: pytest.LogCaptureFixture
) -> None:
    """Its only caller is itself: the variant for scipy's int32 indices was refused
    ("'k' is called by other functions") and every call converted the operand."""
    exe = sparsecomp.compile(RECURSIVE)
    with warnings.catch_warnings(), caplog.at_level(logging.INFO, logger="sparsecomp"):
        warnings.simplefilter("error")  # a ConversionWarning would fail the test
        assert exe(sp.random(8, 8, density=0.3, format="csr"), 5) == 13
    assert any("compiled its variant" in r.getMessage() for r in caplog.records)


# -- a second battery: GPU emulation, the command line, HF models (session 43) ----------

NM_SPMM = """
#s = #sparse_iter.sparsity<nm[2, 4]>
func.func @spmm(%A: tensor<?x?xf16, #s>, %B: tensor<?x?xf16>, %C: tensor<?x?xf32>)
    -> tensor<?x?xf32> {
  %r = linalg.matmul ins(%A, %B : tensor<?x?xf16, #s>, tensor<?x?xf16>)
                     outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
"""


def test_tensor_core_products_check_their_dense_sizes(private_cache: None) -> None:
    """The 2:4 mma.sp kernel (cuda-emu:sm_80) took a B too short for A (read past its
    end) and a C of another shape (a truncated result); sm_75's scalar schedule
    refused them."""
    from sparsecomp.formats import SparseTensor
    from sparsecomp.sparsify import sparsify

    rng = np.random.default_rng(1)
    dense = sparsify(rng.standard_normal((19, 37)).astype(np.float16), "nm:2:4")
    a = SparseTensor.from_dense(dense, "nm:2:4")
    b = rng.standard_normal((37, 5)).astype(np.float16)
    exe = sparsecomp.compile(NM_SPMM, "cuda-emu:sm_80")
    got = exe(a, b, np.zeros((19, 5), np.float32))
    want = dense.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)
    with pytest.raises(ArgumentError, match="size 30 in dimension 0"):
        exe(a, b[:30], np.zeros((19, 5), np.float32))
    with pytest.raises(ArgumentError):
        exe(a, b, np.zeros((3, 5), np.float32))


HELPER = """
#sparse = #sparse_iter.sparsity<unstructured>
func.func private @helper(%A: tensor<?x?xf32, #sparse>, %x: tensor<?xf32>, %y: tensor<?xf32>)
    -> tensor<?xf32> {
  %r = linalg.matvec ins(%A, %x : tensor<?x?xf32, #sparse>, tensor<?xf32>)
                     outs(%y : tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}
func.func @first(%A: tensor<?x?xf32, #sparse>, %x: tensor<?xf32>, %y: tensor<?xf32>)
    -> tensor<?xf32> {
  %r = call @helper(%A, %x, %y)
      : (tensor<?x?xf32, #sparse>, tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}
func.func @second(%A: tensor<?x?xf32, #sparse>, %x: tensor<?xf32>, %y: tensor<?xf32>)
    -> tensor<?xf32> {
  %r = call @helper(%A, %x, %y)
      : (tensor<?x?xf32, #sparse>, tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  return %r : tensor<?xf32>
}
"""


@pytest.mark.parametrize("layout", ["ell", "bsr:4x4"])
def test_prepare_a_function_that_passes_its_matrix_to_a_helper(
    private_cache: None, layout: str
) -> None:
    """Two public functions calling one private helper (the multi-device guide's
    shape): a prepared layout retyped the caller but not the helper ("'func.call' op
    operand type mismatch")."""
    exe = sparsecomp.compile(HELPER)
    a = sp.random(30, 20, density=0.2, format="csr", dtype=np.float32, random_state=2)
    x, y = np.arange(20, dtype=np.float32), np.ones(30, np.float32)
    prepared = exe.prepare(a, layout, function="first")
    np.testing.assert_allclose(exe.first(prepared, x, y), y + a @ x, rtol=1e-5)
    np.testing.assert_allclose(exe.second(a, x, y), y + a @ x, rtol=1e-5)


def test_ptx_takes_a_path_given_as_a_string(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from sparsecomp.compiler.cuda import ptx

    path = tmp_path / "spmm.mlir"
    path.write_text(NM_SPMM)
    found = ptx(str(path), "cuda:sm_80")
    assert found
    assert all(".version" in text for text in found.values())


NARROW = """
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed),
                            posWidth = 32, crdWidth = 32}>
#csr8 = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed),
                             posWidth = 16, crdWidth = 8}>
func.func @add8(%A: tensor<?x?xf64, #csr>, %B: tensor<?x?xf64, #csr>) -> tensor<?x?xf64, #csr8> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %A, %c0 : tensor<?x?xf64, #csr>
  %n = tensor.dim %A, %c1 : tensor<?x?xf64, #csr>
  %e = tensor.empty(%m, %n) : tensor<?x?xf64, #csr8>
  %r = linalg.add ins(%A, %B : tensor<?x?xf64, #csr>, tensor<?x?xf64, #csr>)
                  outs(%e : tensor<?x?xf64, #csr8>) -> tensor<?x?xf64, #csr8>
  return %r : tensor<?x?xf64, #csr8>
}
func.func @mm8(%A: tensor<?x?xf64, #csr>, %B: tensor<?x?xf64, #csr>) -> tensor<?x?xf64, #csr8> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %A, %c0 : tensor<?x?xf64, #csr>
  %n = tensor.dim %B, %c1 : tensor<?x?xf64, #csr>
  %e = tensor.empty(%m, %n) : tensor<?x?xf64, #csr8>
  %r = linalg.matmul ins(%A, %B : tensor<?x?xf64, #csr>, tensor<?x?xf64, #csr>)
                     outs(%e : tensor<?x?xf64, #csr8>) -> tensor<?x?xf64, #csr8>
  return %r : tensor<?x?xf64, #csr8>
}
"""

MAIN_130 = """
func.func @main() {
  %c1 = arith.constant 1 : index
  %c130 = arith.constant 130 : index
  %c30 = arith.constant 30 : index
  %one = arith.constant 1.0 : f64
  %zero = arith.constant 0.0 : f64
  %d = tensor.generate %c1, %c130 {
  ^bb0(%i: index, %j: index):
    %ge = arith.cmpi uge, %j, %c30 : index
    %v = arith.select %ge, %one, %zero : f64
    tensor.yield %v : f64
  } : tensor<?x?xf64>
  %z = tensor.generate %c1, %c130 {
  ^bb0(%i: index, %j: index):
    tensor.yield %zero : f64
  } : tensor<?x?xf64>
  %a = sparse_iter.set_encoding %d : tensor<?x?xf64> to tensor<?x?xf64, #csr>
  %b = sparse_iter.set_encoding %z : tensor<?x?xf64> to tensor<?x?xf64, #csr>
  %r = call @add8(%a, %b) : (tensor<?x?xf64, #csr>, tensor<?x?xf64, #csr>) -> tensor<?x?xf64, #csr8>
  %u = sparse_iter.unset_encoding %r : tensor<?x?xf64, #csr8> to tensor<?x?xf64>
  %c0 = arith.constant 0 : index
  %c129 = arith.constant 129 : index
  %x = tensor.extract %u[%c0, %c129] : tensor<?x?xf64>
  %y = tensor.extract %u[%c0, %c30] : tensor<?x?xf64>
  %w = tensor.extract %u[%c0, %c1] : tensor<?x?xf64>
  vector.print %x : f64
  vector.print %y : f64
  vector.print %w : f64
  return
}
"""


def test_narrow_result_coordinates_past_their_signed_range(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A result with 8-bit coordinates and 130 columns: a row of 100 entries read its
    columns 128 and 129 back sign-extended (-128, -127) to order them and to gather
    their values, and wrote before its workspaces (SIGSEGV). Python gets the runtime's
    error (numpy's int8 stops at 127); a program (mlir-runner) reads them unsigned, as
    upstream does, and prints the right values."""
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(f"""
            import numpy as np, scipy.sparse as sp, sparsecomp
            exe = sparsecomp.compile({NARROW!r})
            a = sp.csr_matrix((np.ones(100), (np.zeros(100, int), np.arange(30, 130))), (1, 130))
            for f, b in ((exe.add8, sp.csr_matrix((1, 130))), (exe.mm8, sp.eye(130, format="csr"))):
                a2 = sp.vstack([a] * 130).tocsr() if f is exe.mm8 else a
                try:
                    f(a2, b)
                except sparsecomp.SparsecompError as e:
                    print("refused:", str(e).splitlines()[0])
        """)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.count("does not fit the result's 8-bit coordinates") == 2, run.stdout
    program = tmp_path / "main.mlir"
    program.write_text(NARROW + MAIN_130)
    tool = Path(sys.executable).with_name("sparsecomp-run")
    out = subprocess.run([tool, program, "-e", "main"], capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["1", "1", "0"], out.stdout


def test_wrapped_positions_below_a_compressed_level_are_not_a_count(private_cache: None) -> None:
    """A DCSR product into 8-bit positions: the level-1 count the error gave (1280) came
    from level 0's wrapped positions, not the 1289 entries of the product."""
    dcsr8 = (
        "#sparse_tensor.encoding<{ map = (i, j) -> (i : compressed, j : compressed), "
        "posWidth = 8, crdWidth = 8 }>"
    )
    text = f"""
    #CSR = {CSR}
    #D = {dcsr8}
    func.func @mm(%A: tensor<?x?xf64, #CSR>, %B: tensor<?x?xf64, #CSR>) -> tensor<?x?xf64, #D> {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %m = tensor.dim %A, %c0 : tensor<?x?xf64, #CSR>
      %n = tensor.dim %B, %c1 : tensor<?x?xf64, #CSR>
      %e = tensor.empty(%m, %n) : tensor<?x?xf64, #D>
      %r = linalg.matmul ins(%A, %B : tensor<?x?xf64, #CSR>, tensor<?x?xf64, #CSR>)
                         outs(%e : tensor<?x?xf64, #D>) -> tensor<?x?xf64, #D>
      return %r : tensor<?x?xf64, #D>
    }}
    """
    exe = sparsecomp.compile(text)
    a = sp.random(40, 40, density=0.2, format="csr", random_state=1)
    b = sp.random(40, 40, density=0.2, format="csr", random_state=2)
    with pytest.raises(SparsecompError, match="counted from wrapped positions"):
        exe.mm(a, b)


EXPAND = f"""
#SV = #sparse_tensor.encoding<{{ map = (d0) -> (d0 : compressed) }}>
#CSR = {CSR}
func.func @expand(%a: tensor<?xf64, #SV>) -> tensor<?x4xf64, #CSR> {{
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %n = tensor.dim %a, %c0 : tensor<?xf64, #SV>
  %m = arith.divui %n, %c4 : index
  %r = tensor.expand_shape %a [[0, 1]] output_shape [%m, 4]
      : tensor<?xf64, #SV> into tensor<?x4xf64, #CSR>
  return %r : tensor<?x4xf64, #CSR>
}}
"""


def test_a_reshape_whose_sizes_do_not_multiply_out_is_reported(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """10 entries expanded to ? x 4 (output_shape [10 / 4, 4], undefined in MLIR): the
    sparsifier's reshape wrote past its buffers (invalid positions, or a corrupted heap
    and a crash later). The program reports the sizes and exits with status 1."""
    source = tmp_path / "expand.mlir"
    source.write_text(EXPAND)
    code = f"""
        import numpy as np, scipy.sparse as sp, sparsecomp
        exe = sparsecomp.compile({str(source)!r})
        twelve = np.arange(12.0)
        print(np.array_equal(exe.expand(sp.coo_array(twelve)).to_dense(), twelve.reshape(3, 4)))
        exe.expand(sp.coo_array(np.arange(10.0)))
        print("not reached")
    """
    run = subprocess.run([sys.executable, "-W", "ignore", "-c", textwrap.dedent(code)],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 1, (run.returncode, run.stderr[-2000:])
    assert run.stdout.split() == ["True"]
    assert "expand.mlir:9:8: error: 'expand' expands dimension 0" in run.stderr
    assert "of size 10, into sizes whose product is 8" in run.stderr


MMA_SP = """
#L = #sparse_iter.layout<{map = (i, j) -> (i : dense, j floordiv 4 : dense,
                                          j mod 4 : structured[2, 4]),
                         posWidth = 32, crdWidth = 32, nmMetadata = META}>
func.func @g(%a: tensor<?x?xTYPE, #L>, %b: tensor<?x?xTYPE>, %c: tensor<?x?xf32>)
    -> tensor<?x?xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<?x?xTYPE, #L>, tensor<?x?xTYPE>)
                     outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}
"""


def test_mma_sp_metadata_only_where_the_tensor_cores_read_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A 2:4 layout storing mma.sp metadata words, where no tensor-core kernel takes the
    product (the host, m16n8k32 words, f32): a loop read the words as coordinates, out
    of bounds (a segfault). The host converts the operand; cuda-emu refuses the op."""
    code = f"""
        import warnings
        import numpy as np, sparsecomp
        from sparsecomp.formats import SparseTensor
        warnings.simplefilter("ignore")
        text = {MMA_SP!r}
        rng = np.random.default_rng(0)
        d = rng.standard_normal((16, 32)).astype(np.float16)
        for i in range(16):
            for g in range(0, 32, 4):
                d[i, g + np.argsort(-np.abs(d[i, g:g + 4]))[2:]] = 0
        b = rng.standard_normal((32, 8)).astype(np.float16)
        want = d.astype(np.float32) @ b.astype(np.float32)
        for meta, ty, target in [("mma_sp_m16n8k16", "f16", "host"),
                                 ("mma_sp_m16n8k32", "f16", "host"),
                                 ("mma_sp_m16n8k16", "f16", "cuda-emu:sm_80"),
                                 ("mma_sp_m16n8k32", "f16", "cuda-emu:sm_80"),
                                 ("mma_sp_m16n8k16", "f32", "cuda-emu:sm_80")]:
            src = text.replace("META", meta).replace("TYPE", ty)
            dt = np.float16 if ty == "f16" else np.float32
            try:
                exe = sparsecomp.compile(src, target)
                layout = exe.g.signature.args[0].layout
                a = SparseTensor.from_dense(d.astype(dt), layout)
                got = exe.g(a, b.astype(dt), np.zeros((16, 8), np.float32))
                print(np.allclose(got, want, rtol=1e-2, atol=1e-2))
            except sparsecomp.SparsecompError as e:
                print("refused" if "only the 2:4 tensor-core kernel reads" in str(e) else e)
    """
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, (run.returncode, run.stderr[-2000:])
    assert run.stdout.split() == ["True", "True", "True", "refused", "refused"], run.stdout
