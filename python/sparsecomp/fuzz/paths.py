"""The three ways to run a case; each returns ``{"status": ..., "message": ...}``.

Statuses: ``ok``, ``refused`` (a sparsecomp error with a message), ``wrong``
(differs from numpy), ``crash`` (a signal, or a failure without a
diagnostic), ``traceback`` (a Python exception that is not a
``SparsecompError``, or an "internal error"), ``skipped``. Crashes that kill
the worker itself and timeouts are recorded by :mod:`.pool`.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import signal
import subprocess
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from sparsecomp.fuzz.case import Case, mismatch
from sparsecomp.fuzz.mainwrap import main_program, parse_printed

Outcome = dict[str, str]
PIPELINE = "builtin.module(sparsecomp-cpu)"


def outcome(status: str, message: str = "") -> Outcome:
    return {"status": status, "message": message.strip()}


def _error(exc: BaseException, where: str) -> Outcome:
    from sparsecomp.errors import SparsecompError

    if isinstance(exc, SparsecompError):
        text = str(exc)
        internal = "internal error" in text or "Traceback" in text
        return outcome("traceback" if internal else "refused", f"{where}: {text}")
    tb = "".join(traceback.format_exception(exc)[-3:])
    return outcome("traceback", f"{where}: {type(exc).__name__}: {exc}\n{tb}")


def _sparse_arg(case: Case, spec: Any, dense: np.ndarray, rng: np.random.Generator) -> Any:
    """A scipy matrix or a SparseTensor in the ABI layout (COO with duplicates when it may)."""
    import scipy.sparse as sp  # type: ignore[import-untyped]

    from sparsecomp.formats import SparseTensor

    layout = spec.layout
    levels = getattr(layout, "levels", ())
    if levels and levels[-1].nonunique and rng.random() < 0.6:
        coords = np.stack(np.nonzero(dense)).astype(np.int64)
        vals = dense[tuple(coords)]
        dup = rng.random(vals.shape) < 0.5
        part = vals * 0.5 if case.prog.is_float else rng.integers(-3, 4, vals.shape)
        part = part.astype(vals.dtype)
        coords = np.concatenate([coords, coords[:, dup]], axis=1)
        vals = np.concatenate([np.where(dup, vals - part, vals), part[dup]])
        order = rng.permutation(vals.size)
        return SparseTensor.from_coo(dense.shape, coords[:, order], vals[order], layout)
    if dense.ndim == 2 and dense.dtype != np.float16 and rng.random() < 0.5:  # scipy has no f16
        return sp.csr_matrix(dense) if rng.random() < 0.5 else sp.coo_matrix(dense)
    return SparseTensor.from_dense(dense, layout)


def run_py(case: Case, target: str = "host") -> Outcome:
    """``sparsecomp.compile`` the kernel, call it with numpy/scipy/SparseTensor arguments.

    ``target="cuda-emu:sm_80"`` is the ``emu`` path: the CUDA schedule run on the CPU.
    """
    import sparsecomp

    try:
        exe = sparsecomp.compile(case.kernel, target, cache_results=False)
    except Exception as exc:
        return _error(exc, "compile")
    try:
        return _call(case, exe)
    finally:
        shutil.rmtree(exe.directory, ignore_errors=True)  # the library stays mapped


def _call(case: Case, exe: Any) -> Outcome:
    rng = np.random.default_rng([case.seed, case.index, 1])
    try:
        fn = exe.functions["kernel"]
        names = [op.name for op in case.prog.ins] + (["o"] if case.prog.init == "arg" else [])
        args = []
        for name, spec in zip(names, fn.signature.args, strict=True):
            dense = case.arrays[name]
            args.append(_sparse_arg(case, spec, dense, rng) if spec.kind == "sparse" else dense)
    except Exception as exc:
        return _error(exc, "arguments")
    try:
        got = fn(*args)
    except Exception as exc:
        return _error(exc, "call")
    try:
        got = got.to_dense() if hasattr(got, "to_dense") else got
    except Exception as exc:
        return _error(exc, "result")
    bad = mismatch(case, got)
    return outcome("wrong", bad) if bad else outcome("ok")


def _runner(lowered: Path, timeout: float) -> tuple[Outcome | None, str]:
    from sparsecomp.ir.odsgen import tool
    from sparsecomp.runtime.libs import library_path

    libs = [f"-shared-libs={library_path(n)}" for n in ("c_runner_utils", "runner_utils", "omp")]
    cmd = [str(tool("mlir-runner")), str(lowered), "-e", "main", "-entry-point-result=void", *libs]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    return _exit_status(done, "mlir-runner"), done.stdout


def _exit_status(done: subprocess.CompletedProcess[str], what: str) -> Outcome | None:
    if done.returncode == 0:
        return None
    err = _key_lines(done.stderr)
    if done.returncode < 0 or done.returncode > 128:
        sig = -done.returncode if done.returncode < 0 else done.returncode - 128
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        return outcome("crash", f"{what}: {name}: {err}")
    status = "refused" if "error" in err else "crash"
    return outcome(status, f"{what}: {err or 'exit ' + str(done.returncode)}")


def _key_lines(stderr: str) -> str:
    """The lines of a tool's stderr that say what happened (not the stack dump)."""
    keys = ("Assertion", "LLVM ERROR", "error", "Error", "unsupported", "Symbols not found")
    lines = [ln.strip() for ln in stderr.splitlines() if any(k in ln for k in keys)]
    lines = [ln for ln in lines if not ln.startswith("#")] or stderr.strip().splitlines()[:1]
    return "\n".join(lines[:4])[:2000]


def _printed(case: Case, stdout: str) -> Outcome:
    got = parse_printed(stdout, case.expected.shape)
    if got is None:
        return outcome("crash", f"main did not print the result: {stdout[-300:]!r}")
    bad = mismatch(case, got, printed=True)
    return outcome("wrong", bad) if bad else outcome("ok")


def run_cli(case: Case, work: Path, timeout: float) -> Outcome:
    """``sparsecomp-opt --pass-pipeline='builtin.module(sparsecomp-cpu)'`` then mlir-runner."""
    from sparsecomp.tools.opt import main as opt_main

    src, lowered = work / "main.mlir", work / "main.llvm.mlir"
    src.write_text(main_program(case.prog, case.arrays))
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            rc = opt_main([str(src), f"--pass-pipeline={PIPELINE}", "-o", str(lowered)])
    except Exception as exc:
        return _error(exc, "sparsecomp-opt")
    text = err.getvalue()
    if rc != 0:
        internal = "internal error" in text or "Traceback" in text
        return outcome("traceback" if internal else "refused", f"sparsecomp-opt: {text[-2000:]}")
    failed, stdout = _runner(lowered, timeout)
    return failed or _printed(case, stdout)


def run_upstream(case: Case, work: Path, timeout: float) -> Outcome:
    """The same ``main()`` through ``mlir-opt --sparsifier`` (``#sparse_tensor`` programs)."""
    from sparsecomp.ir.odsgen import tool

    if not case.upstream_only:
        return outcome("skipped", "uses #sparse_iter encodings")
    src, lowered = work / "main.mlir", work / "main.upstream.mlir"
    src.write_text(main_program(case.prog, case.arrays))
    cmd = [str(tool("mlir-opt")), str(src), "--sparsifier", "-o", str(lowered)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    failed = _exit_status(done, "mlir-opt --sparsifier")
    if failed is None:
        failed, stdout = _runner(lowered, timeout)
    return failed or _printed(case, stdout)
