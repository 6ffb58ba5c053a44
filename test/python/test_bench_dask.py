"""benchmarks/dask_cluster.py --quick: 1 and 2 workers, the bytes check, the model, the figure."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("distributed")


def test_dask_cluster_quick(repo, tmp_path):
    png = tmp_path / "dask.png"
    proc = subprocess.run(
        [sys.executable, str(repo / "benchmarks" / "dask_cluster.py"), "--quick", "--plot",
         str(png)],
        capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert "bytes per PageRank iteration: as the partitioning implies" in proc.stdout
    rows = [line for line in proc.stdout.splitlines() if line.startswith(("| 1 |", "| 2 |"))]
    assert len(rows) == 3  # two measured, and the model's 1 worker
    assert "| 128 |" in proc.stdout
    assert png.stat().st_size > 10_000
