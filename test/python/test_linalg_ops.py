"""ir/linalg_ops.py: the linalg ops a compile builds and reads, without importing the
``mlir.dialects.linalg`` package (its OpDSL costs every compile process 50-75 ms)."""

from __future__ import annotations

import os
import subprocess
import sys

from mlir import ir
from mlir.dialects import arith, func, tensor

from sparsecomp.ir.linalg_ops import input_count, iterator_types, linalg_fill

GENERIC = """
func.func @f(%a: tensor<4x3xf32>, %b: tensor<3xf32>, %c: tensor<4xf32>) -> tensor<4xf32> {
  %0 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,
                                        affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%a, %b : tensor<4x3xf32>, tensor<3xf32>) outs(%c : tensor<4xf32>) {
  ^bb0(%x: f32, %y: f32, %z: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %z, %m : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""


def test_reads_a_generic_without_its_python_class() -> None:
    with ir.Context():
        module = ir.Module.parse(GENERIC)
        generic = module.body.operations[0].regions[0].blocks[0].operations[0].operation
        assert iterator_types(generic) == ["parallel", "reduction"]
        assert input_count(generic) == 2


def test_fill_builds_a_verified_linalg_fill() -> None:
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.create()
        f32 = ir.F32Type.get()
        with ir.InsertionPoint(module.body):
            function = func.FuncOp("g", ([], [ir.RankedTensorType.get([5], f32)]))
            with ir.InsertionPoint(function.add_entry_block()):
                zero = arith.constant(f32, 0.0)
                filled = linalg_fill(zero, outs=[tensor.empty([5], f32)])
                func.ReturnOp([filled])
        assert module.operation.verify()
        assert "linalg.fill ins(%" in str(module)


def test_a_compile_imports_no_linalg_package(repo) -> None:
    """With the light dialect modules first (as the compile daemon and server run), the
    examples and the benchmark kernels compile for the CPU and the emulated GPU without
    upstream's linalg package or its llvm module, to the same LLVM IR as with them."""
    probe = (
        "import glob, sys, sparsecomp\n"
        "from sparsecomp.ir import light_dialects\n"
        "if sys.argv[1] == 'light':\n"
        "    light_dialects.prefer()\n"
        "for f in sorted(glob.glob('examples/*.mlir') + glob.glob('benchmarks/kernels/*.mlir')):\n"
        "    for target in ('host', 'cuda-emu:sm_90'):\n"
        "        exe = sparsecomp.compile(f, target, cache_results=False)\n"
        "        print(f, target, hash((exe.directory / 'kernel.ll').read_text()))\n"
        "print(sorted(m for m in sys.modules\n"
        "             if m.startswith('mlir.dialects.linalg') or m == 'mlir.dialects.llvm'))\n"
    )
    env = {**os.environ, "SPARSECOMP_COMPILE_IN_PROCESS": "1", "PYTHONHASHSEED": "0"}
    runs = {}
    for mode in ("light", "upstream"):
        done = subprocess.run([sys.executable, "-c", probe, mode], capture_output=True,
                              text=True, check=False, cwd=repo, env=env)  # fmt: skip
        assert done.returncode == 0, done.stderr
        runs[mode] = done.stdout.splitlines()
    assert runs["light"][-1] == "[]"
    assert "'mlir.dialects.linalg'" in runs["upstream"][-1]
    assert "'mlir.dialects.llvm'" in runs["upstream"][-1]
    assert runs["light"][:-1] == runs["upstream"][:-1]
    assert len(runs["light"]) > 10
