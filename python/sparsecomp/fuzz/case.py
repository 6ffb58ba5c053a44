"""One fuzz case: program, data and expected result from ``(seed, index)``, and the comparison."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sparsecomp.fuzz import data, emit, programs, reference

#: relative tolerance per dtype (sums are reassociated; printMemref prints 6 digits)
RTOL = {"f16": 2e-2, "f32": 1e-4, "f64": 1e-9, "i32": 0.0, "i64": 0.0}
PRINTED_RTOL = 2e-5


@dataclass
class Case:
    seed: int
    index: int
    prog: programs.Program
    arrays: dict[str, np.ndarray]
    expected: np.ndarray

    @property
    def kernel(self) -> str:
        return emit.kernel(self.prog)

    @property
    def upstream_only(self) -> bool:
        """Every encoding is ``#sparse_tensor`` (so ``mlir-opt --sparsifier`` can run it)."""
        return all(e.upstream for e in self.prog.encodings)


def make_case(seed: int, index: int) -> Case:
    rng = np.random.default_rng([seed, index])
    prog = programs.generate(rng)
    arrays = data.inputs(rng, prog)
    return Case(seed, index, prog, arrays, reference.evaluate(prog, arrays))


def mismatch(case: Case, got: object, printed: bool = False) -> str:
    """'' when ``got`` matches the reference, else a one-line description."""
    want = case.expected
    try:
        arr = np.asarray(got)
    except Exception as exc:
        return f"result is not an array: {type(got).__name__}: {exc}"
    if arr.shape != want.shape:
        return f"shape {arr.shape}, expected {want.shape}"
    if arr.size == 0:
        return ""
    rtol = RTOL[case.prog.dtype]
    if printed:
        rtol = max(rtol, PRINTED_RTOL)
    w = want.astype(np.float64)
    g = arr.astype(np.float64)
    finite = np.isfinite(w)
    scale = max(1.0, float(np.max(np.abs(w[finite]), initial=0.0)))
    close = np.abs(g - w) <= rtol * (np.abs(w) + scale)
    close |= (g == w) | (np.isnan(g) & np.isnan(w))
    if close.all():
        return ""
    bad = np.argwhere(~close)
    first = tuple(int(i) for i in bad[0])
    return (f"{len(bad)} of {arr.size} elements differ; at {first}: got {g[first]!r}, "
            f"expected {w[first]!r}")  # fmt: skip
