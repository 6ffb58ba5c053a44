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

import functools
import logging
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from sparsecomp import options as options_module
from sparsecomp.compiler import cache, server
from sparsecomp.compiler.server import print_progress as _progress
from sparsecomp.errors import SparsecompError, TargetError
from sparsecomp.runtime import Executable, load
from sparsecomp.targets import CpuTarget, CudaTarget, detect_host
from sparsecomp.targets.cuda import SM_VERSIONS

Progress = Callable[[str, float], None]
_OPTIONS = set(options_module.KINDS)
EMULATION_PREFIX = "cuda-emu:"
CUDA_PREFIX = "cuda:"

LOG = logging.getLogger("sparsecomp")


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


#: The target that builds a module's own CUDA targets as emulations (compiler/parts.py).
EMULATE_DEVICES = "cuda-emu"
#: What ``target`` may be (the hint of an unknown one).
TARGETS = (
    "targets are 'host', 'cuda:sm_XY' (a GPU: sm_75 to sm_90 with CUDA 13's ptxas), "
    "'cuda-emu:sm_XY' (the GPU's schedule run on this CPU: sm_70, sm_75, sm_80, sm_86, "
    "sm_87, sm_89, sm_90), 'cuda-emu' (the CUDA targets a module names, emulated), "
    "a CpuTarget, or #sparse_iter.cpu<...> text"
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
    device = CudaTarget.for_sm(int(chip[3:]))
    if prefix == CUDA_PREFIX:  # built to cubins: what this ptxas assembles
        from sparsecomp.compiler.ptxas import check_chip

        check_chip(device.chip)
    return device


def _target(target: str | CpuTarget) -> CpuTarget:
    if isinstance(target, CpuTarget):
        return target
    if target == "host":
        return detect_host()
    from sparsecomp.targets import target_from_attr

    if not isinstance(target, str):
        raise TargetError(f"a target is text or a CpuTarget, not {target!r}", hint=TARGETS)
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
    ``"cuda-emu:sm_80"`` (any chip the CUDA lowering knows: sm_70, sm_75,
    sm_80, sm_86, sm_87, sm_89, sm_90; tensor cores where the chip has them)
    compiles the CUDA schedule (layouts resolved for that GPU,
    ``sparsecomp-cuda-schedule``) and runs each launch on this CPU, block by
    block and thread by thread: slow, and exact to the schedule.
    ``"cuda:sm_80"`` / ``"cuda:sm_90"`` (a chip the installed ``ptxas``
    assembles; CUDA 13's takes sm_75 and later, checked before the build)
    build the same kernels for an NVIDIA GPU (PTX, and cubins where ``ptxas`` is
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
    ``gpu_balance`` (GPU targets; default ``"rows"``): ``"nonzeros"`` shares a
    row sum's entries evenly between threads (SpMV) or warps (SpMM, lanes over
    the columns) instead of giving each row its lanes, so that power-law rows
    do not wait for the longest (``sparse-iter-gpu-map-loops{balance=nonzeros}``).
    ``gpu_tf32`` (GPU targets; default True): f32 block products run on the
    tensor cores as tf32 (inputs rounded to 10 mantissa bits, sums in f32);
    False keeps them on f32 FMAs (``sparse-iter-gpu-tensorize{tf32=false}``),
    with a remark.
    ``verbose`` prints each stage's time to stderr.

    A module whose ``sparse_iter.targets`` names CUDA targets
    (``#sparse_iter.cuda<...>``) beside CPU ones is built in parts, each
    public function for the device of its ``sparse_iter.target``
    (:mod:`sparsecomp.compiler.parts`; docs/multi-device.md): with
    ``target="host"`` (or a CPU target) its GPU functions are built for their
    GPU as ``"cuda:sm_XX"`` builds them, with ``target="cuda-emu"`` as
    ``"cuda-emu:sm_XX"`` does (run here).
    """
    unknown = set(options) - _OPTIONS
    if unknown:
        raise SparsecompError(
            f"unknown compile option(s) {sorted(unknown)}; known: {sorted(_OPTIONS)}"
        )
    options_module.check(options)
    text, filename = _source_text(source)
    # "cuda-emu" alone: the CUDA targets a module names, emulated (compiler/parts.py)
    emulate_devices = target == EMULATE_DEVICES
    emulate, gpu = _emulated(target), _gpu(target)
    if profile and emulate is None and not emulate_devices:
        raise SparsecompError("profile=True needs an emulation target (cuda-emu:sm_80)")
    # Emulated launches run here; a GPU executable's host code only sizes grids
    # and launches, and must load on whichever machine holds the GPU: the
    # architecture's baseline, no ISA extensions.
    cpu = detect_host() if emulate or gpu or emulate_devices else _target(target)
    if gpu is not None:
        cpu = CpuTarget(cpu.arch)
    device = f" emulating {emulate.attr_text()}" if emulate is not None else ""
    device += f" for {gpu.attr_text()}" if gpu is not None else ""
    device += " emulating its devices" if emulate_devices else ""
    device += " profiled" if profile else ""
    key = cache.cache_key(text, cpu.attr_text() + device, options)
    build = functools.partial(
        _build, text, filename, cpu, options, emulate, profile, gpu, emulate_devices
    )
    exe = _cached(key, verbose) if cache_results else None
    if exe is None and cache_results:
        with cache.building(key):  # one build per key at a time, across processes
            exe = _cached(key, verbose) or _built(key, build, cache_results, verbose)
    elif exe is None:
        exe = _built(key, build, cache_results, verbose)
    _name_source(exe, filename)
    for remark in exe.remarks:  # a product the tensor cores do not take, ...
        LOG.info("%s", remark)  # (the logger's name says sparsecomp)
    return _with_variants(exe, text, target, cache_results, options)


def _name_source(exe: Executable, filename: str) -> None:
    """The locations of ``exe``'s remarks and conversions in ``filename``: a kernel the
    cache holds was built from the same text, maybe in another file (the cache key has
    no file name), and its manifest names that one."""
    for manifest in (exe.manifest, *(part.manifest for part in exe.parts.values())):
        built = manifest.get("source")
        if not built or built == filename:
            continue
        old, new = f"{built}:", f"{filename}:"
        renamed = lambda t: new + t[len(old) :] if t.startswith(old) else t  # noqa: E731
        manifest["remarks"] = [renamed(r) for r in manifest.get("remarks", [])]
        for c in manifest.get("conversions", []):
            c["location"] = renamed(c["location"])
        manifest["source"] = filename


#: How often a kernel that another process removes from the cache while this one
#: loads it is looked up or built again before that is an error.
RETRIES = 3


def _cached(key: str, verbose: bool) -> Executable | None:
    """The cached kernel of ``key`` loaded, or None where there is none (any more).

    Another process may remove a kernel directory while this one loads it (a
    cache cleaned by hand, an eviction), or have left one damaged (a disk that
    filled up): such a directory is removed, to be built again; an error
    loading an intact one (a library for another CPU) is raised.
    """
    for _ in range(RETRIES):
        hit = cache.lookup(key)
        if hit is None:
            return None
        try:
            exe = load(hit)
        except SparsecompError:
            if cache.intact(hit):
                raise
            shutil.rmtree(hit, ignore_errors=True)
            continue
        if verbose:
            _report_cached(exe)
        return exe
    return None


def _built(
    key: str, build: Callable[[Path, Progress | None], None], cache_results: bool, verbose: bool
) -> Executable:
    """Build the kernel of ``key``, publish it in the cache and load it (built again
    if another process removed it from the cache before it was loaded)."""
    for attempt in range(RETRIES):
        started = time.perf_counter()
        out = cache.new_build_dir()
        try:
            build(out, _progress if verbose else None)
            cache.record_build_time(out, time.perf_counter() - started)
        except BaseException:
            shutil.rmtree(out, ignore_errors=True)  # a failed build leaves nothing in the cache
            raise
        path = cache.publish(out, key) if cache_results else out
        if verbose:
            _progress("total", time.perf_counter() - started)
        try:
            return load(path)
        except SparsecompError:
            if attempt == RETRIES - 1 or cache.intact(path):
                raise
    raise AssertionError("unreachable")


def _report_cached(exe: Executable) -> None:
    """``-v`` on a cache hit: say so, with the time the build took when it was recorded."""
    took = exe.manifest.get("build_seconds")
    when = f" (built in {took * 1000:.1f} ms)" if isinstance(took, int | float) else ""
    print(f"sparsecomp: cached   {exe.directory}{when}", file=sys.stderr)


def _build(
    text: str,
    filename: str,
    cpu: CpuTarget,
    options: dict[str, Any],
    emulate: CudaTarget | None,
    profile: bool,
    gpu: CudaTarget | None,
    emulate_devices: bool,
    out: Path,
    report: Progress | None,
) -> None:
    server.build(text, filename, cpu, options, out, report, emulate, profile, gpu, emulate_devices)


def _with_variants(
    exe: Executable,
    text: str,
    target: Any,
    cache_results: bool,
    options: dict[str, Any],
    family: str | None = None,
) -> Executable:
    """``exe`` able to compile its program with sparse arguments in other layouts
    (``Executable.prepare``, and calls with other index widths), dense sizes
    static (calls with a new ``K``), and other compile options (``schedule``: the
    GPU schedule ``exe.prepare`` chooses per matrix). ``family``: the program the
    variants derive from (its executable's directory), which each function
    carries (``Function.family``: an operand prepared in one family is refused
    by another, whose kernel it would not run)."""
    family = family or str(exe.directory)
    for function in exe.functions.values():
        function.family = family

    # the program's own file in its variants' locations (a run-time error of a variant
    # named "<variant>")
    src = str(exe.manifest.get("source") or "<variant>")

    def recompile(
        function: str,
        rules: Mapping[int, str],
        sizes: Mapping[int, Mapping[int, int]] | None = None,
        guards: Sequence[int] = (),
        into: Mapping[int, int | None] | None = None,
        schedule: Mapping[str, Any] | None = None,
    ) -> Executable:
        chosen = {**options, **(schedule or {})}
        request = (text, str(target), sorted(options.items()), function, sorted(rules.items()),
                   sorted((i, sorted(d.items())) for i, d in (sizes or {}).items()),
                   sorted(guards), sorted((into or {}).items()),
                   sorted((schedule or {}).items()))  # fmt: skip
        digest = cache.variant_digest(request) if cache_results else ""
        memo = cache.read_variant(digest) if cache_results else None
        if memo is not None:  # derived before: its kernel, without parsing the program
            found = _cached(memo[0], False)
            if found is not None:
                return _with_variants(found, memo[1], target, cache_results, chosen, family)
        from sparsecomp.compiler.variants import (
            with_destinations,
            with_guards,
            with_layouts,
            with_static_sizes,
        )

        variant = with_destinations(text, function, into, src) if into else text
        variant = with_layouts(variant, function, rules, src) if rules else variant
        variant = with_static_sizes(variant, function, sizes, src) if sizes else variant
        variant = with_guards(variant, function, guards, src) if guards else variant
        exe = compile(variant, target, cache_results=cache_results, **chosen)
        if cache_results and exe.directory.parent == cache.kernel_dir("x").parent:
            cache.record_variant(digest, exe.directory.name, variant)
        for derived in exe.functions.values():
            derived.family = family
        return exe

    exe.recompile = recompile
    exe.compile_options = dict(options)
    return exe
