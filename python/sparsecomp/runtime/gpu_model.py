"""A GPU kernel's time estimated from what the emulator counts, calibrated on a GPU.

The roofline of :class:`~sparsecomp.runtime.profile.Profile` (bytes at the
H100's bandwidth) ranks schedules by traffic alone; the first H100 run showed
what it misses: kernels it called well coalesced ran 4-10x slower than
cuSPARSE because one warp walked a long row while the others had finished,
and because every call pays the host's share. The estimate here adds those:

``seconds = host + launch * launches
+ max(byte * bytes, busiest * busiest_warp_requests) + request * requests``

- ``host``: the call's fixed cost (argument checks, the launch's setup, the
  result's allocation, the synchronize), ``launch`` each launch's;
- ``bytes``: the sectors the kernels move, 32 bytes each (no caches);
- ``busiest_warp_requests``: the global requests of the busiest warp, which
  issues them one after the other: where one row is far longer than the
  rest, it, not the bytes, sets the time (the larger of the two counts);
- ``requests``: every warp request, global and shared (issue slots).

The coefficients (:data:`H100_MODEL`) are fitted by
``benchmarks/cuda_calibrate.py`` to the times measured on an H100 (relative
error, least squares in the logarithm), over SpMV, SpMM and SDDMM on the 19
matrices of the GPU benchmark; docs/benchmarks.md has the fit's rank
correlations. Refit them with every GPU run.

Imports no MLIR.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

#: The estimate's inputs, as :meth:`Profile.model_features` gives them.
FEATURES = ("launches", "bytes", "requests", "busiest")
#: Its coefficients, seconds per unit: fitted by ``benchmarks/cuda_calibrate.py fit``
#: to the H100 run of 2026-11-27 (``benchmarks/data/h100-2026-11-27.csv``).
H100_MODEL: dict[str, float] = {
    "host": 1.13e-4,  # 113 us a call, from Python, synchronized
    "launch": 2.19e-7,
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
    the cases (every coefficient kept positive); scipy's ``least_squares``."""
    from scipy.optimize import least_squares  # type: ignore[import-untyped]

    measured = np.log(np.asarray(seconds, dtype=np.float64))
    # Start from physically plausible magnitudes: 50 us a call, 5 us a launch, the
    # HBM's 3.35 TB/s, 1 us a request of the busiest warp, 1 ns a request.
    start = np.log([5e-5, 5e-6, 1 / 3.35e12, 1e-6, 1e-9])

    def residuals(logs: np.ndarray) -> np.ndarray:
        model = dict(zip(_PARAMETERS, np.exp(logs)))
        return np.log([estimate_seconds(f, model) for f in features]) - measured

    found = least_squares(residuals, start, method="trf", x_scale=1.0, max_nfev=20000)
    return {name: float(v) for name, v in zip(_PARAMETERS, np.exp(found.x))}
