"""``sparsecomp.compile``: MLIR source to an :class:`~sparsecomp.runtime.Executable`.

The driver is a table of stages (Triton's ``add_stages``), each its own
``PassManager`` running one named pipeline from ``pipelines/``, so a build
can be inspected stage by stage: every stage's IR is kept next to the
library (``layouts.mlir``, ``loops.mlir``, ``buffers.mlir``, ``llvm.mlir``).

========= ============================ ==========================================
stage     pipeline                     result
========= ============================ ==========================================
layouts   ``sparsecomp-cpu-layouts``   every sparse tensor has a concrete layout
upstream  ``sparsecomp-cpu-upstream``  marked functions through MLIR's sparsifier
loops     ``sparsecomp-cpu-loops``     loops over stored entries (stage II)
buffers   ``sparsecomp-cpu-buffers``   flat buffers at function boundaries (III)
llvm      ``sparsecomp-cpu-backend``   LLVM dialect, OpenMP, C interface
so        :mod:`.aot`                  ``kernel.so`` and ``manifest.json``
========= ============================ ==========================================

Functions stage I marks for the upstream sparsifier are lowered to the LLVM
dialect by the ``upstream`` stage (``sparse-iter-lower-upstream``: a worker
process runs the sparsifier, :mod:`.upstream`) and spliced back; the later
stages leave them alone, so one module becomes one library.

Builds run in a compile server process (:mod:`.server`), so that an
assertion in MLIR or LLVM is a :class:`~sparsecomp.errors.CompileError`,
never an abort of the caller. Results are cached on disk (:mod:`.cache`); a
cache hit loads the library without parsing anything.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sparsecomp.compiler import cache
from sparsecomp.errors import SparsecompError, TargetError
from sparsecomp.runtime import Executable, load
from sparsecomp.targets import CpuTarget, CudaTarget, detect_host
from sparsecomp.targets.cuda import SM_VERSIONS

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
_OPTIONS = {"vector_bits", "unroll", "panel_bytes", "slice_bytes", "gpu_columns"}
EMULATION_PREFIX = "cuda-emu:"
CUDA_PREFIX = "cuda:"


def _names_a_file(text: str) -> bool:
    """Whether a string given to compile() is a path rather than MLIR: one line that is
    a file, ends with ``.mlir``, or has a ``/`` and none of MLIR's punctuation (so that
    a mistyped path is not parsed as a program)."""
    if "\n" in text:
        return False
    line = text.strip()
    if line.endswith(".mlir") or Path(line).is_file():
        return True
    return "/" in line and not any(c in line for c in "{}()=%@<>:")


def _source_text(source: Any) -> tuple[str, str]:
    """``(text, file name for diagnostics)`` of a path, MLIR text or ``ir.Module``."""
    if isinstance(source, str) and not source.strip():
        raise SparsecompError("compile() was given an empty program")
    if isinstance(source, Path) or (isinstance(source, str) and _names_a_file(source)):
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8")
            if not text.strip():
                raise SparsecompError(f"{path} holds no program (it is empty)")
            return text, str(path)
        except OSError as exc:
            raise SparsecompError(f"cannot read {path}: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise SparsecompError(f"cannot read {path}: it is not UTF-8 text ({exc})") from None
    if isinstance(source, str):
        return source, "<source>"
    if hasattr(source, "operation"):  # an mlir.ir.Module
        return source.operation.get_asm(enable_debug_info=True), "<module>"
    raise SparsecompError(
        f"compile() takes a path, MLIR text or an mlir.ir.Module, not {type(source).__name__}"
    )


#: What ``target`` may be (the hint of an unknown one).
TARGETS = (
    "targets are 'host', 'cuda:sm_80' / 'cuda:sm_90' (a GPU), 'cuda-emu:sm_80' / "
    "'cuda-emu:sm_90' (the GPU's schedule run on this CPU), a CpuTarget, or "
    "#sparse_iter.cpu<...> text"
)


def _emulated(target: str | CpuTarget) -> CudaTarget | None:
    """The CUDA target of ``"cuda-emu:sm_80"`` / ``"cuda-emu:sm_90"``, else None."""
    return _gpu(target, EMULATION_PREFIX)


def _gpu(target: str | CpuTarget, prefix: str = CUDA_PREFIX) -> CudaTarget | None:
    """The CUDA target of ``prefix + "sm_80"`` and friends, else None."""
    if not isinstance(target, str) or not target.startswith(prefix):
        return None
    chip = target.removeprefix(prefix)
    if not chip.startswith("sm_") or not chip[3:].isdigit():
        chips = ", ".join(f"sm_{v}" for v in SM_VERSIONS)
        raise TargetError(f"expected {prefix}sm_XY ({chips}), got '{target}'")
    return CudaTarget.for_sm(int(chip[3:]))


def _target(target: str | CpuTarget) -> CpuTarget:
    if isinstance(target, CpuTarget):
        return target
    if target == "host":
        return detect_host()
    from sparsecomp.targets import target_from_attr

    if not target.lstrip().startswith("#"):
        raise TargetError(f"unknown target '{target}'", hint=TARGETS)
    parsed = target_from_attr(target)
    if not isinstance(parsed, CpuTarget):
        raise TargetError(f"compile() builds CPU executables; {target} is not a CPU target")
    return parsed


def compile(
    source: Any,
    target: str | CpuTarget = "host",
    *,
    cache_results: bool = True,
    verbose: bool = False,
    profile: bool = False,
    **options: Any,
) -> Executable:
    """Compile ``source`` (path, MLIR text or ``mlir.ir.Module``) for a CPU.

    ``target`` is ``"host"`` (this machine's ISA and cores), a
    :class:`~sparsecomp.targets.CpuTarget` or ``#sparse_iter.cpu<...>``
    text; it applies where the module does not name its own targets.
    ``"cuda-emu:sm_80"`` / ``"cuda-emu:sm_90"`` compile the CUDA schedule
    (layouts resolved for that GPU, ``sparsecomp-cuda-schedule``) and run
    each launch on this CPU, block by block and thread by thread: slow, and
    exact to the schedule. ``"cuda:sm_80"`` / ``"cuda:sm_90"`` build the
    same kernels for an NVIDIA GPU (PTX, and cubins where ``ptxas`` is
    installed) with host code that launches them through ``cuda-bindings``,
    built for the architecture's baseline so that it loads on any machine
    with the GPU (:mod:`sparsecomp.runtime.cuda`; calls raise
    :class:`~sparsecomp.runtime.cuda.CudaUnavailableError` where no driver is).
    ``options``: ``vector_bits`` (vector width; 0 for scalar code),
    ``unroll`` (vectors in flight), ``panel_bytes`` (column panels of a
    gathered dense operand, 0: none) and ``slice_bytes`` (the cache budget of
    a slice of its rows, 0: no slices), passed to ``sparse-iter-lower-iterations``;
    ``gpu_columns`` (emulation targets; default True): map independent
    output columns (SpMM) onto a warp's lanes and a row's sum (SpMV) onto
    8 lanes; False: a row per thread (the plain schedule).
    ``verbose`` prints each stage's time to stderr.
    """
    unknown = set(options) - _OPTIONS
    if unknown:
        raise SparsecompError(
            f"unknown compile option(s) {sorted(unknown)}; known: {sorted(_OPTIONS)}"
        )
    text, filename = _source_text(source)
    emulate, gpu = _emulated(target), _gpu(target)
    if profile and emulate is None:
        raise SparsecompError("profile=True needs an emulation target (cuda-emu:sm_80)")
    # Emulated launches run here; a GPU executable's host code only sizes grids
    # and launches, and must load on whichever machine holds the GPU: the
    # architecture's baseline, no ISA extensions.
    cpu = detect_host() if emulate or gpu else _target(target)
    if gpu is not None:
        cpu = CpuTarget(cpu.arch)
    device = f" emulating {emulate.attr_text()}" if emulate is not None else ""
    device += f" for {gpu.attr_text()}" if gpu is not None else ""
    device += " profiled" if profile else ""
    key = cache.cache_key(text, cpu.attr_text() + device, options)
    if cache_results and (hit := cache.lookup(key)) is not None:
        return _with_variants(load(hit), text, target, cache_results, options)
    from sparsecomp.compiler import server

    started = time.perf_counter()
    out = cache.new_build_dir()
    try:
        report = _progress if verbose else None
        server.build(text, filename, cpu, options, out, report, emulate, profile, gpu)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)  # a failed build leaves nothing in the cache
        raise
    path = cache.publish(out, key) if cache_results else out
    if verbose:
        _progress("total", time.perf_counter() - started)
    return _with_variants(load(path), text, target, cache_results, options)


def _with_variants(
    exe: Executable, text: str, target: Any, cache_results: bool, options: dict[str, Any]
) -> Executable:
    """``exe`` able to compile its program with sparse arguments in other layouts
    (``Executable.prepare``, and calls with other index widths) and dense sizes
    static (calls with a new ``K``)."""

    def recompile(
        function: str,
        rules: Mapping[int, str],
        sizes: Mapping[int, Mapping[int, int]] | None = None,
        guards: Sequence[int] = (),
        into: Mapping[int, int | None] | None = None,
    ) -> Executable:
        from sparsecomp.compiler.variants import (
            with_destinations,
            with_guards,
            with_layouts,
            with_static_sizes,
        )

        variant = with_destinations(text, function, into) if into else text
        variant = with_layouts(variant, function, rules) if rules else variant
        variant = with_static_sizes(variant, function, sizes) if sizes else variant
        variant = with_guards(variant, function, guards) if guards else variant
        return compile(variant, target, cache_results=cache_results, **options)

    exe.recompile = recompile
    return exe


def _progress(stage: str, seconds: float) -> None:
    print(f"sparsecomp: {stage:8s} {seconds * 1000:8.1f} ms", file=sys.stderr)


def write_manifest(
    out: Path,
    cpu: CpuTarget,
    functions: dict[str, Any],
    needs: list[str],
    targets: dict[str, CpuTarget] | None = None,
    conversions: list[dict[str, Any]] | None = None,
    profile: bool = False,
) -> None:
    """``manifest.json``: ``target`` is what the library's shared code needs (the
    common target of the module's CPU targets); ``targets`` the module's CPU
    targets by name, which functions with a ``target`` of their own need;
    ``conversions`` the layout conversions the program runs (``exe.plan()``)."""
    from sparsecomp import __version__

    manifest = {
        "format": 1,
        "sparsecomp": __version__,
        "mlir": cache.mlir_version(),
        "target": cpu.attr_text(),
        "targets": {name: t.attr_text() for name, t in (targets or {}).items()},
        "library": "kernel.so",
        "needs": needs,
        "functions": functions,
        "conversions": conversions or [],
        "profile": profile,
    }
    (out / cache.MANIFEST).write_text(json.dumps(manifest, indent=1))
