"""benchmarks/cuda.py on a GPU: sparsecomp's CUDA kernels beside cuSPARSE, cuSPARSELt, cuBLAS.

Needs a CUDA driver, ``cuda-bindings`` (``pip install -e '.[cuda]'``), CuPy
and PyTorch with CUDA. Each sparse matrix goes to the GPU once
(``sparsecomp.runtime.cuda.to_device`` for ours, the peers' own formats for
theirs); dense operands are CuPy arrays, so calls copy nothing. Times are
medians of ``--reps`` synchronized calls (wall clock: our call includes its
host code, the result's allocation and a synchronize). Every result is
checked against the peer's before it is timed. Rows:

* SpMM, K = 32 and 128: ours (CSR, columns on lanes) vs cuSPARSE SpMM
  (``cupyx.scipy.sparse.csr_matrix @ B``); on the blocked matrices also ours
  as BSR 16x16 on tensor cores (tf32);
* SpMV: ours (8 lanes per row) vs cuSPARSE SpMV;
* SDDMM, K = 32: ours vs cuSPARSE SDDMM (``torch.sparse.sampled_addmm``);
* 2:4 f16 SpMM on square pruned weights 4096-16384: ours (``mma.sp``) vs
  cuSPARSELt (torch ``to_sparse_semi_structured``) vs dense cuBLAS fp16.

Matrices: the CPU benchmark's (full size), R-MAT 2^20 and the pruned weights.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matrices
import numpy as np
from cuda_programs import BSR_SPMM, NM_SPMM

import sparsecomp
from sparsecomp.runtime import cuda

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def available() -> str | None:
    """None when this machine can run the GPU benchmark, else why not."""
    try:
        cuda.driver()
    except sparsecomp.SparsecompError as exc:
        return str(exc)
    try:
        import cupy  # noqa: F401
        import torch
    except ImportError as exc:
        return f"the GPU benchmark's peers need CuPy and PyTorch: {exc}"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return None


def _median(call: Callable[[], Any], sync: Callable[[], None], reps: int) -> float:
    call()
    sync()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        call()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _close(ours: Any, theirs: Any, what: str, rtol: float = 1e-3) -> None:
    a = np.asarray(ours.get() if hasattr(ours, "get") else ours, dtype=np.float64)
    b = np.asarray(theirs, dtype=np.float64)
    scale = 1 + np.abs(b).max(initial=0)
    if not np.allclose(a, b, rtol=rtol, atol=rtol * scale):
        raise AssertionError(f"{what}: sparsecomp's result differs from the peer's")


def run(reps: int, ks: tuple[int, ...], quick: bool) -> list[str]:
    import cupy
    import cupyx.scipy.sparse as csp
    import torch

    sm = cuda.driver().sm
    target = f"cuda:sm_{sm}"
    exes = {k: sparsecomp.compile(EXAMPLES / f"{k}.mlir", target) for k in ("spmv", "spmm")}
    exes["sddmm"] = sparsecomp.compile(EXAMPLES / "sddmm.mlir", target)
    bsr = sparsecomp.compile(BSR_SPMM, target)
    nm = sparsecomp.compile(NM_SPMM, target)
    sync = cupy.cuda.Device().synchronize
    rng = np.random.default_rng(0)
    specs = matrices.suite(quick=quick)
    if not quick:
        specs.append(matrices.Spec("rmat20", "R-MAT 2^20", lambda: matrices.rmat(20)))
    lines = [
        f"sparsecomp on {cuda.driver().name} (sm_{sm}), medians of {reps} calls; "
        "ratio = peer time / ours (> 1: ours faster)",
        "",
        "| op | matrix | ours ms | peer | peer ms | ratio |",
        "| --- | --- | --- | --- | --- | --- |",
    ]

    def row(op: str, name: str, ours: float, peer: str, theirs: float) -> None:
        lines.append(
            f"| {op} | {name} | {ours * 1e3:.3f} | {peer} | {theirs * 1e3:.3f} "
            f"| {theirs / ours:.2f} |"
        )

    for spec in specs:
        a = spec.build()
        m, n = a.shape
        csr_layout = exes["spmm"].spmm.signature.args[0].layout
        ours_a = cuda.to_device(a, csr_layout)
        theirs_a = csp.csr_matrix(a)
        x = cupy.asarray(rng.standard_normal(n).astype(np.float32))
        y = exes["spmv"].spmv(ours_a, x)
        _close(y, (theirs_a @ x).get(), f"spmv {spec.name}")
        row("spmv", spec.name, _median(lambda: exes["spmv"].spmv(ours_a, x), sync, reps),
            "cuSPARSE", _median(lambda: theirs_a @ x, sync, reps))  # fmt: skip
        for k in ks:
            b = cupy.asarray(rng.standard_normal((n, k)).astype(np.float32))
            _close(exes["spmm"].spmm(ours_a, b), (theirs_a @ b).get(), f"spmm {spec.name}")
            row(f"spmm K={k}", spec.name,
                _median(lambda: exes["spmm"].spmm(ours_a, b), sync, reps),
                "cuSPARSE", _median(lambda: theirs_a @ b, sync, reps))  # fmt: skip
            if spec.name.startswith("block"):
                bsr_layout = bsr.spmm.signature.args[0].layout
                blocks = cuda.to_device(a, bsr_layout)
                _close(bsr.spmm(blocks, b), (theirs_a @ b).get(), "bsr", rtol=5e-3)
                row(f"bsr-mma K={k}", spec.name, _median(lambda: bsr.spmm(blocks, b), sync, reps),
                    "cuSPARSE", _median(lambda: theirs_a @ b, sync, reps))  # fmt: skip
        k = ks[0]
        xs = cupy.asarray(rng.standard_normal((m, k)).astype(np.float32))
        ys = cupy.asarray(rng.standard_normal((n, k)).astype(np.float32))
        t_a = torch.sparse_csr_tensor(
            torch.as_tensor(a.indptr.astype(np.int64)), torch.as_tensor(a.indices.astype(np.int64)),
            torch.as_tensor(a.data), size=a.shape, device="cuda",
        )  # fmt: skip
        tx, tyt = torch.as_tensor(xs, device="cuda"), torch.as_tensor(ys, device="cuda").T
        want = torch.sparse.sampled_addmm(t_a, tx, tyt, beta=0.0).values().cpu().numpy()
        got = exes["sddmm"].sddmm(ours_a, xs, ys)
        got_values = got.to_scipy().data if hasattr(got, "to_scipy") else got
        _close(got_values, want, f"sddmm {spec.name}")
        peer = _median(lambda: torch.sparse.sampled_addmm(t_a, tx, tyt, beta=0.0), sync, reps)
        ours = _median(lambda: exes["sddmm"].sddmm(ours_a, xs, ys), sync, reps)
        row(f"sddmm K={k}", spec.name, ours, "cuSPARSE", peer)
    lines += _two_four(nm, reps, sync, (4096,) if quick else (4096, 8192, 16384))
    return lines


def _two_four(nm: Any, reps: int, sync: Callable[[], None], sizes: tuple[int, ...]) -> list[str]:
    """2:4 f16 SpMM: ours (mma.sp) vs cuSPARSELt vs dense cuBLAS, on square pruned weights."""
    import cupy
    import torch
    from torch.sparse import to_sparse_semi_structured

    from sparsecomp.formats import SparseTensor

    out = [
        "",
        "| 2:4 f16 n=m=k | ours ms | cuSPARSELt ms | cuBLAS fp16 ms | cuSPARSELt / ours "
        "| cuBLAS / ours |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    layout = nm.spmm.signature.args[0].layout
    for n in sizes:
        w = matrices.pruned(n, "nm:2:4").toarray().astype(np.float16)
        ours_a = cuda.to_device(SparseTensor.from_dense(w, layout))
        b = cupy.asarray(np.random.default_rng(1).standard_normal((n, n)).astype(np.float16))
        c = cupy.zeros((n, n), np.float32)
        tw = torch.as_tensor(w, device="cuda")
        tb = torch.as_tensor(b, device="cuda")
        semi = to_sparse_semi_structured(tw)
        _close(nm.spmm(ours_a, b, c), (tw.float() @ tb.float()).cpu().numpy(), "2:4", 1e-2)
        ours = _median(lambda: nm.spmm(ours_a, b, c), sync, reps)
        lt = _median(lambda: semi @ tb, sync, reps)
        dense = _median(lambda: tw @ tb, sync, reps)
        out.append(f"| {n} | {ours * 1e3:.3f} | {lt * 1e3:.3f} | {dense * 1e3:.3f} | "
                   f"{lt / ours:.2f} | {dense / ours:.2f} |")  # fmt: skip
    return out


__all__ = ["available", "run"]
