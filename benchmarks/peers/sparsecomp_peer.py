"""sparsecomp: ``sparsecomp.compile(kernel, target="host")``, in two program forms.

* ``sparsecomp`` (``form="ours"``): ``benchmarks/kernels/*.mlir``, the
  kernels written for sparsecomp (``#sparse_iter.layout`` CSR with 32-bit
  indices, the output filled inside the function). The CSR matrix is packed
  once per case (outside the timed call) into a ``SparseTensor`` with the
  kernel's own layout, so a call only marshals buffers.
* ``sparsecomp-scipy`` (``form="scipy"``): the same kernels called with the
  scipy CSR matrix itself, as ``sparsecomp-up`` is: the same program form as
  ``sparsecomp`` with the upstream form's operand. Where the caller owns the
  index arrays, which may change between calls, every call checks them (the
  kernel's own guard, ``transforms/guard_coordinates.py``): this peer over
  ``sparsecomp`` is what that check costs, and ``sparsecomp-up`` over this
  peer is what the program form costs, operands alike.
* ``sparsecomp-up`` (``form="upstream"``): ``benchmarks/kernels/upstream_form/*.mlir``,
  the same operations written the way MLIR's own sparse tests are
  (``#sparse_tensor.encoding`` without widths, so index-typed; named linalg
  ops; dense outputs as ``outs`` operands the caller passes), called with
  the scipy CSR matrix itself (int32 indices) and a zero output made once
  per case, as a user would. Its first call, untimed, compiles the variant
  for scipy's index widths (``runtime/specialize.py``).
* ``sparsecomp-prepared`` (``form="prepared"``): the kernels written for
  sparsecomp called with ``exe.prepare(A, k=K)``: the layout
  ``sparsecomp.formats.choose`` and a timed sample pick per matrix (CSR,
  BSR, ELL, hyb, ...), packed once per case, its variant compiled on first
  need (SpMV and SpMM: SDDMM's result comes back in the chosen layout; the
  peer's ``about`` lists the layouts other than CSR it chose).
* ``sparsecomp-unsorted`` (``form="unsorted"``): SpGEMM only,
  ``kernels/spgemm_unsorted.mlir``: the same product with a
  ``compressed(nonordered)`` result, its rows' columns in the order found,
  as scipy's and MKL's ``mkl_sparse_spmm`` leave them (``sparsecomp``'s
  SpGEMM orders them; ``mkl-opt-sorted`` is MKL's ordered product).
* ``sparsecomp-up-out`` (``form="upstream-out"``): the upstream form of SpMV
  and SpMM called with ``out=C``, its own outs operand: the kernel
  accumulates ``C += A B`` into the caller's array (``runtime/destinations.py``),
  with no allocation. The first (checked) call starts from the zero C;
  later calls keep accumulating, which costs the same.

One kernel per operation for every matrix and K (dynamic shapes). Compile
times: cold (empty ``SPARSECOMP_CACHE_DIR``, which ``cpu.py`` points at a
fresh temporary directory) and a second ``compile`` of the same file (the
compile cache).
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from peers import Case, Peer, Run, Unavailable

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
#: form -> (peer name, kernel directory)
FORMS = {
    "ours": ("sparsecomp", KERNELS),
    "scipy": ("sparsecomp-scipy", KERNELS),
    "upstream": ("sparsecomp-up", KERNELS / "upstream_form"),
    "upstream-out": ("sparsecomp-up-out", KERNELS / "upstream_form"),
    "prepared": ("sparsecomp-prepared", KERNELS),
    "unsorted": ("sparsecomp-unsorted", KERNELS),
}
#: ops the prepared form runs: those ``exe.prepare`` chooses a layout for whose result
#: is dense (SDDMM's comes back in the chosen layout, which the check does not read)
PREPARED = ("spmv", "spmm")
#: ops whose upstream form takes its dense output as an outs operand
OUTS = ("spmv", "spmm")
_LAYOUT = re.compile(r"#csr = (#sparse_iter\.layout<\{.*?\}>)", re.S)


def _why(err: BaseException) -> str:
    lines = str(err).strip().splitlines() or [type(err).__name__]
    return f"{type(err).__name__}: {lines[0][:160]}"


class SparsecompPeer(Peer):
    name = "sparsecomp"

    def __init__(self, target: str = "host", form: str = "ours") -> None:
        super().__init__()
        import sparsecomp

        self.name, self.kernels = FORMS[form]
        self.form = form
        self.target = target
        self.compile = getattr(sparsecomp, "compile", None)
        self.missing = (
            None
            if self.compile is not None
            else "sparsecomp.compile is not available yet in this checkout"
        )
        self.about = f"sparsecomp {sparsecomp.__version__} compile(target={target!r})"
        if form == "upstream-out":
            self.about += (
                " on upstream-syntax SpMV and SpMM called with the scipy matrix and out=C "
                "(accumulated in place into the outs operand)"
            )
        if form == "scipy":
            self.about += " on the kernels written for sparsecomp, called with the scipy matrix"
        if form == "unsorted":
            self.about += " on SpGEMM with a compressed(nonordered) result (rows unsorted)"
        if form == "prepared":
            self.about += (
                " on the kernels written for sparsecomp, called with exe.prepare(A, k=K), "
                "the layout chosen per matrix"
            )
        self._about = self.about
        #: "<op>[ K=<k>] on <matrix>" -> the layout exe.prepare chose (prepared form)
        self.chosen: dict[str, str] = {}
        if form == "upstream":
            self.about += (
                " on upstream-syntax kernels (index-typed #sparse_tensor.encoding CSR, outs "
                "operands), called with the scipy matrix"
            )
        self._exes: dict[str, Any] = {}

    def _executable(self, op: str) -> Any:
        if op not in self._exes:
            path = self.kernels / (
                f"{op}_unsorted.mlir" if self.form == "unsorted" else f"{op}.mlir"
            )
            try:
                start = time.perf_counter()
                exe = self.compile(path, target=self.target)
                cold = time.perf_counter() - start
                start = time.perf_counter()
                exe = self.compile(path, target=self.target)
                self.compile_times[f"{op} (any shape)"] = (cold, time.perf_counter() - start)
                self._exes[op] = exe
            except Exception as err:  # the compiler is being built: report, do not fail
                self._exes[op] = Unavailable(f"compile failed: {_why(err)}")
        exe = self._exes[op]
        if isinstance(exe, Unavailable):
            raise exe
        return exe

    def _pack(self, case: Case, op: str) -> Any:
        from sparsecomp.formats import SparseTensor, parse_layout

        text = _LAYOUT.search((KERNELS / f"{op}.mlir").read_text())
        if text is None:
            raise Unavailable(f"kernels/{op}.mlir declares no '#csr = #sparse_iter.layout<...>'")
        return SparseTensor.from_scipy(case.a, parse_layout(text.group(1)))

    def prepare(self, case: Case) -> Run:
        if self.missing:
            raise Unavailable(self.missing)
        if self.form == "upstream-out" and case.op not in OUTS:
            raise Unavailable(f"upstream-form {case.op} has no dense outs operand")
        if self.form == "unsorted" and case.op != "spgemm":
            raise Unavailable("the unsorted form is SpGEMM's alone")
        if self.form == "prepared" and case.op not in PREPARED:
            raise Unavailable(f"exe.prepare chooses no layout for {case.op}")
        exe = self._executable(case.op)
        if self.form == "scipy":
            a: Any = case.a
            dense = case.dense
        elif self.form == "prepared":
            try:
                a = exe.prepare(case.a, k=case.k or 64)
            except Exception as err:
                raise Unavailable(f"prepare failed: {_why(err)}") from None
            self.chosen[f"{case.op}{'' if case.k is None else f' K={case.k}'} on {case.matrix}"] = (
                a.layout
            )
            other = [f"{what}: {layout}" for what, layout in self.chosen.items() if layout != "csr"]
            self.about = self._about + (
                f" (not CSR: {'; '.join(other)})" if other else " (CSR throughout)"
            )
            dense = case.dense
        elif self.form not in ("ours", "unsorted"):
            a = case.a
            m = case.a.shape[0]
            outs = {"spmv": (np.zeros(m, np.float32),), "sddmm": (), "spgemm": ()}
            dense = case.dense + outs.get(case.op, (np.zeros((m, case.k or 0), np.float32),))
        else:
            a = self._pack(case, case.op)
            dense = case.dense
        into = dense[-1] if self.form == "upstream-out" else None

        def run() -> Any:
            if into is not None:
                return exe(a, *dense, out=into)
            out = exe(a, a, *dense) if case.op == "spgemm" else exe(a, *dense)
            return out if case.op == "spgemm" else np.asarray(getattr(out, "values", out))

        try:
            start = time.perf_counter()
            run()  # a scipy operand's first call compiles its variants (scipy's widths, out=)
            if self.form not in ("ours", "prepared"):
                what = "scipy's arrays" if self.form == "scipy" else "scipy's widths"
                what += ", out=" if into is not None else ""
                key = f"{case.op}+variant first call ({what})"
                self.compile_times.setdefault(key, (time.perf_counter() - start, None))
            if into is not None:
                into.fill(0)  # the checked call starts from the zero C again
        except Exception as err:
            raise Unavailable(f"call failed: {_why(err)}") from None
        return run
