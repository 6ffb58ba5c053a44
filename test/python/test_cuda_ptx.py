"""PTX for the CUDA schedule, checked by ``ptxas`` for sm_80 and sm_90 (no GPU needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparsecomp.compiler import cuda
from sparsecomp.errors import CompileError, SparsecompError, ToolchainError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("chip", ["sm_80", "sm_90"])
@pytest.mark.parametrize("example", ["spmv", "spmm", "sddmm"])
def test_ptx_assembles(example: str, chip: str) -> None:
    kernels = cuda.ptx(EXAMPLES / f"{example}.mlir", f"cuda:{chip}")
    # one kernel each: SDDMM's output values start from zero in registers (no fill launch)
    assert list(kernels) == [f"{example}_kernel"]
    for name, text in kernels.items():
        assert f".target {chip}" in text
        assert f".visible .entry {example}_kernel(" in text  # module {name}
        # Rows (or entries) from the block and thread ids.
        assert "%ctaid.x" in text
        assert "%tid.x" in text
        cubin = cuda.assemble(text, chip)
        assert cubin[:4] == b"\x7fELF"


def test_ptxas_errors_and_bad_targets() -> None:
    with pytest.raises(ToolchainError, match="ptxas -arch=sm_80 failed"):
        cuda.assemble(".version 8.0\n.target sm_80\n.address_size 64\nnonsense;\n", "sm_80")
    with pytest.raises(SparsecompError, match=r"expected cuda:sm_XY \(sm_70, .*sm_90\)"):
        cuda.ptx(EXAMPLES / "spmv.mlir", "sm_80")
    parse_error = r"could not parse the program\n<source>:1:13: error: expected"
    with pytest.raises(CompileError, match=parse_error):
        cuda.ptx("func.func @f(")
    upstream = """
#COO = #sparse_tensor.encoding<{ map = (i, j) -> (i : compressed(nonunique), j : singleton) }>
#DCSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : compressed, j : compressed) }>
func.func @conv(%a: tensor<4x6xf64, #COO>) -> tensor<4x6xf64, #DCSR> {
  %0 = sparse_tensor.convert %a : tensor<4x6xf64, #COO> to tensor<4x6xf64, #DCSR>
  return %0 : tensor<4x6xf64, #DCSR>
}"""
    with pytest.raises(
        CompileError, match="need MLIR's sparsifier, which has no GPU schedule: 'conv'"
    ):
        cuda.ptx(upstream)
    named = "module attributes {sparse_iter.targets = {}} {}"
    with pytest.raises(CompileError, match=r"without sparse_iter\.targets"):
        cuda.ptx(named)


def test_compile_cli_writes_ptx_and_cubin(tmp_path: Path, capsys) -> None:
    from sparsecomp.tools import compile as cli

    out = tmp_path / "k"
    assert cli.main([str(EXAMPLES / "spmv.mlir"), "--target", "cuda:sm_90", "-o", str(out)]) == 0
    assert "spmv_kernel.ptx, spmv_kernel.cubin" in capsys.readouterr().out
    assert ".target sm_90" in (out / "spmv_kernel.ptx").read_text()
    assert (out / "spmv_kernel.cubin").read_bytes()[:4] == b"\x7fELF"
    assert cli.main([str(EXAMPLES / "spmv.mlir"), "--target", "cuda:90", "-o", str(out)]) == 1
    assert "expected cuda:sm_XY (sm_70, sm_75, sm_80" in capsys.readouterr().err


def test_chips_this_ptxas_cannot_assemble_are_refused_up_front(capsys) -> None:
    """``cuda:sm_70`` was accepted until ptxas failed at the end of the build ("Value
    'sm_70' is not defined"): CUDA 13's ptxas dropped it. Now the target is refused
    before anything is built, naming the chips that work; the emulator still runs it."""
    import sparsecomp
    from sparsecomp.compiler.ptxas import chips
    from sparsecomp.errors import TargetError
    from sparsecomp.tools import compile as cli

    known = chips()
    assert known is not None, "the test extra installs nvidia-cuda-nvcc (ptxas)"
    assert "sm_80" in known
    assert "sm_90" in known
    if "sm_70" in known:
        pytest.skip("this ptxas still assembles sm_70")
    with pytest.raises(TargetError, match="does not assemble sm_70") as info:
        sparsecomp.compile(EXAMPLES / "spmv.mlir", "cuda:sm_70")
    assert "sparsecomp builds for sm_75, sm_80" in info.value.message
    assert cli.main([str(EXAMPLES / "spmv.mlir"), "--target", "cuda:sm_70", "-o", "x"]) == 1
    assert "does not assemble sm_70" in capsys.readouterr().err
    # the hint's other road: the emulator takes every chip the lowering knows
    exe = sparsecomp.compile(EXAMPLES / "spmv.mlir", "cuda-emu:sm_70")
    assert exe.manifest["emulates"] == "cuda:sm_70"
