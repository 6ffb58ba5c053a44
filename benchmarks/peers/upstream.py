"""The upstream MLIR sparsifier, through the same MLIR Python bindings.

Kernels: ``benchmarks/kernels/upstream/*.mlir`` (``#sparse_tensor.encoding``
CSR with 32-bit positions and coordinates, ``linalg.generic`` bodies equal to
sparsecomp's). ``sparse-assembler{direct-out=true}`` runs first: a sparse
argument becomes its three buffers, rebuilt with ``sparse_tensor.assemble``,
which needs a static shape, so one kernel is compiled per (operation, matrix
shape); K stays dynamic, so SpMM K=32 and K=128 share one. A sparse result
(SDDMM) is returned as its buffers, malloc'ed by the kernel.

Pipeline: ``sparsifier{FLAGS}`` parsed with ``PassManager.parse``. The stock
sparsifier lowers the ``scf.parallel`` loops that
``parallelization-strategy`` creates to sequential code
(``convert-scf-to-cf``), so the threaded variants run the sparsifier's own
pass list (``str(PassManager)`` of the expanded pipeline) with
``convert-scf-to-openmp`` (+ ``finalize-memref-to-llvm``, which lowers the
``memref.alloca_scope`` it creates before ``convert-scf-to-cf`` splits its
region) inserted before ``convert-scf-to-cf`` and ``convert-openmp-to-llvm``
before ``convert-to-llvm``; threads come from libomp (the ``cmeel-libomp``
wheel), ``OMP_NUM_THREADS`` or all cores. Each pipeline runs in a worker
subprocess (:mod:`upstream_worker`), so an assertion in a pass shows as
``ABORTED`` instead of killing the benchmark; the lowered module is JIT-compiled
here with ``mlir.execution_engine.ExecutionEngine(opt_level=3)`` and called
through the packed wrapper of its ``_mlir_ciface_`` entry point with memref
descriptors of the numpy arrays. Results malloc'ed by the kernel are freed
(libc ``free``) when the returned numpy array dies.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from string import Template
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

from peers import Aborted, Case, Peer, Run, Unavailable

KERNELS = Path(__file__).resolve().parents[1] / "kernels" / "upstream"
WORKER = Path(__file__).resolve().with_name("upstream_worker.py")

_BASE = "enable-runtime-library=false"
_VECTOR = "vl=16 enable-index-optimizations=true reassociate-fp-reductions=true"
_PARALLEL = "parallelization-strategy=dense-outer-loop"
#: name -> (sparsifier flags, OpenMP threads); all run side by side with ``--upstream all``.
VARIANTS: dict[str, tuple[str, bool]] = {
    "scalar": (_BASE, False),
    "vector": (f"{_BASE} {_VECTOR}", False),
    "omp": (f"{_BASE} {_PARALLEL}", True),
    "vector+omp": (f"{_BASE} {_VECTOR} {_PARALLEL}", True),
}
#: The fastest correct variant per operation, from round-robin runs of all
#: variants (``cpu.py --upstream all``) on the full-size matrices: SpMV gains
#: from both vectors and threads; SpMM is slower vectorized (vl=16 over the
#: dense j loop) than scalar with threads; SDDMM and SpGEMM build a sparse
#: output by insertion, which the sparsifier neither vectorizes nor
#: parallelizes, so every variant generates the same loops (one thread).
BEST = {"spmv": "vector+omp", "spmm": "omp", "sddmm": "vector+omp", "spgemm": "vector+omp"}
#: Ops whose pipeline needs sparsecomp's ``sparse-iter-widen-bool-buffers``: the
#: sparsifier's expanded access pattern (SpGEMM's rows) has an i1 "filled" buffer,
#: and this MLIR build aborts lowering stores to it (MemRefToLLVM.cpp:
#: ``integralElementType.getWidth() >= 8``). The pass makes i1 buffers i8 and
#: changes nothing else; it runs where the storage is explicit, before
#: ``sparse-storage-specifier-to-llvm``.
WIDEN = ("spgemm",)
_WIDEN_PASS = "sparse-iter-widen-bool-buffers,"
_SPECIFIER_TO_LLVM = "sparse-storage-specifier-to-llvm"


def libomp() -> Path | None:
    path = Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix" / "lib" / "libomp.so"
    return path if path.exists() else None


def pipeline(flags: str, openmp: bool, widen: bool = False) -> str:
    """The sparsifier pipeline text, with OpenMP lowering inserted if asked, and
    i1 buffers widened (:data:`WIDEN`) if asked."""
    from mlir import ir, passmanager

    with ir.Context():
        text = str(passmanager.PassManager.parse(f"builtin.module(sparsifier{{{flags}}})"))
    head = "builtin.module("
    text = f"{head}sparse-assembler{{direct-out=true}},{text.removeprefix(head)}"
    if widen:
        at = text.index(_SPECIFIER_TO_LLVM)
        text = text[:at] + _WIDEN_PASS + text[at:]
    if not openmp:
        return text
    scf_to_cf = text.index("func.func(convert-scf-to-cf")
    to_llvm = text.index("convert-to-llvm{")
    return (
        text[:scf_to_cf]
        + "convert-scf-to-openmp,expand-strided-metadata,lower-affine,finalize-memref-to-llvm,"
        + text[scf_to_cf:to_llvm]
        + "convert-openmp-to-llvm,"
        + text[to_llvm:]
    )


class _Worker:
    """The subprocess running pipelines; restarted after it dies."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.dir = Path(tempfile.mkdtemp(prefix="sparsecomp-bench-upstream-"))
        self.log = self.dir / "worker.stderr"

    def _start(self) -> subprocess.Popen[str]:
        if self.proc is None or self.proc.poll() is not None:
            self.close()
            with self.log.open("w") as log:
                self.proc = subprocess.Popen(
                    [sys.executable, str(WORKER)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    text=True,
                )
        return self.proc

    def lower(self, source: str, pipe: str, name: str) -> tuple[bytes, float]:
        """Run ``pipe`` on ``source``: (lowered bytecode, seconds in the pipeline)."""
        proc = self._start()
        assert proc.stdin is not None
        assert proc.stdout is not None
        out = self.dir / f"{name}.mlirbc"
        job = json.dumps({"source": source, "pipeline": pipe, "out": str(out)})
        try:
            proc.stdin.write(job + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            rc = proc.wait()
            self.close()
            what = signal.Signals(-rc).name if rc < 0 else f"exit status {rc}"
            raise Aborted(f"pipeline killed the compiler process ({what}): {self._last_words()}")
        answer = json.loads(line)
        if not answer["ok"]:
            raise Unavailable(f"pipeline failed: {answer['error']}")
        lowered = out.read_bytes()
        out.unlink()
        return lowered, float(answer["seconds"])

    def close(self) -> None:
        """End the worker (it exits when its stdin closes) and close its pipes."""
        if self.proc is None:
            return
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except BrokenPipeError:
                    pass
        self.proc.wait()
        self.proc = None

    def _last_words(self) -> str:
        """The assertion (or last line) the dead worker printed."""
        lines = self.log.read_text(errors="replace").strip().splitlines() or ["(nothing)"]
        last = lines[-1]
        at = last.find("Assertion")
        where = last.split(": ", 1)[1].split(":", 2)[:2] if ": " in last else []
        if at >= 0 and where:
            return f"{last[at:][:160]} ({':'.join(where).rsplit('/', 1)[-1]})"
        return last[-200:]


def _descriptor(ctype: type) -> type[ctypes.Structure]:
    from mlir import runtime as rt

    return rt.make_nd_memref_descriptor(1, ctype)


class _Results(ctypes.Structure):
    """The three rank-1 memref descriptors of a returned CSR tensor."""

    _fields_: ClassVar = [
        ("pos", _descriptor(ctypes.c_int32)),
        ("crd", _descriptor(ctypes.c_int32)),
        ("values", _descriptor(ctypes.c_float)),
    ]


class _Owned:
    """A kernel-malloc'ed memref as a numpy array base; libc ``free`` when it dies.

    Kernel results are row-major and contiguous (identity layout), offset 0.
    """

    _free = ctypes.CDLL(None).free

    def __init__(self, desc: ctypes.Structure) -> None:
        self.allocated = ctypes.cast(desc.allocated, ctypes.c_void_p).value
        aligned = ctypes.cast(desc.aligned, ctypes.c_void_p).value
        typestr = np.dtype(desc.aligned._type_).str
        self.__array_interface__ = {
            "data": (aligned, False),
            "shape": tuple(desc.shape),
            "typestr": typestr,
            "version": 3,
        }

    def __del__(self) -> None:
        self._free(ctypes.c_void_p(self.allocated))


class UpstreamPeer(Peer):
    """``variant``: a name in :data:`VARIANTS`, or ``best`` (:data:`BEST`, per op)."""

    def __init__(self, variant: str = "best") -> None:
        super().__init__()
        self.name = "upstream" if variant == "best" else f"upstream:{variant}"
        self.choice = dict(BEST) if variant == "best" else dict.fromkeys(BEST, variant)
        omp = libomp()
        self.libs = [str(omp)] if omp else []
        for lib in self.libs:
            ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
        threads = os.environ.get("OMP_NUM_THREADS", str(os.cpu_count()))
        about = {}
        for op, name in self.choice.items():
            flags, openmp = VARIANTS[name]
            how = f" + OpenMP ({threads} threads)" if openmp else " (1 thread)"
            about.setdefault(f"sparsifier{{{flags}}}{how}", []).append(op)
        self.about = "; ".join(f"{', '.join(ops)}: {how}" for how, ops in about.items())
        self._pipelines: dict[tuple[str, bool], str] = {}
        self._worker = _Worker()
        self._kernels: dict[tuple[str, int, int], object] = {}
        self._context: object = None

    def close(self) -> None:
        self._worker.close()
        shutil.rmtree(self._worker.dir, ignore_errors=True)

    def _kernel(self, op: str, m: int, n: int) -> object:
        """The JIT-compiled engine for ``op`` on an ``m x n`` matrix (compiled once)."""
        from mlir import ir
        from mlir.execution_engine import ExecutionEngine

        key = (op, m, n)
        if key in self._kernels:
            engine = self._kernels[key]
            if isinstance(engine, Exception):
                raise engine
            return engine
        flags, openmp = VARIANTS[self.choice[op]]
        if openmp and not self.libs:
            raise Unavailable("libomp.so not found (the cmeel-libomp wheel)")
        which = (self.choice[op], op in WIDEN)
        if which not in self._pipelines:
            self._pipelines[which] = pipeline(flags, openmp, widen=op in WIDEN)
        source = Template((KERNELS / f"{op}.mlir").read_text()).substitute(M=m, N=n)
        try:
            lowered, seconds = self._worker.lower(source, self._pipelines[which], f"{op}_{m}x{n}")
        except (Aborted, Unavailable) as err:
            self._kernels[key] = err
            raise
        start = time.perf_counter()
        if self._context is None:
            self._context = ir.Context()
        with self._context:
            module = ir.Module.parse(lowered)
            engine = ExecutionEngine(module, opt_level=3, shared_libs=self.libs)
            engine.raw_lookup(f"_mlir_ciface_{op}")  # force code generation now
        self.compile_times[f"{op} {m}x{n}"] = (seconds + time.perf_counter() - start, None)
        self._kernels[key] = engine
        return engine

    def prepare(self, case: Case) -> Run:
        from mlir import runtime as rt

        a = case.a
        engine = self._kernel(case.op, *a.shape)
        args = [a.indptr, a.indices, a.data, *(np.ascontiguousarray(d) for d in case.dense)]
        if case.op == "spgemm":  # C = A A: B is A's buffers again
            args += [a.indptr, a.indices, a.data]
        if case.op == "spmv":
            args.append(np.empty(a.shape[0], np.float32))  # carries y's size
            result: ctypes.Structure = rt.make_nd_memref_descriptor(1, ctypes.c_float)()
        elif case.op == "spmm":
            args.append(np.empty((a.shape[0], case.k), np.float32))
            result = rt.make_nd_memref_descriptor(2, ctypes.c_float)()
        else:  # the sparse result's positions, coordinates, values
            result = _Results()
        descs = [rt.get_ranked_memref_descriptor(x) for x in args]
        # The packed wrapper of _mlir_ciface_<op>: one void** array, each entry the
        # address of one C parameter (here: a pointer to a memref descriptor or to
        # the struct of result descriptors).
        params = [ctypes.pointer(d) for d in (result, *descs)]
        packed = (ctypes.c_void_p * len(params))(*[ctypes.addressof(p) for p in params])
        fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(engine.raw_lookup(f"_mlir_ciface_{case.op}"))
        keep = (args, descs, params, engine)
        inputs = {x.ctypes.data for x in args}

        def run() -> np.ndarray | sp.csr_matrix:
            assert keep
            fn(packed)
            if isinstance(result, _Results):
                pos, crd = np.asarray(_Owned(result.pos)), np.asarray(_Owned(result.crd))
                values = np.asarray(_Owned(result.values))
                if case.op == "spgemm":  # a new pattern: the kernel's C as scipy CSR
                    nnz = int(pos[-1])
                    c = (values[:nnz], crd[:nnz], pos)
                    return sp.csr_matrix(c, shape=a.shape, copy=False)
                return values
            if ctypes.cast(result.allocated, ctypes.c_void_p).value in inputs:
                raise AssertionError("the kernel wrote into an argument; expected a new buffer")
            return np.asarray(_Owned(result))

        return run
