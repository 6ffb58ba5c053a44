"""Sparse tensors built inside a program with narrow index widths: a count that does
not fit the positions is a run-time error with the op's location, never a wrapped
(silently wrong) result.

Both roads are run as a user runs a program with a ``main``
(``python -m sparsecomp.tools.run``, in a subprocess): sparsecomp's own conversion
(``sparse_iter.set_encoding``, ``lowering/convert.py``) and the upstream
sparsifier's (``sparse_tensor.convert``, checked by
``sparse-iter-check-narrow-indices``). 8-bit positions are read unsigned, as
upstream reads them: 255 entries fit, 256 do not.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.usefixtures("private_cache")

PROGRAM = """
#narrow = ENCODING
func.func @main() {
  %d = arith.constant DENSE : tensor<ROWSx16xf32>
  %a = CONVERT
  %x = arith.constant dense<1.0> : tensor<16xf32>
  %z = arith.constant dense<0.0> : tensor<ROWSxf32>
  %y = linalg.matvec ins(%a, %x : tensor<ROWSx16xf32, #narrow>, tensor<16xf32>)
                     outs(%z : tensor<ROWSxf32>) -> tensor<ROWSxf32>
  %c0 = arith.constant 0 : index
  %pad = arith.constant 0.0 : f32
  %v = vector.transfer_read %y[%c0], %pad : tensor<ROWSxf32>, vector<ROWSxf32>
  vector.print %v : vector<ROWSxf32>
  return
}
"""
ROADS = {
    "sparse_iter": (
        "#sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), posWidth = 8}>",
        '"sparse_iter.set_encoding"(%d) : (tensor<ROWSx16xf32>) -> tensor<ROWSx16xf32, #narrow>',
    ),
    "upstream": (
        "#sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed), posWidth = 8 }>",
        "sparse_tensor.convert %d : tensor<ROWSx16xf32> to tensor<ROWSx16xf32, #narrow>",
    ),
}


def _program(road: str, a: np.ndarray) -> str:
    encoding, convert = ROADS[road]
    rows = ", ".join("[" + ", ".join(f"{x:.1f}" for x in row) + "]" for row in a)
    text = PROGRAM.replace("ENCODING", encoding).replace("CONVERT", convert)
    return text.replace("DENSE", f"dense<[{rows}]>").replace("ROWS", str(a.shape[0]))


def _run(tmp_path: Path, program: str) -> subprocess.CompletedProcess[str]:
    src = tmp_path / "prog.mlir"
    src.write_text(program)
    cmd = [sys.executable, "-m", "sparsecomp.tools.run", str(src), "-e", "main"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)


def _matrix(entries: int, seed: int) -> np.ndarray:
    """A 16x16 matrix of ``entries`` nonzeros (random values and places)."""
    rng = np.random.default_rng(seed)
    a = np.zeros(256, np.float32)
    a[rng.choice(256, entries, replace=False)] = rng.integers(1, 9, entries)
    return a.reshape(16, 16)


@pytest.mark.parametrize("road", sorted(ROADS))
@pytest.mark.parametrize("entries", [255, 256])
def test_eight_bit_positions(tmp_path: Path, road: str, entries: int) -> None:
    a = _matrix(entries, seed=entries)
    done = _run(tmp_path, _program(road, a))
    if entries <= 255:
        assert done.returncode == 0, done.stderr[-3000:]
        printed = [float(x) for x in re.findall(r"-?\d+(?:\.\d*)?(?:e[+-]?\d+)?", done.stdout)]
        np.testing.assert_array_equal(printed, a.sum(axis=1))
        return
    line = _program(road, a)[: _program(road, a).index("%a = ")].count("\n") + 1
    for _ in range(3):  # the sparsifier's inserts read wrapped positions: not always alike
        assert done.returncode == 1, (done.stdout[-2000:], done.stderr[-3000:])
        assert f"prog.mlir:{line}:8: error: " in done.stderr
        assert re.search(r"\b256 (entries|nonzeros)\b", done.stderr), done.stderr[-2000:]
        done = _run(tmp_path, _program(road, a))
    assert "8-bit positions" in done.stderr
    assert "declare a wider posWidth" in done.stderr
    assert "( " not in done.stdout  # nothing was printed from wrapped positions
