"""One uncached build: parse, run the stages, emit ``kernel.so`` and ``manifest.json``."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mlir import ir

from sparsecomp import knobs
from sparsecomp.compiler import aot
from sparsecomp.compiler.cuda import device_pipeline, write_kernels
from sparsecomp.compiler.parts import has_devices, split
from sparsecomp.compiler.stages import EMULATION_STAGES, STAGES, write_manifest
from sparsecomp.errors import CompileError, ParseError, TargetError
from sparsecomp.ir.context import make_context
from sparsecomp.ir.conversions import find_conversions
from sparsecomp.ir.parsing import DiagnosticLog, convert, location_text, parse_module
from sparsecomp.ir.targets import module_targets
from sparsecomp.ir.verify import TARGET_ATTR, TARGETS_ATTR, verify
from sparsecomp.ir.walk import preorder
from sparsecomp.runtime.loader import manifest_text
from sparsecomp.runtime.plan import HOST_ONLY
from sparsecomp.targets import CpuTarget, CudaTarget
from sparsecomp.tools.diagnostics import format_diagnostic
from sparsecomp.transforms.import_sparse_tensor import UPSTREAM_ATTR
from sparsecomp.transforms.pipeline import build_pass_manager

Progress = Callable[[str, float], None] | None
#: MLIR's GPU runtime ABI over the CUDA driver, linked into CUDA builds.
CUDA_SHIM = Path(__file__).parent.parent / "runtime" / "cuda_shim.c"
#: The profiler's recorder, linked into ``profile=True`` builds (runtime/profile.py).
PROFILE_RECORDER = Path(__file__).parent.parent / "runtime" / "profile_recorder.c"
#: sparsecomp-cuda-schedule with the lane mappings chosen (compile option gpu_columns:
#: False is the plain schedule, a row per thread; gpu_balance: "nonzeros" splits row
#: sums by entries).
GPU_SCHEDULE = (
    "sparsecomp-bufferize, func.func(convert-linalg-to-parallel-loops), "
    "sparse-iter-parallelize, sparse-iter-lower-atomics, "
    "sparse-iter-gpu-map-loops{{columns={columns} reduction-lanes={lanes} balance={balance}}}, "
    "sparse-iter-horizontal-fusion, func.func(convert-parallel-loops-to-gpu), canonicalize, "
    "sparse-iter-gpu-stage-structure, canonicalize, cse"
)
#: The last stage of a profiled emulation: accesses reported, then CPU code.
PROFILED_EMULATION = "sparse-iter-emulate-gpu{profile=true}, sparsecomp-cpu-codegen"


def stage_pipeline(pipeline: str, stage: str, options: dict[str, Any]) -> str:
    """The pipeline of one stage; compile options replace the stage's defaults."""
    options = dict(options)
    columns = options.pop("gpu_columns", None)
    balance = options.pop("gpu_balance", None)
    tf32 = options.pop("gpu_tf32", None)
    if stage == "tensorize" and tf32 is not None:
        return f"sparse-iter-gpu-tensorize{{tf32={str(bool(tf32)).lower()}}}"
    if stage == "gpu" and (columns is not None or balance is not None):
        columns = True if columns is None else bool(columns)
        return GPU_SCHEDULE.format(
            columns=str(columns).lower(), lanes=8 if columns else 0, balance=balance or "rows"
        )
    if stage == "upstream" and "vector_bits" in options:
        return f"sparse-iter-lower-upstream{{vector-bits={options['vector_bits']}}}"
    if stage != "loops" or not options:
        return pipeline
    opts = " ".join(f"{k.replace('_', '-')}={v}" for k, v in sorted(options.items()))
    return f"sparse-iter-lower-iterations{{{opts}}},canonicalize,cse"


def _add_device(out: Path, device: CudaTarget, kernels: list[dict[str, Any]]) -> None:
    """The manifest's ``device`` (``cuda:sm_80``) and ``kernels`` of a CUDA build."""
    path = out / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest.update(device=f"cuda:{device.chip}", kernels=kernels)
    path.write_text(manifest_text(manifest))


def _add_balance(out: Path, balance: str) -> None:
    """The manifest's ``gpu_balance``: the schedule a GPU build's row loops took (what
    ``exe.prepare`` reports for a loaded executable, which compiles no other)."""
    path = out / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest.update(gpu_balance=balance)
    path.write_text(manifest_text(manifest))


def _add_emulated(out: Path, device: CudaTarget) -> None:
    """The manifest's ``emulates`` (``cuda:sm_80``): the GPU whose schedule a
    ``cuda-emu`` build runs, whose cost model ``exe.prepare`` then uses."""
    path = out / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["emulates"] = f"cuda:{device.chip}"
    path.write_text(manifest_text(manifest))


def _fail(
    log: DiagnosticLog,
    what: str,
    reproducer: str | None = None,
    kind: type[CompileError] = CompileError,
) -> CompileError:
    lines = [format_diagnostic(d) for d in log.diagnostics]
    message = "\n".join([what, *lines]) if lines else what
    return kind(message, hint=reproducer)


def _reproducer(text: str, pipeline: str) -> str:
    """Save the failing stage's input (:func:`.cache.save_reproducer`); the command to rerun."""
    from sparsecomp.compiler.cache import save_reproducer

    try:
        path = save_reproducer(text, pipeline, knobs.reproducer_dir())
    except OSError as exc:  # the error the user needs is the build's, not this one
        where = knobs.reproducer_dir() or "the compile cache"
        return f"(no reproducer: cannot write into {where}: {exc.strerror or exc})"
    return f"reproduce with: sparsecomp-opt --pass-pipeline='builtin.module({pipeline})' {path}"


def _set_target(module: ir.Module, cpu: CpuTarget) -> None:
    op = module.operation
    if TARGETS_ATTR not in op.attributes:
        op.attributes[TARGETS_ATTR] = ir.Attribute.parse(f"{{host = {cpu.attr_text()}}}")


def _set_gpu_target(module: ir.Module, device: CudaTarget, filename: str, kind: str) -> None:
    """The GPU as the module's one target (modules naming their own are refused)."""
    op = module.operation
    if TARGETS_ATTR in op.attributes:
        raise CompileError(
            f"{filename}: {kind}:{device.chip} compiles modules without sparse_iter.targets "
            "(it adds the GPU as the only target)",
            hint="drop sparse_iter.targets, or compile for the targets the module names",
        )
    op.attributes[TARGETS_ATTR] = ir.Attribute.parse(f"{{gpu = {device.attr_text()}}}")


def _refuse_upstream(module: ir.Module, filename: str) -> None:
    """Functions marked for MLIR's sparsifier have no GPU schedule: name them."""
    marked = []
    for op in module.body.operations:
        op = op.operation
        if op.name == "func.func" and UPSTREAM_ATTR in op.attributes:
            name = ir.StringAttr(op.attributes["sym_name"]).value
            why = ir.StringAttr(op.attributes[UPSTREAM_ATTR]).value
            marked.append(f"'{name}' ({location_text(op.location, filename)}: {why})")
    if marked:
        raise CompileError(
            f"{filename}: these functions need MLIR's sparsifier, which has no GPU schedule: "
            + "; ".join(marked)
        )


def _cpu_targets(module: ir.Module) -> dict[str, CpuTarget]:
    """The module's CPU targets by name."""
    named = module_targets(module.operation)
    return {n: t for n, t in named.items() if isinstance(t, CpuTarget)}


def _build_parts(
    module: ir.Module,
    filename: str,
    cpu: CpuTarget,
    options: dict[str, Any],
    out: Path,
    progress: Progress,
    emulate: bool,
    profile: bool,
) -> None:
    """A module naming CUDA targets, built in parts (:mod:`.parts`): the first at
    ``out``, each other in ``out/part-N``, listed in the first's manifest."""
    found, chains = split(module, filename)
    listed: list[dict[str, Any]] = []
    for index, part in enumerate(found):
        where = out if index == 0 else out / f"part-{index}"
        where.mkdir(exist_ok=True)
        text = part.module.operation.get_asm(enable_debug_info=True)
        report = progress
        if progress is not None and part.device is not None:
            report = functools.partial(_part_progress, progress, part.target)
        if part.device is None:
            build(text, filename, cpu, options, where, report)
        elif emulate:
            build(text, filename, cpu, options, where, report, part.device, profile)
        else:
            from sparsecomp.compiler.ptxas import check_chip

            check_chip(part.device.chip)
            build(text, filename, CpuTarget(cpu.arch), options, where, report, device=part.device)
        if index:
            listed.append(
                {"directory": where.name, "target": part.target, "functions": part.functions}
            )
    path = out / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["parts"] = listed
    manifest["chains"] = {chain.name: chain.to_json() for chain in chains}
    path.write_text(manifest_text(manifest))


def _part_progress(progress: Callable[[str, float], None], part: str, stage: str, t: float) -> None:
    progress(f"{part}/{stage}", t)


def _host_only(module: ir.Module, filename: str) -> list[str]:
    """Remarks for the public functions of a GPU build whose loops no launch runs (none
    was parallel over independent output rows): all their work stays in host code."""
    functions = {
        ir.StringAttr(op.attributes["sym_name"]).value: op
        for op in (o.operation for o in module.body.operations)
        if op.name == "func.func"
    }
    ops = {name: preorder(op) for name, op in functions.items()}

    def reached(name: str, seen: set[str]) -> list[ir.Operation]:
        """The ops of ``name`` and of every function it calls."""
        if name in seen or name not in ops:
            return []
        seen.add(name)
        found = list(ops[name])
        for op in ops[name]:
            if op.name == "func.call":
                found += reached(ir.FlatSymbolRefAttr(op.attributes["callee"]).value, seen)
        return found

    remarks = []
    for name, op in functions.items():
        if "sparse_iter.abi" not in op.attributes:
            continue
        every = reached(name, set())
        loops = [o for o in every if o.name in ("scf.for", "scf.while")]
        if not loops:
            continue
        if not any(o.name == "gpu.launch" for o in every):
            where = location_text(loops[0].location, filename)
            remarks.append(
                f"{where}: remark: in '{name}': {HOST_ONLY}: none is parallel over "
                "independent output rows (a transposed product over CSR, which scatters "
                "into its rows, is one such; a loop written by hand, an scf.for or a "
                "@loops for, is one only when it carries the unit attribute "
                "sparse_iter.parallel: attrs={'sparse_iter.parallel': 'unit'}), so all of "
                "its work stays in the host code"
            )
            continue
        for loop in _host_arithmetic_loops(op):  # others launch: this one stays
            where = location_text(loop.location, filename)
            remarks.append(
                f"{where}: remark: in '{name}': this loop's arithmetic stays in the host "
                "code: it is not parallel over independent output rows (a sum over a CSR "
                "matrix's rows into its columns, which scatters, is one such)"
            )
    return remarks


#: Floating-point arithmetic: a host loop holding it computes what a kernel could have.
_FLOAT_ARITHMETIC = ("arith.addf", "arith.subf", "arith.mulf", "arith.divf",
                     "arith.maximumf", "arith.minimumf", "math.fma")  # fmt: skip


def _host_arithmetic_loops(func: ir.Operation) -> list[ir.Operation]:
    """The outermost loops of ``func``'s host code (outside every ``gpu.launch``, and
    launching none) that do floating-point arithmetic (sizes, positions and prefix
    sums are integer work the host does by design)."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> None:
        for region in op.regions:
            for block in region.blocks:
                for child in block.operations:
                    child = child.operation
                    if child.name == "gpu.launch":
                        continue
                    if child.name in ("scf.for", "scf.while"):
                        inner = preorder(child)
                        names = {o.name for o in inner}
                        if "gpu.launch" not in names and names & set(_FLOAT_ARITHMETIC):
                            found.append(child)
                            continue
                    visit(child)

    visit(func)
    return found


def _functions(module: ir.Module) -> dict[str, Any]:
    out = {}
    for op in module.body.operations:
        op = op.operation
        if op.name in ("func.func", "llvm.func") and "sparse_iter.abi" in op.attributes:
            name = ir.StringAttr(op.attributes["sym_name"]).value
            abi = json.loads(ir.StringAttr(op.attributes["sparse_iter.abi"]).value)
            out[name] = {"symbol": f"_mlir_ciface_{name}", "abi": abi}
            if TARGET_ATTR in op.attributes:
                out[name]["target"] = ir.StringAttr(op.attributes[TARGET_ATTR]).value
    return out


def _refresh_guarded(functions: dict[str, Any], module: ir.Module) -> None:
    """The ABI of each function that ``sparse-iter-guard-coordinates`` changed, as it now is."""
    for op in module.body.operations:
        op = op.operation
        if op.name in ("func.func", "llvm.func") and "sparse_iter.abi" in op.attributes:
            name = ir.StringAttr(op.attributes["sym_name"]).value
            abi = json.loads(ir.StringAttr(op.attributes["sparse_iter.abi"]).value)
            guarded = any("guarded" in arg for arg in abi.get("args", []))
            if guarded and name in functions:
                functions[name]["abi"] = abi


def build(
    text: str,
    filename: str,
    cpu: CpuTarget,
    options: dict[str, Any],
    out: Path,
    progress: Progress,
    emulate: CudaTarget | None = None,
    profile: bool = False,
    device: CudaTarget | None = None,
    emulate_devices: bool = False,
) -> None:
    """Compile ``text`` into ``out``; raises :class:`CompileError` with diagnostics.

    ``emulate``: build the CUDA schedule for that GPU and run it on ``cpu``;
    ``profile``: with every global access of its kernels reported;
    ``device``: build it for that GPU (host code for ``cpu``, kernels as PTX
    and, where ``ptxas`` is installed, cubins). A module that names CUDA
    targets in its ``sparse_iter.targets`` is built in parts, one per device
    (:mod:`.parts`); ``emulate_devices``: its CUDA parts as emulation builds.
    """
    gpu = emulate or device
    ctx = make_context()
    log = DiagnosticLog(filename)
    with log.capture(ctx), ctx:
        try:
            module = parse_module(text, filename, ctx)
        except ir.MLIRError as exc:
            log.diagnostics += [d for e in exc.error_diagnostics for d in convert(e, filename)]
            raise _fail(log, f"{filename}: could not parse the program", kind=ParseError) from None
        if not verify(module.operation):
            raise _fail(log, f"{filename}: the program is not valid", kind=ParseError)
        if gpu is not None:
            _set_gpu_target(module, gpu, filename, "cuda-emu" if emulate else "cuda")
        elif has_devices(module):
            _build_parts(module, filename, cpu, options, out, progress, emulate_devices, profile)
            return
        else:
            if emulate_devices:
                raise CompileError(
                    f"{filename}: target 'cuda-emu' emulates the CUDA targets a module names "
                    "in its sparse_iter.targets, and this module names none",
                    hint="compile it for one GPU's schedule with target='cuda-emu:sm_80'",
                )
            _set_target(module, cpu)
        targets = _cpu_targets(module)
        # What llc gets as -mattr: every function's own target extends it.
        try:
            common = CpuTarget.common(list(targets.values())) if targets else cpu
        except TargetError as exc:
            where = location_text(module.operation.location, filename)
            raise TargetError(f"{where}: {exc.message}", hint=exc.hint) from None
        functions: dict[str, Any] = {}
        conversions: list[dict[str, Any]] = []
        # Each stage's input, with locations: the reproducer if the stage fails.
        before = module.operation.get_asm(enable_debug_info=True)
        stages = STAGES if gpu is None else EMULATION_STAGES
        if device is not None:
            stages = (*EMULATION_STAGES[:-1], ("device", device_pipeline(device)))
        kernels: list[dict[str, Any]] = []
        host_only: list[str] = []
        for stage, named in stages:
            started = time.perf_counter()
            pipeline = stage_pipeline(named, stage, options)
            if profile and stage == "llvm":
                pipeline = PROFILED_EMULATION
            try:
                build_pass_manager(f"builtin.module({pipeline})", ctx).run(module.operation)
            except ir.MLIRError as exc:
                log.diagnostics += [d for e in exc.error_diagnostics for d in convert(e, filename)]
                raise _fail(
                    log, f"{filename}: stage '{stage}' failed", _reproducer(before, pipeline)
                ) from None
            before = module.operation.get_asm(enable_debug_info=True)
            (out / f"{stage}.mlir").write_text(before)
            if stage == "layouts" and gpu is not None:
                _refuse_upstream(module, filename)
            if stage == "gpu":
                host_only = _host_only(module, filename)
            if stage == "device":
                kernels = write_kernels(module, out, device)  # type: ignore[arg-type]
            if stage == "layouts":
                conversions = [c.to_json() for _, c in find_conversions(module.operation, filename)]
            if stage == "buffers":
                functions = _functions(module)
            if stage == "llvm":  # guarded coordinates change it late
                _refresh_guarded(functions, module)
            if progress:
                progress(stage, time.perf_counter() - started)
        needs = aot.runtime_needs(module)
        started = time.perf_counter()
        sources = [CUDA_SHIM] if device is not None else []
        sources += [PROFILE_RECORDER] if profile else []
        aot.build_shared_library(module, out, common, needs, sources)
    remarks = [format_diagnostic(d) for d in log.diagnostics if d.severity == "remark"]
    remarks += host_only
    write_manifest(out, common, functions, needs, targets, conversions, profile, remarks, filename)
    if device is not None:
        _add_device(out, device, kernels)
    if emulate is not None:
        _add_emulated(out, emulate)
    if (device is not None or emulate is not None) and "gpu_balance" in options:
        _add_balance(out, options["gpu_balance"])
    if progress:
        progress("so", time.perf_counter() - started)
