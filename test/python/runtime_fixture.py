"""Build a kernel library from MLIR on tensors with the upstream tools (runtime tests only).

A stand-in for the real back end: bufferize with function boundaries and
identity layouts, lower to LLVM with C interface wrappers on every function
(``llvm.emit_c_interface``), give each wrapper its packed form
(``sparse-iter-pack-entry-points``, for the runtime's C call path), then
mlir-translate, llc and cc.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from sparsecomp.ir.odsgen import tool

LOWERING = [
    "--one-shot-bufferize=bufferize-function-boundaries "
    "function-boundary-type-conversion=identity-layout-map",
    "--convert-linalg-to-loops",
    "--expand-strided-metadata",
    "--lower-affine",
    "--convert-scf-to-cf",
    "--llvm-request-c-wrappers",
    "--convert-to-llvm",
    "--reconcile-unrealized-casts",
]


def build_so(mlir_text: str, out_dir: Path) -> Path:
    """Compile ``mlir_text`` to ``out_dir/kernel.so`` (stages kept beside it); its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    src, llvm, ll, obj, so = (
        out_dir / n for n in ("input.mlir", "llvm.mlir", "kernel.ll", "kernel.o", "kernel.so")
    )
    src.write_text(mlir_text)
    steps: list[list[str | Path]] = [
        [tool("mlir-opt"), src, *LOWERING, "-o", llvm],
        [tool("mlir-translate"), "--mlir-to-llvmir", llvm, "-o", ll],
        [tool("llc"), "-O2", "-filetype=obj", "-relocation-model=pic", ll, "-o", obj],
        ["cc", "-shared", obj, "-o", so],
    ]
    for cmd in steps:
        proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"{Path(cmd[0]).name} failed:\n{proc.stderr}")
        if cmd[0] == tool("mlir-opt"):
            pack(llvm)
    return so


def pack(llvm: Path) -> None:
    """Mark every ``_mlir_ciface_`` wrapper in ``llvm`` as an entry point with an ABI
    (the manifest holds the real one) and add its packed form."""
    from mlir import ir

    from sparsecomp.ir.context import make_context
    from sparsecomp.transforms.pipeline import build_pass_manager

    with make_context() as ctx:
        module = ir.Module.parse(llvm.read_text())
        for op in module.body.operations:
            name = ir.StringAttr(op.operation.attributes["sym_name"]).value
            if name.startswith("_mlir_ciface_"):
                op.operation.attributes["sparse_iter.abi"] = ir.StringAttr.get("{}")
        build_pass_manager("builtin.module(sparse-iter-pack-entry-points)", ctx).run(
            module.operation
        )
        llvm.write_text(str(module))
