"""A cached program's variants (a new K, scipy's index arrays, a layout) load in a new
process without MLIR: the first derivation records which kernel it was."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

#: A new process's first call: scipy's int32 index arrays and a dense B whose width
#: the kernel makes static (two variants of the cached program), with importing MLIR
#: blocked where the script is given "blocked".
CALL = """
import sys
if sys.argv[2] == "blocked":
    sys.modules["mlir"] = None  # importing MLIR (any of its modules) raises ImportError
import numpy as np
import scipy.sparse as sp
import sparsecomp
exe = sparsecomp.compile(sys.argv[1])
a = sp.random(50, 40, density=0.1, format="csr", dtype=np.float32, random_state=1)
b = np.arange(40 * 7, dtype=np.float32).reshape(40, 7)
got = exe(a, b)
np.testing.assert_allclose(got, a @ b, rtol=1e-5)
print(not [m for m, v in sys.modules.items() if m.split(".")[0] == "mlir" and v is not None])
"""


def _call(cache: Path, mode: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SPARSECOMP_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-c", CALL, str(EXAMPLES / "spmm.mlir"), mode],
                          capture_output=True, text=True, env=env, timeout=600,
                          check=False)  # fmt: skip


def test_a_variant_built_before_loads_without_mlir(tmp_path: Path) -> None:
    first = _call(tmp_path, "free")  # builds the program and its variant, records it
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stdout.split() == ["False"]  # deriving the variant parsed the program
    memos = list((tmp_path / "kernels" / ".variants").glob("*.json"))
    assert memos
    again = _call(tmp_path, "blocked")
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.split() == ["True"]


@pytest.mark.parametrize("damage", ["kernel removed", "memo unreadable"])
def test_a_stale_memo_derives_the_variant_again(tmp_path: Path, damage: str) -> None:
    first = _call(tmp_path, "free")
    assert first.returncode == 0, first.stderr[-3000:]
    memos = list((tmp_path / "kernels" / ".variants").glob("*.json"))
    if damage == "kernel removed":
        import json

        for memo in memos:
            shutil.rmtree(tmp_path / "kernels" / json.loads(memo.read_text())["key"])
    else:
        for memo in memos:
            memo.write_text("{not json")
    again = _call(tmp_path, "free")  # derived and built again, the result still right
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.split() == ["False"]
    third = _call(tmp_path, "blocked")  # and recorded again
    assert third.returncode == 0, third.stderr[-3000:]
    assert third.stdout.split() == ["True"]


SPMM_INTO_CSR = """
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed)}>
func.func @spmm(%A: tensor<?x?xf32, #csr>, %B: tensor<?x?xf32>) -> tensor<?x?xf32, #csr> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %A, %c0 : tensor<?x?xf32, #csr>
  %k = tensor.dim %B, %c1 : tensor<?x?xf32>
  %e = tensor.empty(%m, %k) : tensor<?x?xf32, #csr>
  %r = linalg.matmul ins(%A, %B : tensor<?x?xf32, #csr>, tensor<?x?xf32>)
                     outs(%e : tensor<?x?xf32, #csr>) -> tensor<?x?xf32, #csr>
  return %r : tensor<?x?xf32, #csr>
}
"""


def test_a_static_width_variant_of_a_product_into_csr(caplog) -> None:
    """SpMM into a CSR result called with a narrow B: its static-K variant compiles (MLIR's
    sparsifier refused a loop sized 3 by B and ? by the result, "unexpected conversion
    mismatch": a warning, and every such call ran the dynamic kernel)."""
    import logging

    import numpy as np
    import scipy.sparse as sp

    import sparsecomp

    exe = sparsecomp.compile(SPMM_INTO_CSR)
    a = sp.random(5, 6, density=0.4, format="csr", dtype=np.float32, random_state=1)
    b = np.arange(18, dtype=np.float32).reshape(6, 3)
    with caplog.at_level(logging.INFO, logger="sparsecomp"):
        got = exe(a, b)
    np.testing.assert_allclose(got.to_dense(), a @ b, rtol=1e-6)
    said = [r.getMessage() for r in caplog.records]
    assert not [m for m in said if "no variant" in m], said
    assert [m for m in said if "compiled its variant for the sizes" in m], said
