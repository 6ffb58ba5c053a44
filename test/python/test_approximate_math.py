"""``sparse-iter-approximate-math``: f32 ``erf`` as arithmetic, compiled and run.

The approximation is checked against ``scipy.special.erf`` (in f64) over a
dense grid, its edges (0, -0, tiny, huge, infinities, NaN) and random values
(hypothesis): within 5e-7 absolutely and relatively, about 4 ulp.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy.special import erf as scipy_erf

import sparsecomp

TOLERANCE = 5e-7

ERF = """
func.func @erf_of(%x: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?xf32>
  %e = tensor.empty(%n) : tensor<?xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}
      ins(%x : tensor<?xf32>) outs(%e : tensor<?xf32>) {
    ^bb0(%a: f32, %o: f32):
      %r = math.erf %a : f32
      linalg.yield %r : f32
  } -> tensor<?xf32>
  return %y : tensor<?xf32>
}
"""


def erf_of(x: np.ndarray) -> np.ndarray:
    return sparsecomp.compile(ERF).erf_of(x)


def _check(x: np.ndarray) -> None:
    got = erf_of(x)
    ref = scipy_erf(x.astype(np.float64))
    finite = ~np.isnan(ref)
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    err = np.abs(got[finite].astype(np.float64) - ref[finite])
    assert err.max(initial=0.0) <= TOLERANCE, x[finite][np.argmax(err)]
    rel = err / np.maximum(np.abs(ref[finite]), np.finfo(np.float32).tiny)
    assert rel.max(initial=0.0) <= TOLERANCE, x[finite][np.argmax(rel)]


def test_erf_on_a_grid_and_its_edges() -> None:
    grid = np.linspace(-6, 6, 200_001, dtype=np.float32)
    tiny = np.geomspace(1e-30, 1, 10_000).astype(np.float32)
    edges = np.array([0.0, -0.0, 4.0, -4.0, 3.9, 1e30, -1e30, np.inf, -np.inf, np.nan], np.float32)
    x = np.concatenate([grid, tiny, -tiny, edges])
    _check(x)
    got = erf_of(edges)
    assert got[1] == 0
    assert np.signbit(got[1])  # -0.0 stays -0.0
    assert list(got[6:9]) == [-1.0, 1.0, -1.0]


@settings(max_examples=25, deadline=None)
@given(
    hnp.arrays(
        np.float32,
        st.integers(1, 300),
        elements=st.floats(-1e6, 1e6, width=32, allow_nan=False),
    )
)
def test_erf_on_random_values(x: np.ndarray) -> None:
    _check(x)


def test_no_libm_call_is_left() -> None:
    """The compiled kernel calls no ``erff`` (each lane would be a call)."""
    exe = sparsecomp.compile(
        """
        func.func @erf_f32(%x: vector<16xf32>) -> vector<16xf32> {
          %e = math.erf %x : vector<16xf32>
          return %e : vector<16xf32>
        }
        func.func @erf_f64(%x: f64) -> f64 {
          %e = math.erf %x : f64
          return %e : f64
        }
        """
    )
    ll = (exe.directory / "kernel.ll").read_text()
    assert "@erff(" not in ll
    assert "@erf(" in ll  # f64 keeps libm's
