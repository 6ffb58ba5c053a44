"""A GPU kernel's time estimated from what the emulator counts, calibrated on a GPU.

The roofline of :class:`~sparsecomp.runtime.profile.Profile` (bytes at the
H100's bandwidth) ranks schedules by traffic alone; the first H100 run showed
what it misses: kernels it called well coalesced ran 4-10x slower than
cuSPARSE because one warp walked a long row while the others had finished,
and because every call pays the host's share. The estimate here adds those:

``seconds = host + launch * launches
+ max(byte * bytes, busiest * busiest_warp_requests) + request * requests``

- ``host``: the call's fixed cost (argument checks, the result's
  allocation, the synchronize), ``launch`` each launch's (:data:`LAUNCH`,
  not fitted);
- ``bytes``: the sectors the kernels move, 32 bytes each (no caches);
- ``busiest_warp_requests``: the global requests of the busiest warp, which
  issues them one after the other: where one row is far longer than the
  rest, it, not the bytes, sets the time (the larger of the two counts);
- ``requests``: every warp request, global and shared (issue slots).

The other coefficients (:data:`H100_MODEL`) are fitted by
``benchmarks/cuda_calibrate.py`` to the times measured on an H100 (relative
error, least squares in the logarithm), over SpMV, SpMM and SDDMM on the 19
matrices of the GPU benchmark; docs/benchmarks.md has the fit's rank
correlations. Refit them with every GPU run.

Imports no MLIR.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np

#: A launch's own cost, seconds: not fitted (every case of the H100 run has one
#: launch, so the data cannot tell it from the call's), a kernel launch's usual latency.
LAUNCH = 5e-6
#: The estimate's inputs, as :meth:`Profile.model_features` gives them.
FEATURES = ("launches", "bytes", "requests", "busiest")
#: Its coefficients, seconds per unit: fitted by ``benchmarks/cuda_calibrate.py fit``
#: to the H100 run of 2026-11-27 (``benchmarks/data/h100-2026-11-27.csv``).
H100_MODEL: dict[str, float] = {
    "host": 1.079e-4,  # 108 us a call, from Python, synchronized
    "launch": LAUNCH,
    "byte": 1.78e-13,  # 5.6 TB/s: more than HBM's 3.35, as L2 serves re-reads
    "busiest": 1.70e-7,  # 170 ns a request in one warp's sequence
    "request": 7.97e-12,
}
_PARAMETERS = tuple(H100_MODEL)


def estimate_seconds(
    features: Mapping[str, float], model: Mapping[str, float] = H100_MODEL
) -> float:
    """The estimated time of one call with these counts (see the module's formula)."""
    f, m = features, model
    return (
        m["host"]
        + m["launch"] * f["launches"]
        + max(m["byte"] * f["bytes"], m["busiest"] * f["busiest"])
        + m["request"] * f["requests"]
    )


def fit(features: Sequence[Mapping[str, float]], seconds: Sequence[float]) -> dict[str, float]:
    """Coefficients for :func:`estimate_seconds` that minimize the squared log error over
    the cases (every coefficient kept positive; ``launch`` held at :data:`LAUNCH`);
    scipy's ``least_squares``, from nine starts (the max makes the error's surface
    kinked, with local minima), the best kept."""
    from scipy.optimize import least_squares  # type: ignore[import-untyped]

    measured = np.log(np.asarray(seconds, dtype=np.float64))
    fitted = [name for name in _PARAMETERS if name != "launch"]

    def model_of(logs: np.ndarray) -> dict[str, float]:
        # clipped: a trial step may go far (seconds per unit between e^-100 and e^10)
        return {"launch": LAUNCH, **dict(zip(fitted, np.exp(np.clip(logs, -100.0, 10.0))))}

    def residuals(logs: np.ndarray) -> np.ndarray:
        model = model_of(logs)
        return np.log([estimate_seconds(f, model) for f in features]) - measured

    best = None
    # Physically plausible magnitudes: 50 us a call, the HBM's 3.35 TB/s, 1 us a
    # request of the busiest warp, 1 ns a request; the two terms of the max also 10x
    # either way.
    for byte, busiest in itertools.product((0.1, 1.0, 10.0), repeat=2):
        start = np.log([5e-5, byte / 3.35e12, busiest * 1e-6, 1e-9])
        found = least_squares(residuals, start, method="trf", ftol=1e-12, xtol=1e-12,
                              gtol=1e-12, max_nfev=20000)  # fmt: skip
        if best is None or found.cost < best.cost:
            best = found
    assert best is not None
    return {name: float(v) for name, v in model_of(best.x).items()}
