"""Choosing a layout by timing the cost model's best few on a sample of the matrix.

The cost model (:mod:`sparsecomp.formats.choice`) ranks the candidate
layouts from a matrix's statistics in milliseconds, but a linear model fitted
on a few synthetic matrices can be wrong by 2x and more on matrices unlike
them: on a real circuit matrix (rajat01) it predicted ``bsr:2x2`` 1.4x
faster than CSR for SpMM, which ran 6x slower. ``exe.prepare`` on a CPU
executable therefore measures before it commits (as Triton's autotuner
does, on a sample): it takes CSR and the model's :data:`SHORTLIST` best
other candidates, packs a sample of the matrix (:func:`sample_rows`: row
blocks spread over the whole matrix, :data:`SAMPLE_NNZ` nonzeros in all, or
the matrix itself when smaller) in each, calls each layout's variant on it
with operands of the call's shape (:data:`REPS` rounds of one call per
layout in turn, after a warm-up round) and keeps the fastest in median
time; another layout must beat CSR's median by :data:`MARGIN`, so that one
noisy call does not make the choice. Where the call's dense operands would exceed
:data:`OPERAND_BYTES` (a sample keeps every column, so SpMM's dense operand
is the call's own), building them would take the decision's whole budget:
the model decides alone, and ``why`` says so.

Every variant is compiled (or loaded from the compile cache) and called
once before any timing: the decision's own time is the model's plus packing
and timing the sample, tens of milliseconds; compiling a layout's variant
(and its variant for the call's ``k``) happens once per program and
machine.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from sparsecomp.errors import SparsecompError
from sparsecomp.formats.choice import Choice
from sparsecomp.formats.tensor import SparseTensor
from sparsecomp.runtime.abi import Signature

#: Nonzeros of the sample the shortlist is timed on (about; whole rows).
SAMPLE_NNZ = 120_000
#: Multiply-adds of one call on the sample, at most (``nonzeros * k``): SpMM's and
#: SDDMM's samples shrink as ``k`` grows, so that a call stays near a millisecond.
SAMPLE_WORK = 8_000_000
#: Bytes of the call's dense operands, at most: a sample keeps every column, so SpMM's
#: dense operand is as large as the call's; beyond this, building it would take most
#: of the decision's budget, and the model decides alone.
OPERAND_BYTES = 32 << 20
#: Rows of the sample, at most: a matrix of few nonzeros over millions of rows was
#: timed whole, each call writing a rows x k result (5M x 64: 1.3 GB, 4 s to decide).
SAMPLE_ROWS = 1 << 16
#: Row blocks the sample is made of (spread evenly over the matrix's rows), each a
#: multiple of :data:`ALIGN` rows long starting at such a row, so that the dense blocks
#: a BSR layout would store are whole in the sample (48: blocks of 2, 3, 4, 6, 8 and 16).
SAMPLE_BLOCKS = 4
ALIGN = 48
#: Rows a run grows to while it holds at most twice its share of the nonzeros: a run
#: of a few rows would leave a BSR layout a handful of block rows to share between
#: threads, unlike the whole matrix.
MIN_RUN = 2 * ALIGN
#: Candidates besides CSR that are timed: the model's best.
SHORTLIST = 3
#: Timed rounds (a call of every layout each, in turn) after a warm-up round; a layout
#: whose warm-up took :data:`LOSING` times CSR's is not timed further.
REPS = 3
LOSING = 2.0
#: How much faster than CSR another layout must run on the sample to be chosen, in the
#: median of its timed calls (one noisy call does not decide).
MARGIN = 0.10

LOG = logging.getLogger("sparsecomp")


def sample_rows(
    A: Any, budget: int = SAMPLE_NNZ, blocks: int = SAMPLE_BLOCKS, align: int = ALIGN
) -> Any:
    """``A`` (CSR) itself if it has at most ``budget`` nonzeros and
    :data:`SAMPLE_ROWS` rows, else ``blocks`` runs of consecutive rows, stacked: each
    starts at a multiple of ``align`` rows, evenly spread over the matrix, and takes
    whole ``align``-row groups until it holds ``budget / blocks`` nonzeros (or
    ``SAMPLE_ROWS / blocks`` rows), then more, up to :data:`MIN_RUN` rows (or a
    ``blocks``-th of the matrix) as long as it holds at most twice that. Local structure
    (blocks, bands, row lengths) is kept, and every column."""
    import scipy.sparse as sp  # type: ignore[import-untyped]

    A = sp.csr_matrix(A)
    m = A.shape[0]
    if (A.nnz <= budget and m <= SAMPLE_ROWS) or m <= blocks * align:
        return A
    most = max(align, SAMPLE_ROWS // blocks // align * align)  # rows a run takes at most
    indptr = A.indptr
    share = budget // blocks
    pieces = []
    for start in np.linspace(0, m, blocks, endpoint=False).astype(np.int64) // align * align:
        start = int(start)
        end = max(int(np.searchsorted(indptr, indptr[start] + share)), start + 1)
        end += (start - end) % align  # whole groups of align rows
        end = min(end, start + most)
        if end - start < MIN_RUN:  # longer, up to twice the share (in whole groups)
            longest = int(np.searchsorted(indptr, indptr[start] + 2 * share, side="right"))
            end = max(end, start + min(MIN_RUN, m // blocks, longest - start) // align * align)
        pieces.append(A[start : min(m, end)])
    return sp.vstack(pieces, format="csr")


def operand_shapes(
    signature: Signature, argument: int, shape: tuple[int, ...], k: int
) -> list[tuple[int, ...] | None]:
    """The shape of every other argument of a call whose sparse argument has ``shape``:
    sizes the sparse one shares as it says, other sizes ``k`` (None: the sparse one, or
    a scalar)."""
    sparse = signature.args[argument]
    sizes = {d: size for d, size in zip(sparse.shape, shape, strict=True) if isinstance(d, str)}
    return [
        None
        if i == argument or spec.kind == "scalar"
        else tuple(
            d if isinstance(d, int) else sizes.get(d, k) if isinstance(d, str) else k
            for d in spec.shape
        )
        for i, spec in enumerate(signature.args)
    ]


def call_args(signature: Signature, argument: int, shape: tuple[int, ...], k: int) -> list[Any]:
    """Arguments of one call of ``signature`` whose sparse argument (left as None) has
    ``shape``: dense operands of :func:`operand_shapes` holding ones."""
    args: list[Any] = []
    for spec, dims in zip(
        signature.args, operand_shapes(signature, argument, shape, k), strict=True
    ):
        if spec.kind == "scalar":
            args.append(spec.dtype.type(1))
        else:
            args.append(None if dims is None else np.ones(dims, dtype=spec.dtype))
    return args


def _packed(sample: Any, name: str, dtype: np.dtype[Any]) -> SparseTensor:
    """``sample`` in layout ``name`` with values of ``dtype`` (scipy holds no float16)."""
    if sample.dtype == dtype:
        return SparseTensor.from_scipy(sample, name)
    coo = sample.tocoo()
    coords = np.vstack([coo.row, coo.col])
    return SparseTensor.from_coo(coo.shape, coords, coo.data.astype(dtype), name)


def _time(variant: Callable[..., Any], args: list[Any]) -> float:
    """Seconds of one call."""
    start = time.perf_counter()
    variant(*args)
    return time.perf_counter() - start


def uncompiled(name: str, error: SparsecompError) -> str:
    """A choice's words for layout ``name``, which the kernel has no form for (the
    compile ``error`` logged: forcing the layout shows it too)."""
    LOG.info("sparsecomp: %s: %s", name, error)
    return f"{name} does not compile for this kernel (forced, it says why)"


def tournament(
    signature: Signature,
    argument: int,
    A: Any,
    choice: Choice,
    k: int,
    variant_for: Callable[[str], Any],
) -> Choice:
    """``choice`` confirmed or overruled by timing CSR and the model's best others on a
    sample of ``A`` (see the module); the result's ``measured`` holds the times, its
    ``seconds`` the whole decision (model, packing and timing; not compiling)."""
    others = [name for name in choice.estimates if name != "csr"][:SHORTLIST]
    if not others:
        return choice
    shortlist = ["csr", *others]
    start = time.perf_counter()
    dtype = signature.args[argument].dtype
    budget = min(SAMPLE_NNZ, SAMPLE_WORK // max(k, 1))
    sample = sample_rows(A, budget)
    shapes = operand_shapes(signature, argument, sample.shape, k)
    size = sum(int(np.prod(s)) * dtype.itemsize for s in shapes if s is not None)
    size += sample.shape[0] * max(k, 1) * dtype.itemsize  # a row-wise result (SpMM's C)
    if size > OPERAND_BYTES:
        why = f"{choice.why}; not timed: the call's dense operands ({size >> 20} MB) are too large"
        seconds = choice.seconds + time.perf_counter() - start
        return dataclasses.replace(choice, why=why, seconds=seconds)
    compiling = time.perf_counter()
    variants, failed = {}, []
    for name in shortlist:  # compiled before timing
        try:
            variants[name] = variant_for(name)
        except SparsecompError as error:
            if name == "csr":  # the kernel's own layout: its error is the caller's
                raise
            failed.append(uncompiled(name, error))
    start += time.perf_counter() - compiling
    if failed:  # a complex SpMV has no composable form (hyb, bsr+csr): the others race
        shortlist = [name for name in shortlist if name in variants]
        choice = dataclasses.replace(choice, why=f"{choice.why}; {'; '.join(failed)}")
        if choice.layout not in variants:
            choice = dataclasses.replace(choice, layout="csr")
        if len(shortlist) == 1:
            seconds = choice.seconds + time.perf_counter() - start
            return dataclasses.replace(choice, seconds=seconds)
    tensors = {name: _packed(sample, name, dtype) for name in shortlist}
    args = call_args(signature, argument, sample.shape, k)

    def call(name: str) -> float:
        """Seconds of one call of ``name``'s variant on the sample."""
        args[argument] = tensors[name]
        return _time(variants[name], args)

    readying = time.perf_counter()
    for name in shortlist:  # a first call may load the variant for this k: not timed
        call(name)
    start += time.perf_counter() - readying
    warm = {name: call(name) for name in shortlist}  # the warm-up round
    alive = [name for name in shortlist if warm[name] <= LOSING * warm["csr"]]
    times: dict[str, list[float]] = {name: [] for name in alive}
    for _ in range(REPS):  # round-robin, so that the machine's drift hits all alike
        for name in alive:
            times[name].append(call(name))
    measured = {name: float(np.median(times[name])) if name in times else warm[name]
                for name in shortlist}  # fmt: skip
    fastest = min(measured, key=measured.__getitem__)
    if fastest != "csr" and not measured[fastest] < (1 - MARGIN) * measured["csr"]:
        fastest = "csr"
    timings = ", ".join(f"{name} {seconds * 1e3:.3g} ms" for name, seconds in measured.items())
    why = f"{choice.why}; timed on {sample.nnz} nonzeros: {timings}"
    if fastest != choice.layout:
        why += f" (the model's pick was {choice.layout})"
    seconds = choice.seconds + time.perf_counter() - start
    return dataclasses.replace(choice, layout=fastest, why=why, seconds=seconds, measured=measured)
