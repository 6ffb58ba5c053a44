"""The stages of a build and the manifest it writes (shared by :mod:`.driver`, which
runs builds, and :mod:`.build`, which is one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sparsecomp.compiler import cache
from sparsecomp.targets import CpuTarget

STAGES = (
    ("layouts", "sparsecomp-cpu-layouts"),
    ("upstream", "sparsecomp-cpu-upstream"),
    ("loops", "sparsecomp-cpu-loops"),
    ("buffers", "sparsecomp-cpu-buffers"),
    ("llvm", "sparsecomp-cpu-backend"),
)
#: The stages of the emulation targets (``cuda-emu:sm_80``): tensor-core
#: kernels for the products that fit, the CUDA schedule, then each launch as
#: host loops and the CPU code generation.
EMULATION_STAGES = (
    *STAGES[:2],
    ("tensorize", "sparsecomp-cuda-tensorize"),
    *STAGES[2:4],
    ("gpu", "sparsecomp-cuda-schedule"),
    ("llvm", "sparsecomp-cuda-emulate"),
)


def write_manifest(
    out: Path,
    cpu: CpuTarget,
    functions: dict[str, Any],
    needs: list[str],
    targets: dict[str, CpuTarget] | None = None,
    conversions: list[dict[str, Any]] | None = None,
    profile: bool = False,
    remarks: list[str] | None = None,
    source: str | None = None,
) -> None:
    """``manifest.json``: ``target`` is what the library's shared code needs (the
    common target of the module's CPU targets); ``targets`` the module's CPU
    targets by name, which functions with a ``target`` of their own need;
    ``conversions`` the layout conversions the program runs (``exe.plan()``);
    ``remarks`` what the compile remarked (``file:line:col: remark: ...``: a
    product that the GPU's tensor cores do not take, and why), which
    ``sparsecomp.compile`` logs; ``source`` the file name those locations and the
    conversions' give the program (a later compile of the same text from another
    file finds this kernel in the cache and names its own file)."""
    from sparsecomp._version import __version__
    from sparsecomp.runtime.loader import digest, manifest_text

    manifest = {
        "format": 1,
        "sparsecomp": __version__,
        "mlir": cache.mlir_version(),
        "target": cpu.attr_text(),
        "targets": {name: t.attr_text() for name, t in (targets or {}).items()},
        "library": "kernel.so",
        "library_sha256": digest((out / "kernel.so").read_bytes()),
        "needs": needs,
        "functions": functions,
        "conversions": conversions or [],
        "remarks": remarks or [],
        "source": source,
        "profile": profile,
    }
    (out / cache.MANIFEST).write_text(manifest_text(manifest))
