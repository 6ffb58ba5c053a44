"""Ahead-of-time build: an LLVM-dialect module to a loadable ``kernel.so``.

The ``so`` stage of the CPU back end (docs/cpu-abi.md). Steps, each an
LLVM tool from the pinned wheels so that builds do not depend on the system's
LLVM:

1. LLVM dialect -> LLVM IR (``kernel.ll``): in process with
   ``translate_module_to_llvmir`` for an ``ir.Module`` (after checking that
   only translatable dialects are left, as ``sparse-iter-check-translatable``
   does at the end of the pipeline: the binding crashes on failure),
   with ``mlir-translate --mlir-to-llvmir`` for text;
2. ``opt -O3``: the IR-level optimizations (LICM, instcombine, unrolling)
   that ``llc`` alone does not run; MLIR's lowering relies on them; on an
   AVX-512 target the loop vectorizer also folds a loop's remainder into
   masked iterations (:func:`optimizer_flags`);
3. ``llc -O3 -filetype=obj -relocation-model=pic`` for the target's triple,
   CPU and features. In the compile daemon's children steps 2 and 3 are one
   call into the same LLVM's library, in process (:mod:`.llvmlib`);
4. ``cc -shared`` (with binutils' gold where it is installed), linking the
   runtime libraries the kernel needs (libomp) with ``rpath`` ``$ORIGIN``
   first, so a saved directory holding a copy of them is self-contained, then
   their installed directories, and, where the kernel allocates on the heap,
   ``kernel_alloc.c``'s ``malloc`` and ``free`` in place of libc's for the
   kernel's own calls (``--wrap``; compiled once per cache directory:
   :func:`allocator_object`).

Every failure raises :class:`ToolchainError` with the exact command and the
tool's stderr.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from mlir import ir

from sparsecomp import knobs
from sparsecomp.compiler import llvmlib
from sparsecomp.errors import TargetError, ToolchainError
from sparsecomp.ir.odsgen import tool
from sparsecomp.ir.parsing import location_text
from sparsecomp.runtime.libs import library_path
from sparsecomp.targets.cpu import LLVM_CPUS, TRIPLES, CpuTarget
from sparsecomp.transforms.check_translatable import untranslatable

LIBRARY = "kernel.so"
LLVM_IR = "kernel.ll"
#: The kernel's heap allocations (``malloc``/``free``, which ``finalize-memref-to-llvm``
#: calls), wrapped by the linker into ``kernel_alloc.c``'s: large blocks kept for the
#: next call (see that file).
ALLOCATOR = Path(__file__).with_name("kernel_alloc.c")
WRAP = "-Wl,--wrap=malloc,--wrap=free"
#: Prefixes of functions libmlir_c_runner_utils.so defines (memref.copy of
#: strided memrefs, vector.print, timers, C-interface helpers).
_C_RUNNER_UTILS = ("memrefCopy", "print", "rtclock", "_mlir_ciface_")
#: Prefixes of functions only libmlir_runner_utils.so defines (memref printing).
_RUNNER_UTILS = ("printMemref", "verifyMemRef", "_mlir_ciface_printMemref",
                 "_mlir_ciface_verifyMemRef", "_mlir_ciface_nanoTime")  # fmt: skip


def build_shared_library(
    llvm_module: ir.Module | str,
    out_dir: Path,
    target: CpuTarget,
    needs: Sequence[str],
    sources: Sequence[Path] = (),
) -> Path:
    """Build ``out_dir/kernel.so`` from an LLVM-dialect module; returns its path.

    ``needs`` names runtime libraries (:mod:`sparsecomp.runtime.libs`) to link
    against, e.g. ``["omp"]`` for kernels with OpenMP loops. ``out_dir`` also
    keeps ``kernel.ll``, the LLVM IR that was compiled. ``sources``: C files
    compiled into the library with it (the CUDA runtime shim).
    """
    host = platform.machine().lower()
    if {"amd64": "x86_64", "arm64": "aarch64"}.get(host, host) != target.arch:
        raise TargetError(
            f"the kernels are for {target.arch}, and this machine ({host}) links only its "
            f"own: its cc cannot make an {target.arch} library",
            hint="compile on a machine of that architecture (the IR for any target: "
            "sparsecomp-opt)",
        )
    libraries = [library_path(name) for name in needs]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    llvm_ir = out_dir / LLVM_IR
    text = translate(llvm_module)
    llvm_ir.write_text(text)
    wraps = "@malloc(" in text
    if wraps:
        sources = [*sources, allocator_object()]
    flags = codegen_flags(target)
    opt: list[str | Path] = [tool("opt"), "-O3", *optimizer_flags(target)]
    llc: list[str | Path] = [tool("llc"), "-O3", "-filetype=obj", "-relocation-model=pic", *flags]
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".build-") as tmp:
        bitcode, obj, library = (Path(tmp) / name for name in ("kernel.bc", "kernel.o", LIBRARY))
        if not _object_in_process(text, target, obj):
            _run([*opt, llvm_ir, "-o", bitcode])
            _run([*llc, bitcode, "-o", obj])
        _run([*link_command(obj, library, libraries, sources), *([WRAP] if wraps else [])])
        os.replace(library, out_dir / LIBRARY)  # atomic: a reader never sees half a library
    return out_dir / LIBRARY


def _object_in_process(text: str, target: CpuTarget, obj: Path) -> bool:
    """Write ``obj`` with :mod:`.llvmlib` (steps 2 and 3 in one call) where this process
    can: in the compile daemon's children; whether it did."""
    if not llvmlib.enabled():
        return False
    triple = TRIPLES[target.arch]
    cl_options = optimizer_flags(target)[len(codegen_flags(target)) :]
    if not llvmlib.usable(triple, cl_options):
        return False
    features = ",".join(target.llvm_features())
    obj.write_bytes(
        llvmlib.compile_object(text, triple, LLVM_CPUS[target.arch], features, cl_options)
    )
    return True


def allocator_object() -> Path:
    """``kernel_alloc.c`` compiled (``cc -O2 -fPIC -c``) into the cache directory, once
    per version of its source; kernels link the object."""
    source = ALLOCATOR.read_bytes()
    digest = hashlib.sha256(source).hexdigest()[:16]
    obj = knobs.cache_dir() / "objects" / f"kernel_alloc-{digest}.o"
    if obj.is_file() and _an_object(obj):
        return obj
    obj.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=obj.parent, prefix=".build-") as tmp:
        built = Path(tmp) / obj.name
        _run(["cc", "-O2", "-fPIC", "-c", ALLOCATOR, "-o", built])
        os.replace(built, obj)  # atomic: another process may be building it too
    return obj


def _an_object(path: Path) -> bool:
    """Whether ``path`` looks like an ELF object: an empty or garbled one in the cache
    was linked into every kernel built after it (an empty one: kernels without
    ``__wrap_malloc`` that failed to load, published to the cache)."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError:
        return False
    return len(head) == 64 and head[:4] == b"\x7fELF"


def runtime_needs(llvm_module: ir.Module) -> list[str]:
    """The runtime libraries an LLVM-dialect module calls into, for ``needs``.

    ``"omp"`` when it has OpenMP ops; ``"c_runner_utils"`` when it declares a
    function of MLIR's C runner utils (e.g. ``memrefCopy``, ``printF32``);
    ``"runner_utils"`` for MLIR's memref printers (``printMemrefF64``).
    """
    uses_omp, externals = False, set()

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal uses_omp
        uses_omp = uses_omp or op.name.startswith("omp.")
        if op.name == "llvm.func" and len(op.regions[0].blocks) == 0:
            externals.add(ir.StringAttr(op.attributes["sym_name"]).value)
        return ir.WalkResult.ADVANCE

    llvm_module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    needs = ["omp"] if uses_omp else []
    if any(n.startswith(_C_RUNNER_UTILS) for n in externals):
        needs.append("c_runner_utils")
    if any(n.startswith(_RUNNER_UTILS) for n in externals):
        needs.append("runner_utils")
    return needs


def codegen_flags(target: CpuTarget) -> list[str]:
    """``-mtriple``, ``-mcpu`` and ``-mattr`` for ``opt`` and ``llc``.

    In a module with several CPU targets this is their common target
    (:meth:`CpuTarget.common`): ``llc`` appends ``-mattr`` to each function's
    own ``target-features`` (set by ``sparse-iter-cpu-function-targets``), so
    it must hold only what every target has.
    """
    features = target.llvm_features()
    flags = [f"-mtriple={TRIPLES[target.arch]}", f"-mcpu={LLVM_CPUS[target.arch]}"]
    return [*flags, f"-mattr={','.join(features)}"] if features else flags


#: LLVM's loop vectorizer: a remainder as masked vector iterations, not a scalar loop.
TAIL_FOLDING = "-prefer-predicate-over-epilogue=predicate-else-scalar-epilogue"


def optimizer_flags(target: CpuTarget) -> list[str]:
    """:func:`codegen_flags` for ``opt``, and on targets with AVX-512's mask registers
    :data:`TAIL_FOLDING`.

    SpMV's row loop is LLVM-vectorized (gathers of ``x``); on graphs most rows
    are shorter than a vector, and a scalar remainder loop ran all of them.
    With masked tails, on a 2-core Intel Xeon (AVX-512; A/B in one process,
    median of 5 rounds): R-MAT 0.416 -> 0.310 ms, ca-HepPh 0.074 -> 0.053,
    email-Enron 0.169 -> 0.107, uniform 0.1% 0.248 -> 0.224, the FEM matrix
    0.434 -> 0.459; SpMM, SDDMM and SpGEMM (whose loops MLIR vectorizes)
    0.96-1.01x. Without mask registers (AVX2) masked loads and gathers cost
    more, and a Zen 3 ran LLVM's gathers slower than scalar code: left off.
    Left off too on AMD's cores with AVX-512 (``tune = amd``): on a 2-core
    Zen 4 EPYC a short row's masked gather costs a whole one, and the scalar
    remainder ran SpMV 1.27-1.36x faster geomean over the ten real matrices
    of ``benchmarks/cpu.py`` (A/B in one process: rajat01 0.023 -> 0.014 ms,
    memplus 0.063 -> 0.035, 4elt 0.044 -> 0.027; the graphs with longer rows
    lost, email-Enron 0.18 -> 0.22, ca-HepPh 0.082 -> 0.061 in one run and
    0.096 -> 0.108 in the other).
    """
    flags = codegen_flags(target)
    if target.arch == "x86_64" and "avx512f" in target.features and target.tune != "amd":
        flags.append(TAIL_FOLDING)
    return flags


def link_command(
    obj: Path, library: Path, libraries: Sequence[Path], sources: Sequence[Path] = ()
) -> list[str]:
    """``cc -shared`` for ``obj`` and C ``sources`` against ``libraries`` (``$ORIGIN`` first).

    ``-Bsymbolic``: the library's calls to its own functions stay in it. A kernel
    is named as its MLIR function (``@floor``, ``@exp``, ``@sum``), and without it
    the call from the C interface wrapper to the function went through the PLT to
    the first definition in the process, libm's ``floor`` for ``@floor``: a
    garbage result and a crash freeing it.
    """
    command = ["cc", "-shared", *_linker(), "-Wl,-Bsymbolic", "-o", str(library), str(obj)]
    if sources:
        command += ["-O2", "-fPIC", "-pthread", *map(str, sources)]
    directories = list(dict.fromkeys(str(lib.parent) for lib in libraries))
    command += [f"-L{d}" for d in directories]
    command += [f"-l{lib.name.removeprefix('lib').removesuffix('.so')}" for lib in libraries]
    command += ["-lm", "-Wl,-rpath,$ORIGIN", *(f"-Wl,-rpath,{d}" for d in directories)]
    return command


@functools.cache
def _linker() -> list[str]:
    """``-fuse-ld=gold`` where binutils' gold is installed: it links a kernel in about
    60% of the CPU time of the default ``ld.bfd`` (SpMM's: 19 against 33 ms)."""
    return ["-fuse-ld=gold"] if shutil.which("ld.gold") else []


def translate(llvm_module: ir.Module | str) -> str:
    """LLVM IR text of an LLVM-dialect module (object or MLIR text)."""
    if isinstance(llvm_module, str):
        return _run([tool("mlir-translate"), "--mlir-to-llvmir"], stdin=llvm_module)
    # The function itself, not ``mlir.dialects.llvm``, whose op classes a build never uses
    # (:mod:`sparsecomp.ir.light_dialects.llvm`).
    from mlir._mlir_libs._mlirDialectsLLVM import translate_module_to_llvmir

    leftover = untranslatable(llvm_module.operation)
    if leftover:
        raise ToolchainError(
            f"'{leftover[0].name}' cannot be translated to LLVM IR "
            "(the module is not all LLVM dialect)",
            location=location_text(leftover[0].location, "<module>"),
            hint=_lowering_hint(llvm_module),
        )
    return str(translate_module_to_llvmir(llvm_module.operation))


def _lowering_hint(module: ir.Module) -> str:
    """The module saved (:func:`.cache.save_reproducer`) and the command that lowers it."""
    from sparsecomp.compiler.cache import save_reproducer

    text = module.operation.get_asm(enable_debug_info=True)
    try:
        path = save_reproducer(text, "sparsecomp-cpu", knobs.reproducer_dir())
    except OSError as exc:
        where = knobs.reproducer_dir() or "the compile cache"
        return f"(no reproducer: cannot write into {where}: {exc.strerror or exc})"
    return (
        "lower it to the LLVM dialect first (a whole program; where it cannot, this says "
        f"why, located): sparsecomp-opt --pass-pipeline='builtin.module(sparsecomp-cpu)' {path}"
    )


def _run(command: Sequence[str | Path], stdin: str | None = None) -> str:
    args = [str(c) for c in command]
    try:
        proc = subprocess.run(args, input=stdin, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        if args[0] == "cc":
            raise ToolchainError(
                "no C compiler: 'cc' is not on PATH, and every kernel is linked with cc -shared",
                hint="install one (gcc or clang: apt install gcc, xcode-select --install) or "
                "put a link named cc to it on PATH",
            ) from None
        raise ToolchainError(f"cannot run {args[0]}: not found", hint=shlex.join(args)) from None
    except OSError as exc:
        raise ToolchainError(f"cannot run {shlex.join(args)}: {exc}") from None
    if proc.returncode != 0:
        raise ToolchainError(
            f"{Path(args[0]).name} failed (exit {proc.returncode}): {shlex.join(args)}\n"
            f"{proc.stderr.strip()}"
        )
    return proc.stdout
