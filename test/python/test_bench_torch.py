"""benchmarks/torch_bert.py --quick: a small BertLayer, every peer checked against dense."""

from __future__ import annotations

import json
import subprocess
import sys


def test_torch_bert_quick(repo, tmp_path):
    raw, png = tmp_path / "bert.json", tmp_path / "bert.png"
    proc = subprocess.run(
        [
            sys.executable,
            str(repo / "benchmarks" / "torch_bert.py"),
            "--quick",
            "--json",
            str(raw),
            "--plot",
            str(png),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "### Forward + backward" in proc.stdout
    assert "WRONG" not in proc.stdout
    rows = json.loads(raw.read_text())
    kinds = {r["sparsifier"].split()[0] for r in rows}
    assert kinds == {"random", "n:m", "n:m:g"}
    for row in rows:
        for what in ("fwd", "fwd+bwd"):
            seconds, note = row["cells"]["sparsecomp"][what]
            assert seconds is not None, (row["sparsifier"], what, note)
            assert seconds > 0
    assert png.stat().st_size > 10_000
