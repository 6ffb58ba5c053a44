"""Bodies that read a dense output, compiled by the upstream sparsifier.

The sparsifier keeps the output where the sparse inputs are zero, which is
right only for ``out + f(x)``; ``sparse-iter-densify-unsparsifiable`` gives
it dense inputs otherwise. Found by ``scripts/fuzz`` (``out * x * y`` over
an all-zero vector came back as ``out``).
"""

from __future__ import annotations

import numpy as np
import pytest

import sparsecomp
from sparsecomp.formats import SparseTensor

#: The same layout as sparse_iter writes it, for packing the argument.
LOOSE = "#sparse_iter.layout<{map = (i) -> (i : loose_compressed)}>"
SV = "#sparse_tensor.encoding<{ map = (i) -> (i : loose_compressed) }>"
#: body text over %x, %y (inputs) and %o (output) -> numpy of x, y, o
BODIES = {
    "o*x*y": ("%t = arith.mulf %x, %y : f64\n    %r = arith.mulf %o, %t : f64",
              lambda x, y, o: o * x * y),
    "o-x": ("%r = arith.subf %o, %x : f64", lambda x, y, o: o - x),
    "max(o,y)": ("%r = arith.maximumf %o, %y : f64", lambda x, y, o: np.maximum(o, y)),
    "o+x*y": ("%t = arith.mulf %x, %y : f64\n    %r = arith.addf %o, %t : f64",
              lambda x, y, o: o + x * y),
}  # fmt: skip


def program(body: str) -> str:
    return f"""
func.func @k(%a: tensor<?xf64, {SV}>, %b: tensor<?xf64>, %c: tensor<?xf64>) -> tensor<?xf64>
    attributes {{sparse_iter.upstream = "asked by the test"}} {{
  %r = linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>,
                                         affine_map<(i) -> (i)>],
                        iterator_types = ["parallel"]}}
      ins(%a, %b : tensor<?xf64, {SV}>, tensor<?xf64>) outs(%c : tensor<?xf64>) {{
  ^bb0(%x: f64, %y: f64, %o: f64):
    {body}
    linalg.yield %r : f64
  }} -> tensor<?xf64>
  return %r : tensor<?xf64>
}}"""


@pytest.mark.parametrize("name", BODIES)
def test_output_reading_bodies_match_numpy(private_cache: None, name: str) -> None:
    body, reference = BODIES[name]
    exe = sparsecomp.compile(program(body))
    rng = np.random.default_rng(3)
    for density in (0.0, 0.3, 1.0):
        x = rng.integers(-4, 5, 9) * (rng.random(9) < density) * 0.5
        y, o = rng.integers(-4, 5, 9) * 0.25, rng.integers(-4, 5, 9) * 0.75
        got = exe(SparseTensor.from_dense(x, LOOSE), y, o)
        np.testing.assert_array_equal(got, reference(x, y, o))
