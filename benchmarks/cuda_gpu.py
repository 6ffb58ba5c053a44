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
  as BSR 16x16 on tensor cores (tf32), and on the FEM matrix with 3x3 node
  blocks as BSR 3x3, two blocks to a tf32 MMA (``bsr3-mma``), each against
  cuSPARSE's CSR SpMM and against its own BSR SpMM (``bsrmm``, which torch's
  BSR tensors call on CUDA; rows ``... (bsrmm)``);
* SpMV: ours (8 lanes per row) vs cuSPARSE SpMV, and ours with the entries
  shared out evenly between threads (``spmv-split``: compile option
  ``gpu_balance="nonzeros"``) on every matrix, and SpMM so (``spmm-split``)
  on the power-law graphs (R-MAT, email-Enron, wiki-Vote, ca-HepPh) and
  wherever ``exe.prepare`` would split (:mod:`sparsecomp.formats.gpu_balance`);
  a last table gives, per op, the schedule that rule chooses for each matrix
  and its ratio, so that the rule is judged on the GPU;
* SDDMM, K = 32: ours vs cuSPARSE SDDMM (``torch.sparse.sampled_addmm``), and
  split by entries (``sddmm-split``) where SpMM is, and where the rule splits;
* 2:4 f16 SpMM on square pruned weights 4096-16384: ours (``mma.sp``) vs
  cuSPARSELt (torch ``to_sparse_semi_structured``) vs dense cuBLAS fp16.

Matrices: the CPU benchmark's (full size), R-MAT 2^20 and the pruned weights;
on the power-law ones (R-MAT) also SpMV over ``hyb`` (ELL buckets and a CSR rest).

The kernels compile on the machine that runs the benchmark, or elsewhere:
:func:`build` and :func:`save` on a machine with MLIR (no GPU needed),
:func:`load` on the GPU's machine (no MLIR needed; the executables' host code
is built for the architecture's baseline, so any x86-64 runs it).
"""

from __future__ import annotations

import statistics
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matrices
import numpy as np
from cuda_programs import BSR3_SPMM, BSR_SPMM, HYB_SPMV, NM_SPMM, NODE_BLOCKED, POWER_LAW

import sparsecomp
from sparsecomp.formats.gpu_balance import choose_balance
from sparsecomp.formats.stats import matrix_stats
from sparsecomp.runtime import cuda

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
#: The executables a run needs, by name.
KERNELS = (
    "spmv",
    "spmm",
    "sddmm",
    "bsr",
    "nm",
    "hyb",
    "split",
    "split_spmm",
    "split_sddmm",
    "bsr3",
)
#: The power-law graphs of issue 41's SpMM K=128 target (SpMM split by entries runs there).
GRAPHS = frozenset({"rmat", "rmat20", "email-Enron", "wiki-Vote", "ca-HepPh"})


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


#: (op, matrix) -> (our seconds, the peer's)
Times = dict[tuple[str, str], tuple[float, float]]


def _chosen_table(
    times: Times, chosen: dict[tuple[str, str], str], ks: tuple[int, ...]
) -> list[str]:
    """Per op, the schedule ``exe.prepare`` takes for each matrix and its ratio to
    cuSPARSE, with the geomean, beside the row schedule's."""
    lines = ["", "| op | schedule chosen per matrix | geomean ratio | by rows | worst |",
             "| --- | --- | --- | --- | --- |"]  # fmt: skip
    for base in ("spmv", *(f"spmm K={k}" for k in ks), f"sddmm K={ks[0]}"):
        op = base.split()[0]
        picked, rows = [], []
        for (row_op, name), (ours, theirs) in times.items():
            if row_op != base:
                continue
            split = times.get((base.replace(op, f"{op}-split"), name))
            use = split if chosen.get((op, name)) == "nonzeros" and split else (ours, theirs)
            picked.append((name, use[1] / use[0]))
            rows.append(theirs / ours)
        if not picked:
            continue
        geo = float(np.exp(np.mean(np.log([r for _, r in picked]))))
        by_rows = float(np.exp(np.mean(np.log(rows))))
        worst = min(picked, key=lambda p: p[1])
        splits = sum(chosen.get((op, n)) == "nonzeros" for n, _ in picked)
        lines.append(f"| {base} | split on {splits} of {len(picked)} | {geo:.2f} | "
                     f"{by_rows:.2f} | {worst[1]:.2f} ({worst[0]}) |")  # fmt: skip
    return lines


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


def build(sm: int) -> dict[str, Any]:
    """Compile the benchmark's kernels for ``cuda:sm_<sm>`` (needs MLIR, not a GPU)."""
    from sparsecomp.formats import parse_layout

    target = f"cuda:sm_{sm}"
    exes = {k: sparsecomp.compile(EXAMPLES / f"{k}.mlir", target) for k in KERNELS[:3]}
    exes["bsr"] = sparsecomp.compile(BSR_SPMM, target)
    exes["bsr3"] = sparsecomp.compile(BSR3_SPMM, target)
    exes["nm"] = sparsecomp.compile(NM_SPMM, target)
    exes["hyb"] = sparsecomp.compile(HYB_SPMV.format(attr=parse_layout("hyb").attr_text()), target)
    # SpMV with its entries shared out evenly between threads (power-law rows)
    exes["split"] = sparsecomp.compile(EXAMPLES / "spmv.mlir", target, gpu_balance="nonzeros")
    exes["split_spmm"] = sparsecomp.compile(EXAMPLES / "spmm.mlir", target, gpu_balance="nonzeros")
    exes["split_sddmm"] = sparsecomp.compile(
        EXAMPLES / "sddmm.mlir", target, gpu_balance="nonzeros"
    )
    return exes


def save(exes: dict[str, Any], directory: Path) -> None:
    """Each executable into ``directory / name`` (:meth:`Executable.save`)."""
    for name, exe in exes.items():
        exe.save(directory / name)


def load(directory: Path, sm: int) -> dict[str, Any]:
    """The executables :func:`save` wrote, checked to be built for ``sm`` (imports no MLIR)."""
    exes = {name: sparsecomp.load(directory / name) for name in KERNELS}
    for name, exe in exes.items():
        if exe.manifest.get("device") != f"cuda:sm_{sm}":
            raise sparsecomp.SparsecompError(
                f"{directory / name} is built for {exe.manifest.get('device')}, "
                f"this GPU is sm_{sm}",
                hint=f"rebuild it: benchmarks/cuda.py --save-executables DIR --sm {sm}",
            )
    return exes


def run(
    reps: int,
    ks: tuple[int, ...],
    quick: bool,
    exes: dict[str, Any] | None = None,
    nm_sizes: tuple[int, ...] = (4096, 8192, 16384),
    chosen: frozenset[str] = frozenset(),
) -> tuple[list[str], list[str]]:
    """The tables' lines and the cases that failed (each failure is also a row and a
    traceback on stderr; the other cases still run). ``exes`` from :func:`load`, else
    compiled here for this GPU; ``nm_sizes``: the 2:4 weights' sizes (``quick``: 4096);
    ``chosen``: the matrices to run (all when empty)."""
    import cupy
    import cupyx.scipy.sparse as csp
    import torch

    sm = cuda.driver().sm
    exes = exes if exes is not None else build(sm)
    spmv, spmm, sddmm = exes["spmv"].spmv, exes["spmm"].spmm, exes["sddmm"].sddmm
    bsr, hyb, split = exes["bsr"].spmm, exes["hyb"].spmv, exes["split"].spmv
    bsr3 = exes["bsr3"].spmm if "bsr3" in exes else None
    split_spmm = exes["split_spmm"].spmm
    split_sddmm = exes["split_sddmm"].sddmm
    sync = cupy.cuda.Device().synchronize
    rng = np.random.default_rng(0)
    specs = matrices.suite(quick=quick)
    if not quick:
        specs.append(matrices.Spec("rmat20", "R-MAT 2^20", lambda: matrices.rmat(20)))
    specs = [spec for spec in specs if not chosen or spec.name in chosen]
    lines = [
        f"sparsecomp on {cuda.driver().name} (sm_{sm}), medians of {reps} calls; "
        "ratio = peer time / ours (> 1: ours faster)",
        "",
        "| op | matrix | ours ms | peer | peer ms | ratio |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    failed: list[str] = []
    times: Times = {}

    def case(op: str, name: str, check: Callable[[], None], ours: Callable[[], Any],
             peer: str, theirs: Callable[[], Any]) -> None:  # fmt: skip
        """Check ``ours`` once, then time it and ``theirs``; a failure becomes its row."""
        try:
            check()
            t_ours, t_theirs = _median(ours, sync, reps), _median(theirs, sync, reps)
        except Exception as exc:  # one case's failure must not hide the others'
            failed.append(f"{op} {name}")
            lines.append(f"| {op} | {name} | failed: {type(exc).__name__}: {exc} | | | |")
            traceback.print_exc()
            return
        lines.append(
            f"| {op} | {name} | {t_ours * 1e3:.3f} | {peer} | {t_theirs * 1e3:.3f} "
            f"| {t_theirs / t_ours:.2f} |"
        )
        times[op, name] = (t_ours, t_theirs)
        print(lines[-1], flush=True)

    chosen: dict[tuple[str, str], str] = {}

    for spec in specs:
        a = spec.build()
        m, n = a.shape
        name = spec.name
        stats = matrix_stats(a)
        for op in ("spmv", "spmm", "sddmm"):
            chosen[op, name] = choose_balance(stats, op)[0]
        ours_a = cuda.to_device(a, spmm.signature.args[0].layout)
        theirs_a = csp.csr_matrix(a)
        x = cupy.asarray(rng.standard_normal(n).astype(np.float32))
        case("spmv", name, lambda: _close(spmv(ours_a, x), (theirs_a @ x).get(), f"spmv {name}"),
             lambda: spmv(ours_a, x), "cuSPARSE", lambda: theirs_a @ x)  # fmt: skip
        case("spmv-split", name,
             lambda: _close(split(ours_a, x), (theirs_a @ x).get(), f"spmv-split {name}"),
             lambda: split(ours_a, x), "cuSPARSE", lambda: theirs_a @ x)  # fmt: skip
        if name in POWER_LAW or name == "rmat20":
            hyb_a = cuda.to_device(a, hyb.signature.args[0].layout)
            y0 = cupy.zeros(m, np.float32)
            case("spmv-hyb", name,
                 lambda: _close(hyb(hyb_a, x, y0), (theirs_a @ x).get(), f"hyb {name}"),
                 lambda: hyb(hyb_a, x, y0), "cuSPARSE", lambda: theirs_a @ x)  # fmt: skip
        for k in ks:
            b = cupy.asarray(rng.standard_normal((n, k)).astype(np.float32))
            case(f"spmm K={k}", name,
                 lambda: _close(spmm(ours_a, b), (theirs_a @ b).get(), f"spmm {name}"),
                 lambda: spmm(ours_a, b), "cuSPARSE", lambda: theirs_a @ b)  # fmt: skip
            if name in GRAPHS or chosen["spmm", name] == "nonzeros":
                case(f"spmm-split K={k}", name,
                     lambda: _close(split_spmm(ours_a, b), (theirs_a @ b).get(), "split"),
                     lambda: split_spmm(ours_a, b), "cuSPARSE", lambda: theirs_a @ b)  # fmt: skip
            if name.startswith("block"):
                blocks = cuda.to_device(a, bsr.signature.args[0].layout)
                case(f"bsr-mma K={k}", name,
                     lambda: _close(bsr(blocks, b), (theirs_a @ b).get(), "bsr", rtol=5e-3),
                     lambda: bsr(blocks, b), "cuSPARSE", lambda: theirs_a @ b)  # fmt: skip
                _against_bsrmm(case, f"bsr-mma K={k}", name, a, 16, b, lambda: bsr(blocks, b))
            if name in NODE_BLOCKED and bsr3 is not None:
                nodes = cuda.to_device(a, bsr3.signature.args[0].layout)
                case(f"bsr3-mma K={k}", name,
                     lambda: _close(bsr3(nodes, b), (theirs_a @ b).get(), "bsr3", rtol=5e-3),
                     lambda: bsr3(nodes, b), "cuSPARSE", lambda: theirs_a @ b)  # fmt: skip
                _against_bsrmm(case, f"bsr3-mma K={k}", name, a, 3, b, lambda: bsr3(nodes, b))
        k = ks[0]
        xs = cupy.asarray(rng.standard_normal((m, k)).astype(np.float32))
        ys = cupy.asarray(rng.standard_normal((n, k)).astype(np.float32))
        t_a = torch.sparse_csr_tensor(
            torch.as_tensor(a.indptr.astype(np.int64)), torch.as_tensor(a.indices.astype(np.int64)),
            torch.as_tensor(a.data), size=a.shape, device="cuda",
        )  # fmt: skip
        tx, tyt = torch.as_tensor(xs, device="cuda"), torch.as_tensor(ys, device="cuda").T

        def check_sddmm() -> None:
            # examples/sddmm.mlir scales by A's values; torch's sampled product does not
            sampled = torch.sparse.sampled_addmm(t_a, tx, tyt, beta=0.0).values().cpu().numpy()
            want = a.data * sampled
            got = sddmm(ours_a, xs, ys)
            _close(got.to_scipy().data if hasattr(got, "to_scipy") else got, want, f"sddmm {name}")

        case(f"sddmm K={k}", name, check_sddmm, lambda: sddmm(ours_a, xs, ys), "cuSPARSE",
             lambda: torch.sparse.sampled_addmm(t_a, tx, tyt, beta=0.0))  # fmt: skip
        if name in GRAPHS or chosen["sddmm", name] == "nonzeros":

            def check_split() -> None:
                sampled = torch.sparse.sampled_addmm(t_a, tx, tyt, beta=0.0).values()
                got = split_sddmm(ours_a, xs, ys)
                _close(got.to_scipy().data if hasattr(got, "to_scipy") else got,
                       a.data * sampled.cpu().numpy(), f"sddmm-split {name}")  # fmt: skip

            case(f"sddmm-split K={k}", name, check_split,
                 lambda: split_sddmm(ours_a, xs, ys), "cuSPARSE",
                 lambda: torch.sparse.sampled_addmm(t_a, tx, tyt, beta=0.0))  # fmt: skip
    lines += _chosen_table(times, chosen, ks)
    try:
        lines += _two_four(exes["nm"], reps, sync, (4096,) if quick else nm_sizes)
    except Exception as exc:  # the f32 tables above still count
        failed.append("2:4")
        lines.append(f"2:4 failed: {type(exc).__name__}: {exc}")
        traceback.print_exc()
    return lines, failed


def _against_bsrmm(case: Callable[..., None], op: str, name: str, a: Any, block: int, b: Any,
                   ours: Callable[[], Any]) -> None:  # fmt: skip
    """A row of ``op`` against cuSPARSE's own BSR SpMM (``bsrmm``, through torch's BSR
    tensor, whose ``@`` on CUDA calls it) on ``a`` in ``block x block`` blocks."""
    import torch

    if a.shape[0] % block or a.shape[1] % block:
        return  # scipy's BSR needs whole blocks; the CSR row above stands alone
    blocked = a.tobsr(blocksize=(block, block))
    theirs = torch.sparse_bsr_tensor(
        torch.as_tensor(blocked.indptr.astype(np.int64)),
        torch.as_tensor(blocked.indices.astype(np.int64)),
        torch.as_tensor(blocked.data), size=a.shape, device="cuda",
    )  # fmt: skip
    dense = torch.as_tensor(b, device="cuda")
    case(op, f"{name} (bsrmm)",
         lambda: _close(ours(), (theirs @ dense).cpu().numpy(), op, rtol=5e-3),
         ours, "cuSPARSE bsrmm", lambda: theirs @ dense)  # fmt: skip


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


__all__ = ["KERNELS", "available", "build", "load", "run", "save"]
