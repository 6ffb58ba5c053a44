"""One uncached build: parse, run the stages, emit ``kernel.so`` and ``manifest.json``."""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mlir import ir

from sparsecomp import knobs
from sparsecomp.compiler import aot, upstream, upstream_worker
from sparsecomp.compiler.driver import STAGES, write_manifest
from sparsecomp.errors import PipelineError, SparsecompError
from sparsecomp.ir.context import make_context
from sparsecomp.ir.parsing import DiagnosticLog, convert, parse_module
from sparsecomp.ir.verify import TARGETS_ATTR, verify
from sparsecomp.targets import CpuTarget
from sparsecomp.tools.diagnostics import format_diagnostic
from sparsecomp.transforms.pipeline import build_pass_manager

Progress = Callable[[str, float], None] | None


class CompileError(PipelineError):
    """A program failed to compile; the message lists the located diagnostics."""


def stage_pipeline(pipeline: str, stage: str, options: dict[str, Any]) -> str:
    """The pipeline of one stage; compile options replace the loops stage's defaults."""
    if stage != "loops" or not options:
        return pipeline
    opts = " ".join(f"{k.replace('_', '-')}={v}" for k, v in sorted(options.items()))
    return f"sparse-iter-lower-iterations{{{opts}}},canonicalize,cse"


def _fail(log: DiagnosticLog, what: str, reproducer: str | None = None) -> CompileError:
    lines = [format_diagnostic(d) for d in log.diagnostics]
    message = "\n".join([what, *lines]) if lines else what
    return CompileError(message, hint=reproducer)


def _reproducer(text: str, pipeline: str) -> str:
    folder = knobs.reproducer_dir()
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(
        "w", suffix=".mlir", prefix="sparsecomp-repro-", dir=folder, delete=False
    ) as f:
        f.write(text)
    return f"reproduce with: sparsecomp-opt --pass-pipeline='builtin.module({pipeline})' {f.name}"


def _set_target(module: ir.Module, cpu: CpuTarget) -> None:
    op = module.operation
    if TARGETS_ATTR not in op.attributes:
        op.attributes[TARGETS_ATTR] = ir.Attribute.parse(f"{{host = {cpu.attr_text()}}}")


def _functions(module: ir.Module) -> dict[str, Any]:
    out = {}
    for op in module.body.operations:
        op = op.operation
        if op.name == "func.func" and "sparse_iter.abi" in op.attributes:
            name = ir.StringAttr(op.attributes["sym_name"]).value
            abi = json.loads(ir.StringAttr(op.attributes["sparse_iter.abi"]).value)
            out[name] = {"symbol": f"_mlir_ciface_{name}", "abi": abi}
    return out


def build(
    text: str, filename: str, cpu: CpuTarget, options: dict[str, Any], out: Path, progress: Progress
) -> None:
    """Compile ``text`` into ``out``; raises :class:`CompileError` with diagnostics."""
    ctx = make_context()
    log = DiagnosticLog(filename)
    with log.capture(ctx), ctx:
        try:
            module = parse_module(text, filename, ctx)
        except ir.MLIRError as exc:
            log.diagnostics += [d for e in exc.error_diagnostics for d in convert(e, filename)]
            raise _fail(log, f"{filename}: could not parse the program") from None
        if not verify(module.operation):
            raise _fail(log, f"{filename}: the program is not valid")
        _set_target(module, cpu)
        functions: dict[str, Any] = {}
        fallback: upstream.Part | None = None
        # Each stage's input, with locations: the reproducer if the stage fails.
        before = module.operation.get_asm(enable_debug_info=True)
        for stage, named in STAGES:
            started = time.perf_counter()
            pipeline = stage_pipeline(named, stage, options)
            try:
                build_pass_manager(f"builtin.module({pipeline})", ctx).run(module.operation)
            except ir.MLIRError as exc:
                log.diagnostics += [d for e in exc.error_diagnostics for d in convert(e, filename)]
                raise _fail(
                    log, f"{filename}: stage '{stage}' failed", _reproducer(before, pipeline)
                ) from None
            before = module.operation.get_asm(enable_debug_info=True)
            (out / f"{stage}.mlir").write_text(before)
            if stage == "layouts":
                fallback = _split_upstream(module, filename, out)
                before = module.operation.get_asm(enable_debug_info=True)
            if stage == "buffers":
                functions = _functions(module)
            if progress:
                progress(stage, time.perf_counter() - started)
        needs = aot.runtime_needs(module)
        extra_ir = []
        if fallback is not None:
            started = time.perf_counter()
            needs = sorted({*needs, *_lower_upstream(fallback, filename, cpu, options, out)})
            functions.update(fallback.functions)
            extra_ir.append(out / upstream.LLVM_IR)
            if progress:
                progress("upstream", time.perf_counter() - started)
        started = time.perf_counter()
        aot.build_shared_library(module, out, cpu, needs, extra_ir)
    write_manifest(out, cpu, functions, needs)
    if progress:
        progress("so", time.perf_counter() - started)


def _split_upstream(module: ir.Module, filename: str, out: Path) -> upstream.Part | None:
    """Take the functions marked for the upstream sparsifier out of ``module``."""
    try:
        part = upstream.split(module)
    except SparsecompError as exc:
        raise CompileError(exc.message, location=exc.location or filename) from None
    if part is not None:
        (out / upstream.INPUT).write_text(part.module.operation.get_asm(enable_debug_info=True))
    return part


def _lower_upstream(
    part: upstream.Part, filename: str, cpu: CpuTarget, options: dict[str, Any], out: Path
) -> list[str]:
    """Lower ``out/upstream.mlir`` in the worker; its runtime needs, or CompileError."""
    pipeline = upstream.pipeline(cpu, options.get("vector_bits", -1))
    done = upstream_worker.run(out, filename, pipeline)
    if done.ok:
        return done.needs
    what = "the upstream sparsifier failed"
    if done.crash:
        what = f"the upstream sparsifier crashed ({done.crash})"
    source = (out / upstream.INPUT).read_text()
    raise CompileError(part.failure(what, done.diagnostics), hint=_reproducer(source, pipeline))
