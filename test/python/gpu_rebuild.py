"""Rebuild an emulated executable from an edited GPU schedule (mutation tests)."""

from __future__ import annotations

from pathlib import Path

from mlir import ir

import sparsecomp
from sparsecomp.compiler import aot
from sparsecomp.ir.context import make_context
from sparsecomp.runtime.loader import digest, manifest_text
from sparsecomp.targets import detect_host
from sparsecomp.transforms.pipeline import build_pass_manager


def rebuild(gpu_ir: str, like: sparsecomp.Executable, out: Path) -> sparsecomp.Executable:
    """``gpu_ir`` (a schedule, as gpu.mlir holds it) emulated and built with ``like``'s ABI."""
    ctx = make_context()
    with ctx:
        module = ir.Module.parse(gpu_ir)
        build_pass_manager("builtin.module(sparsecomp-cuda-emulate)", ctx).run(module.operation)
        needs = aot.runtime_needs(module)
        aot.build_shared_library(module, out, detect_host(), needs)
    library = (out / aot.LIBRARY).read_bytes()
    manifest = dict(like.manifest, needs=needs, library_sha256=digest(library))
    (out / "manifest.json").write_text(manifest_text(manifest))  # with its own digest
    return sparsecomp.load(out)
