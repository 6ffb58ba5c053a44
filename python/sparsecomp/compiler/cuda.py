"""PTX for the CUDA schedule of a program, and ``ptxas`` to check and assemble it.

:func:`ptx` resolves the program's layouts for a CUDA target, puts BSR and
2:4 products on tensor cores (``sparsecomp-cuda-tensorize``), runs the CPU
back end's stages II and III for the rest, the CUDA schedule
(``sparsecomp-cuda-schedule``: rows on threads, SpMM's columns and SpMV's
entries on lanes), then ``gpu-kernel-outlining`` and MLIR's
``gpu-lower-to-nvvm-pipeline`` with
``format=isa``, and returns each kernel's PTX. The pipeline runs in a
``sparsecomp-opt`` subprocess: LLVM reports some target errors by aborting
the process. :func:`~.ptxas.assemble` runs ``ptxas`` (the ``nvidia-cuda-nvcc`` wheel,
extra ``cuda``) on the PTX for an sm; its errors come back as a
:class:`~sparsecomp.errors.ToolchainError`.

``sparsecomp.compile(..., target="cuda:sm_80")`` builds the same pipeline
into an executable (:func:`device_pipeline`, :func:`write_kernels`; it runs
through :mod:`sparsecomp.runtime.cuda`); ``target="cuda-emu:sm_80"`` runs
the same schedule on the CPU.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from mlir import ir

from sparsecomp.compiler.ptxas import assemble, check_chip, ptxas
from sparsecomp.errors import CompileError, ParseError, SparsecompError
from sparsecomp.ir.context import make_context
from sparsecomp.ir.parsing import convert, parse_module
from sparsecomp.targets import CudaTarget
from sparsecomp.targets.cuda import SM_VERSIONS
from sparsecomp.tools.diagnostics import format_diagnostic

#: PTX ISA version requested from LLVM's NVPTX back end (8.0: sm_90 and below).
PTX_FEATURES = "+ptx80"
PREFIX = "cuda:"


def parse_target(target: str | CudaTarget) -> CudaTarget:
    """``"cuda:sm_80"`` / ``"cuda:sm_90"`` (or a :class:`CudaTarget`) as a target."""
    if isinstance(target, CudaTarget):
        return target
    chip = target.removeprefix(PREFIX)
    if not target.startswith(PREFIX) or not chip.startswith("sm_") or not chip[3:].isdigit():
        chips = ", ".join(f"sm_{v}" for v in SM_VERSIONS)
        raise SparsecompError(f"expected cuda:sm_XY ({chips}), got '{target}'")
    device = CudaTarget.for_sm(int(chip[3:]))
    check_chip(device.chip)
    return device


#: The first half: layouts resolved for the GPU (functions that need MLIR's
#: sparsifier are marked here, and refused: it has no GPU schedule).
LAYOUTS = "builtin.module(sparsecomp-cpu-layouts)"


def pipeline(device: CudaTarget) -> str:
    """The textual pipeline from resolved layouts to gpu.binary ops holding PTX."""
    return (
        "builtin.module(sparsecomp-cuda-tensorize, sparsecomp-cpu-loops, sparsecomp-cpu-buffers, "
        f"sparsecomp-cuda-schedule, {device_pipeline(device)})"
    )


def device_pipeline(device: CudaTarget) -> str:
    """GPU-scheduled buffers to LLVM host code with the kernels' PTX in ``gpu.binary`` ops.

    Results that are copies of arguments return the arguments
    (``sparse-iter-forward-returned-arguments``), host code's remaining
    linalg ops (the schedule has put one-dimensional
    fills on the GPU already) become loops, host allocations become managed
    memory (``sparse-iter-gpu-host-alloc``), launches are outlined into
    kernels, and MLIR's
    ``gpu-lower-to-nvvm-pipeline`` lowers both sides (host launches to its
    ``mgpu*`` runtime calls, which ``runtime/cuda_shim.c`` implements).
    """
    return (
        "sparse-iter-forward-returned-arguments, func.func(convert-linalg-to-loops), "
        "sparse-iter-gpu-host-alloc, gpu-kernel-outlining, "
        "gpu-lower-to-nvvm-pipeline{"
        f"cubin-chip={device.chip} cubin-features={PTX_FEATURES} cubin-format=isa}}"
    )


def _opt(inp: Path, out: Path, passes: str, what: str) -> None:
    """``sparsecomp-opt inp -o out --pass-pipeline=passes`` in a subprocess."""
    done = subprocess.run(
        [sys.executable, "-m", "sparsecomp.tools.opt", str(inp), "-o", str(out),
         f"--pass-pipeline={passes}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise CompileError(f"{what} failed:\n{done.stderr.strip()}")


def _refuse_upstream(text: str, filename: str) -> None:
    """Name the functions marked for MLIR's sparsifier, which has no GPU schedule."""
    from sparsecomp.transforms.import_sparse_tensor import UPSTREAM_ATTR

    with make_context():
        module = ir.Module.parse(text)
        marked = [
            f"'{ir.StringAttr(op.attributes['sym_name']).value}' "
            f"({ir.StringAttr(op.attributes[UPSTREAM_ATTR]).value})"
            for op in (o.operation for o in module.body.operations)
            if op.name == "func.func" and UPSTREAM_ATTR in op.attributes
        ]
    if marked:
        raise CompileError(
            f"{filename}: these functions need MLIR's sparsifier, which has no GPU schedule: "
            + "; ".join(marked)
        )


def _with_target(text: str, filename: str, device: CudaTarget) -> str:
    """``text`` with ``device`` as the module's only target (refused if it names its own)."""
    ctx = make_context()
    with ctx:
        try:
            module = parse_module(text, filename, ctx)
        except ir.MLIRError as exc:
            lines = [
                format_diagnostic(d) for e in exc.error_diagnostics for d in convert(e, filename)
            ]
            raise ParseError(
                "\n".join([f"{filename}: could not parse the program", *lines])
            ) from None
        attrs = module.operation.attributes
        if "sparse_iter.targets" in attrs:
            raise CompileError("ptx() compiles modules without sparse_iter.targets")
        attrs["sparse_iter.targets"] = ir.Attribute.parse(f"{{gpu = {device.attr_text()}}}")
        return module.operation.get_asm(enable_debug_info=True)


def ptx(source: str | Path, target: str | CudaTarget = "cuda:sm_80") -> dict[str, str]:
    """PTX text of every GPU module of ``source`` (a path or MLIR text), by module name."""
    device = parse_target(target)
    if isinstance(source, str) and "\n" not in source and Path(source.strip()).is_file():
        source = Path(source.strip())  # a path given as a string, as compile() takes it
    if isinstance(source, Path):
        text, filename = source.read_text(), str(source)
    else:
        text, filename = source, "<source>"
    with tempfile.TemporaryDirectory(prefix="sparsecomp-ptx-") as tmp:
        inp, laid, result = (Path(tmp) / n for n in ("in.mlir", "layouts.mlir", "out.mlir"))
        inp.write_text(_with_target(text, filename, device))
        _opt(inp, laid, LAYOUTS, f"{filename}: resolving layouts for {device.chip}")
        _refuse_upstream(laid.read_text(), filename)
        _opt(laid, result, pipeline(device), f"{filename}: the CUDA pipeline for {device.chip}")
        out = result.read_text()
    with make_context():
        return kernels(ir.Module.parse(out))


def kernels(module: ir.Module) -> dict[str, str]:
    """PTX text of each ``gpu.binary`` op of ``module``, by its name."""
    found: dict[str, str] = {}
    for op in module.body.operations:
        if op.operation.name == "gpu.binary":
            name = ir.StringAttr(op.operation.attributes["sym_name"]).value
            (obj,) = ir.ArrayAttr(op.operation.attributes["objects"])
            found[name] = _object_bytes(obj).decode()
    return found


def write_kernels(module: ir.Module, out: Path, device: CudaTarget) -> list[dict[str, object]]:
    """Write each kernel's ``<name>.ptx``, and ``<name>.cubin`` where ``ptxas`` is installed.

    Returns the manifest's ``kernels`` entries (``name``, ``ptx``, ``cubin``
    or None, ``sm``). The library embeds the PTX; the runtime loads the
    cubin instead on a GPU of exactly this compute capability.
    """
    entries: list[dict[str, object]] = []
    for name, text in kernels(module).items():
        (out / f"{name}.ptx").write_text(text)
        cubin = None
        if ptxas() is not None:
            (out / f"{name}.cubin").write_bytes(assemble(text, device.chip))
            cubin = f"{name}.cubin"
        entries.append({"name": name, "ptx": f"{name}.ptx", "cubin": cubin, "sm": device.sm})
    return entries


def _object_bytes(attr: ir.Attribute) -> bytes:
    from mlir.dialects import gpu

    return bytes(gpu.ObjectAttr(attr).object)
