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
    saved = json.loads(raw.read_text())
    assert "batch 2, sequence 16" in saved["setting"]  # the run's own, kept with it
    rows = saved["rows"]
    kinds = {r["sparsifier"].split()[0] for r in rows}
    assert kinds == {"random", "n:m", "n:m:g"}
    for row in rows:
        for what in ("fwd", "fwd+bwd"):
            seconds, note = row["cells"]["sparsecomp"][what]
            assert seconds is not None, (row["sparsifier"], what, note)
            assert seconds > 0
    assert png.stat().st_size > 10_000
    again = subprocess.run(
        [sys.executable, str(repo / "benchmarks" / "torch_bert.py"), "--from-json", str(raw)],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr[-4000:]
    assert "batch 2, sequence 16, hidden 64, FFN 128" in again.stdout  # not the defaults


def test_gpu_bert_layer_is_huggingfaces(repo):
    """benchmarks/torch_bert_gpu.py's BertLayer (written out for the GPU's machine, which
    has no transformers) computes what HuggingFace's does with the same weights."""
    import torch

    sys.path.insert(0, str(repo / "benchmarks"))
    import torch_bert as tb
    import torch_bert_gpu as gpu

    hf = tb.bert_layer(0, 64, 4, 128)
    ours = gpu.BertLayer(64, 4, 128).eval()
    ours.load_state_dict(hf.state_dict())  # same module names: every key matches
    x = torch.randn(2, 7, 64)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), tb.first(hf(x)), rtol=1e-5, atol=1e-5)


def test_gpu_bert_kernels_load_where_mlir_is_not(repo, tmp_path):
    """--save compiles the GPU kernels here; a process without MLIR loads them in place
    of a compile, as the GPU's machine does."""
    script = repo / "benchmarks" / "torch_bert_gpu.py"
    proc = subprocess.run([sys.executable, str(script), "--save", str(tmp_path), "--sm", "90"],
                          capture_output=True, text=True, check=False, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    probe = f"""
import sys
sys.modules["mlir"] = None
sys.path.insert(0, {str(repo / "benchmarks")!r})
import pathlib, torch, torch_bert_gpu as gpu
from sparsecomp.torch import device, kernels
device.target = lambda d: "cuda:sm_90"
gpu.load(pathlib.Path({str(tmp_path)!r}))
for _, _, layout in gpu.CONFIGS:  # found where a compile would run (MLIR is blocked)
    for op in gpu.OPS:
        fn = kernels.kernel(op, torch.float32, gpu.attr(layout), "cuda:sm_90")
        assert fn.name == op, fn
print(sorted((k[0], k[2].split("map = ")[1][:40]) for k in kernels._variants))
"""
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=False, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.count("linear_bias") == 6
