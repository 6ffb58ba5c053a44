"""Storage a program can see is the storage it declared, as upstream shows it.

``main()`` programs that print or query a sparse tensor's storage run three
ways: MLIR's own ``mlir-opt --sparsifier | mlir-runner``, ``sparsecomp-run``
and ``sparsecomp-opt --pass-pipeline='builtin.module(sparsecomp-cpu)' |
mlir-runner``; the printed text must be the same. AoS COO
(``singleton`` without ``soa``) prints its interleaved coordinates (it printed
SoA ``crd`` arrays); a BSR tensor of dynamic shape answers its storage queries
blocked (they were refused), and where its shape does not divide into
blocks the program reports the shape and exits with status 1.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sparsecomp.ir.odsgen import tool
from sparsecomp.runtime.libs import library_path
from sparsecomp.tools.where import RUNNER_LIBRARIES

pytestmark = pytest.mark.usefixtures("private_cache")


def _runner(llvm_ir: str) -> subprocess.CompletedProcess[str]:
    libs = ",".join(str(library_path(name)) for name in RUNNER_LIBRARIES)
    cmd = [tool("mlir-runner"), "-e", "main", "-entry-point-result=void", f"-shared-libs={libs}"]
    return subprocess.run(cmd, input=llvm_ir, capture_output=True, text=True, timeout=300)


def _lowered(cmd: list[str]) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _three_ways(tmp_path: Path, program: str) -> list[subprocess.CompletedProcess[str]]:
    """Upstream's run, sparsecomp-run's and sparsecomp-opt's piped to mlir-runner."""
    src = tmp_path / "prog.mlir"
    src.write_text(program)
    upstream = _runner(_lowered([tool("mlir-opt"), "--sparsifier", str(src)]))
    ours = subprocess.run(
        [sys.executable, "-m", "sparsecomp.tools.run", str(src), "-e", "main"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    pipeline = "--pass-pipeline=builtin.module(sparsecomp-cpu)"
    opt = [sys.executable, "-m", "sparsecomp.tools.opt", pipeline, str(src)]
    return [upstream, ours, _runner(_lowered(opt))]


def _same_as_upstream(tmp_path: Path, program: str) -> str:
    upstream, *ours = _three_ways(tmp_path, program)
    assert upstream.returncode == 0, upstream.stderr[-3000:]
    for done in ours:
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout == upstream.stdout
    return upstream.stdout


COO2 = "#sparse_tensor.encoding<{map = (i, j) -> (i : compressed(nonunique), j : singleton)}>"
COO3 = (
    "#sparse_tensor.encoding<{map = (i, j, k) -> "
    "(i : compressed(nonunique), j : singleton(nonunique), k : singleton)}>"
)


def _inserts(encoding: str, shape: tuple[int, ...], entries: list[tuple[int, ...]]) -> str:
    """``main``: a COO tensor filled by ``tensor.insert`` in ``entries``' order, printed."""
    ty = f"tensor<{'x'.join(map(str, shape))}xf64, #COO>"
    lines = [f"#COO = {encoding}", "func.func @main() {", f"  %t0 = tensor.empty() : {ty}"]
    for n, at in enumerate(entries):
        idx = []
        for k, i in enumerate(at):
            lines.append(f"  %i{n}_{k} = arith.constant {i} : index")
            idx.append(f"%i{n}_{k}")
        lines.append(f"  %v{n} = arith.constant {n + 1}.0 : f64")
        lines.append(f"  %t{n + 1} = tensor.insert %v{n} into %t{n}[{', '.join(idx)}] : {ty}")
    lines += [
        f"  %t = sparse_tensor.load %t{len(entries)} hasInserts : {ty}",
        f"  sparse_tensor.print %t : {ty}",
        f"  bufferization.dealloc_tensor %t : {ty}",
        "  return",
        "}",
    ]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("encoding", "shape", "entries"),
    [
        (COO2, (4, 5), [(0, 3), (2, 1), (3, 2)]),
        (COO2, (4, 5), [(0, 0), (0, 4), (1, 2), (3, 0), (3, 4)]),
        (COO2, (3, 7), [(2, 6)]),
        (COO3, (4, 3, 5), [(0, 1, 1), (0, 1, 3), (2, 0, 2), (3, 2, 1)]),
        (COO3, (2, 2, 2), [(0, 0, 1), (1, 0, 0), (1, 1, 1)]),
    ],
)
def test_aos_coo_prints_as_declared(
    tmp_path: Path, encoding: str, shape: tuple[int, ...], entries: list[tuple[int, ...]]
) -> None:
    """Lexicographic inserts (upstream's runtime library asserts on others), printed
    with one interleaved crd array for the AoS region, as upstream prints it."""
    out = _same_as_upstream(tmp_path, _inserts(encoding, shape, entries))
    assert "crd[0] : ( " + ", ".join(str(i) for at in entries for i in at) + " )" in out
    assert "crd[1]" not in out


AOS_WITH_OPS = """
#COO = #sparse_tensor.encoding<{map = (i, j) -> (i : compressed(nonunique), j : singleton)}>
#CSR = #sparse_tensor.encoding<{map = (i, j) -> (i : dense, j : compressed)}>
#square = {
  indexing_maps = [affine_map<(i,j) -> (i,j)>, affine_map<(i,j) -> (i,j)>],
  iterator_types = ["parallel", "parallel"]
}
func.func @main() {
  %c0 = arith.constant 0 : index
  %f0 = arith.constant 0.0 : f64
  %d = arith.constant dense<[[0.0, 1.5, 0.0, 0.0, 2.5], [0.0, 0.0, 0.0, 0.0, 0.0],
                             [3.5, 0.0, 0.0, 4.5, 0.0], [0.0, 0.0, 5.5, 0.0, 0.0]]>
      : tensor<4x5xf64>
  %t = sparse_tensor.convert %d : tensor<4x5xf64> to tensor<4x5xf64, #COO>
  %e = tensor.empty() : tensor<4x5xf64, #COO>
  %s = linalg.generic #square ins(%t : tensor<4x5xf64, #COO>) outs(%e : tensor<4x5xf64, #COO>) {
    ^bb0(%a: f64, %o: f64):
      %m = arith.mulf %a, %a : f64
      linalg.yield %m : f64
  } -> tensor<4x5xf64, #COO>
  %x = arith.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0]> : tensor<5xf64>
  %y0 = arith.constant dense<0.0> : tensor<4xf64>
  %y = linalg.matvec ins(%t, %x : tensor<4x5xf64, #COO>, tensor<5xf64>)
                     outs(%y0 : tensor<4xf64>) -> tensor<4xf64>
  %v = vector.transfer_read %y[%c0], %f0 : tensor<4xf64>, vector<4xf64>
  vector.print %v : vector<4xf64>
  %n = sparse_tensor.number_of_entries %t : tensor<4x5xf64, #COO>
  vector.print %n : index
  sparse_tensor.print %t : tensor<4x5xf64, #COO>
  sparse_tensor.print %s : tensor<4x5xf64, #COO>
  %csr = sparse_tensor.convert %s : tensor<4x5xf64, #COO> to tensor<4x5xf64, #CSR>
  sparse_tensor.print %csr : tensor<4x5xf64, #CSR>
  bufferization.dealloc_tensor %t : tensor<4x5xf64, #COO>
  bufferization.dealloc_tensor %s : tensor<4x5xf64, #COO>
  bufferization.dealloc_tensor %csr : tensor<4x5xf64, #CSR>
  return
}
"""


def test_aos_coo_with_other_ops_prints_as_declared(tmp_path: Path) -> None:
    """A converted AoS COO tensor squared, multiplied by a vector and printed."""
    out = _same_as_upstream(tmp_path, AOS_WITH_OPS)
    assert "crd[0] : ( 0, 1, 0, 4, 2, 0, 2, 3, 3, 2 )" in out


BSR = """
#BSR = #sparse_tensor.encoding<{
  map = (i, j) -> (i floordiv 2 : dense, j floordiv 2 : compressed,
                   i mod 2 : dense, j mod 2 : dense)
}>
func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %f0 = arith.constant 0.0 : f64
  %d = arith.constant DENSE
  %a = sparse_tensor.convert %d : TYPE to tensor<?x?xf64, #BSR>
  sparse_tensor.print %a : tensor<?x?xf64, #BSR>
  %p = sparse_tensor.positions %a {level = 1 : index} : tensor<?x?xf64, #BSR> to memref<?xindex>
  %c = sparse_tensor.coordinates %a {level = 1 : index} : tensor<?x?xf64, #BSR> to memref<?xindex>
  %v = sparse_tensor.values %a : tensor<?x?xf64, #BSR> to memref<?xf64>
  %pv = vector.transfer_read %p[%c0], %c0 : memref<?xindex>, vector<3xindex>
  vector.print %pv : vector<3xindex>
  %cv = vector.transfer_read %c[%c0], %c0 : memref<?xindex>, vector<2xindex>
  vector.print %cv : vector<2xindex>
  %vv = vector.transfer_read %v[%c0], %f0 : memref<?xf64>, vector<8xf64>
  vector.print %vv : vector<8xf64>
  %n = sparse_tensor.number_of_entries %a : tensor<?x?xf64, #BSR>
  vector.print %n : index
  %l1 = sparse_tensor.lvl %a, %c1 : tensor<?x?xf64, #BSR>
  vector.print %l1 : index
  %l2 = sparse_tensor.lvl %a, %c2 : tensor<?x?xf64, #BSR>
  vector.print %l2 : index
  %d1 = tensor.dim %a, %c1 : tensor<?x?xf64, #BSR>
  vector.print %d1 : index
  bufferization.dealloc_tensor %a : tensor<?x?xf64, #BSR>
  return
}
"""


def _bsr_program(a: np.ndarray) -> str:
    rows = ", ".join("[" + ", ".join(f"{x:.1f}" for x in row) + "]" for row in a)
    ty = f"tensor<{a.shape[0]}x{a.shape[1]}xf64>"
    return BSR.replace("DENSE", f"dense<[{rows}]> : {ty}").replace("TYPE", ty)


def test_dynamic_bsr_storage_queries(tmp_path: Path) -> None:
    """positions, coordinates, values, number_of_entries, lvl and print of a dynamic-shape
    BSR tensor whose shape divides into blocks (they were refused: held as CSR)."""
    a = np.zeros((4, 6))
    a[0, :2], a[1, 1], a[2:, 4:] = (1, 2), 3, [[4, 5], [6, 7]]
    out = _same_as_upstream(tmp_path, _bsr_program(a))
    assert "lvl = ( 2, 3, 2, 2 )" in out
    assert "values : ( 1, 2, 0, 3, 4, 5, 6, 7 )" in out


def test_dynamic_bsr_not_whole_blocks_is_a_run_time_error(tmp_path: Path) -> None:
    """A 3x6 matrix into 2x2 blocks: upstream prints a 4x6 tensor (garbage, silently);
    sparsecomp reports the shape and exits with status 1, through both routes."""
    a = np.zeros((3, 6))
    a[0, :2], a[1, 1], a[2, 4:] = (1, 2), 3, (4, 5)
    program = _bsr_program(a)
    line = program[: program.index("sparse_tensor.convert")].count("\n") + 1
    upstream, *ours = _three_ways(tmp_path, program)
    assert "dim = ( 4, 6 )" in upstream.stdout
    for done in ours:
        assert done.returncode == 1
        assert f"prog.mlir:{line}:8: error: 'main' holds tensor<?x?xf64, " in done.stderr
        assert "its shape at run time, 3x6, does not divide into them" in done.stderr
        assert "Sparse Tensor" not in done.stdout


def test_dynamic_bsr_argument_from_python() -> None:
    """A public function reading a dynamic-shape BSR argument's storage: whole-block
    shapes are answered, others refused by the runtime before the call."""
    import sparsecomp
    from sparsecomp.errors import ArgumentError
    from sparsecomp.formats import SparseTensor

    exe = sparsecomp.compile(
        BSR.split("func.func")[0]
        + """
func.func @nnz(%a: tensor<?x?xf64, #BSR>) -> index {
  %n = sparse_tensor.number_of_entries %a : tensor<?x?xf64, #BSR>
  return %n : index
}
"""
    )
    assert exe.functions["nnz"].signature.args[0].blocks == (2, 2)
    a = np.zeros((4, 6))
    a[0, 1], a[3, 5] = 1, 2
    assert exe(SparseTensor.from_dense(a, "bsr:2x2")) == 8
    for _ in range(2):  # the fast path's second call too
        with pytest.raises(ArgumentError, match=r"shape \(3, 6\) does not divide into whole 2x2"):
            exe(SparseTensor.from_dense(a[:3], "bsr:2x2"))
