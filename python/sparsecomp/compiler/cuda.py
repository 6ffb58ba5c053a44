"""PTX for the CUDA schedule of a program, and ``ptxas`` to check and assemble it.

:func:`ptx` runs the same stages as the CPU back end up to stage III with
the program's layouts resolved for a CUDA target, the CUDA schedule
(``sparsecomp-cuda-schedule``: one row per thread, 128 threads per block),
then ``gpu-kernel-outlining`` and MLIR's ``gpu-lower-to-nvvm-pipeline`` with
``format=isa``, and returns each kernel's PTX. The pipeline runs in a
``sparsecomp-opt`` subprocess: LLVM reports some target errors by aborting
the process. :func:`assemble` runs ``ptxas`` (the ``nvidia-cuda-nvcc`` wheel,
extra ``cuda``) on the PTX for an sm; its errors come back as a
:class:`~sparsecomp.errors.ToolchainError`.

Launching the kernels on a GPU (a runtime on ``cuda-bindings``) is not built
yet; ``sparsecomp.compile(..., target="cuda-emu:sm_80")`` runs the same
schedule on the CPU.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from mlir import ir

from sparsecomp.errors import CompileError, SparsecompError, ToolchainError
from sparsecomp.ir.context import make_context
from sparsecomp.targets import CudaTarget

#: PTX ISA version requested from LLVM's NVPTX back end (8.0: sm_90 and below).
PTX_FEATURES = "+ptx80"
PREFIX = "cuda:"


def parse_target(target: str | CudaTarget) -> CudaTarget:
    """``"cuda:sm_80"`` / ``"cuda:sm_90"`` (or a :class:`CudaTarget`) as a target."""
    if isinstance(target, CudaTarget):
        return target
    chip = target.removeprefix(PREFIX)
    if not target.startswith(PREFIX) or not chip.startswith("sm_") or not chip[3:].isdigit():
        raise SparsecompError(f"expected cuda:sm_80 or cuda:sm_90, got '{target}'")
    return CudaTarget.for_sm(int(chip[3:]))


def pipeline(device: CudaTarget) -> str:
    """The textual pipeline from a program to gpu.binary ops holding PTX."""
    return (
        "builtin.module(sparsecomp-cpu-layouts, sparsecomp-cpu-loops, sparsecomp-cpu-buffers, "
        "sparsecomp-cuda-schedule, gpu-kernel-outlining, gpu-lower-to-nvvm-pipeline{"
        f"cubin-chip={device.chip} cubin-features={PTX_FEATURES} cubin-format=isa}})"
    )


def _with_target(text: str, device: CudaTarget) -> str:
    """``text`` with ``device`` as the module's only target (refused if it names its own)."""
    with make_context():
        module = ir.Module.parse(text)
        attrs = module.operation.attributes
        if "sparse_iter.targets" in attrs:
            raise CompileError("ptx() compiles modules without sparse_iter.targets")
        attrs["sparse_iter.targets"] = ir.Attribute.parse(f"{{gpu = {device.attr_text()}}}")
        return module.operation.get_asm(enable_debug_info=True)


def ptx(source: str | Path, target: str | CudaTarget = "cuda:sm_80") -> dict[str, str]:
    """PTX text of every GPU module of ``source`` (a path or MLIR text), by module name."""
    device = parse_target(target)
    text = Path(source).read_text() if isinstance(source, Path) else source
    with tempfile.TemporaryDirectory(prefix="sparsecomp-ptx-") as tmp:
        inp, result = Path(tmp) / "in.mlir", Path(tmp) / "out.mlir"
        inp.write_text(_with_target(text, device))
        done = subprocess.run(
            [sys.executable, "-m", "sparsecomp.tools.opt", str(inp), "-o", str(result),
             f"--pass-pipeline={pipeline(device)}"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise CompileError(
                f"the CUDA pipeline failed for {device.chip}:\n{done.stderr.strip()}"
            )
        out = result.read_text()
    found: dict[str, str] = {}
    with make_context():
        module = ir.Module.parse(out)
        for op in module.body.operations:
            if op.operation.name == "gpu.binary":
                name = ir.StringAttr(op.operation.attributes["sym_name"]).value
                (obj,) = ir.ArrayAttr(op.operation.attributes["objects"])
                found[name] = _object_bytes(obj).decode()
    return found


def _object_bytes(attr: ir.Attribute) -> bytes:
    from mlir.dialects import gpu

    return bytes(gpu.ObjectAttr(attr).object)


def ptxas() -> Path | None:
    """``ptxas`` from the ``nvidia-cuda-nvcc`` wheel, else from ``PATH``; None if neither."""
    site = Path(sysconfig.get_paths()["purelib"]) / "nvidia"
    for found in sorted(site.glob("*/bin/ptxas")) + sorted(site.glob("cuda_nvcc/bin/ptxas")):
        return found
    on_path = shutil.which("ptxas")
    return Path(on_path) if on_path else None


def assemble(ptx_text: str, chip: str) -> bytes:
    """A cubin for ``chip`` (``sm_90``) from PTX, by ``ptxas``; its errors as ToolchainError."""
    tool = ptxas()
    if tool is None:
        raise ToolchainError("no ptxas", hint="pip install 'sparsecomp[cuda]' (nvidia-cuda-nvcc)")
    with tempfile.TemporaryDirectory(prefix="sparsecomp-ptxas-") as tmp:
        src, out = Path(tmp) / "k.ptx", Path(tmp) / "k.cubin"
        src.write_text(ptx_text)
        done = subprocess.run(
            [str(tool), f"-arch={chip}", str(src), "-o", str(out)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise ToolchainError(f"ptxas -arch={chip} failed:\n{done.stderr.strip()}")
        return out.read_bytes()
