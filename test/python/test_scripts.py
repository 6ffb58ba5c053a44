"""The benchmark and figure scripts run (small sizes), so they cannot rot unnoticed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from script_corpus import import_file


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, check=False)


def test_formats_benchmark_runs(repo):
    proc = run(str(repo / "benchmarks" / "formats.py"), "--nnz", "20000", "--repeat", "1")
    assert proc.returncode == 0, proc.stderr
    rows = [ln for ln in proc.stdout.splitlines() if ln and not ln.startswith(("#", "matrix"))]
    layouts = {ln.split()[2] for ln in rows}
    assert {"csr", "csc", "ell", "hyb", "bsr:16x16", "bsr+csr:16x16"} <= layouts
    ratios = [float(ln.split()[-1]) for ln in rows if len(ln.split()) == 6]
    assert ratios
    assert all(r > 0 for r in ratios)


def test_hyb_figure_is_drawn(repo, tmp_path):
    out = tmp_path / "hyb.png"
    proc = run(str(repo / "docs" / "figures" / "make_hyb_figure.py"), str(out))
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_formats_doc_examples_are_fresh(repo):
    module = import_file(repo / "docs" / "figures" / "layout_examples.py")
    doc = (repo / "docs" / "formats.md").read_text()
    assert module.render() in doc, "stale: python docs/figures/layout_examples.py --write"
    assert "figures/hyb.png" in doc


def test_cuda_stages_doc_is_fresh(repo):
    """docs/cuda-stages.md is what the compiler prints today, stage by stage."""
    module = import_file(repo / "docs" / "figures" / "cuda_stages.py")
    doc = (repo / "docs" / "cuda-stages.md").read_text()
    assert module.render() == doc, "stale: python docs/figures/cuda_stages.py --write"


def test_cpu_figure_is_fresh(repo, tmp_path):
    """docs/figures/cpu_ratios.png was drawn from the run docs/benchmarks.md holds."""
    from PIL import Image

    path = repo / "docs" / "figures" / "make_cpu_figure.py"
    module = import_file(path)
    tables = module.cpu_tables((repo / "docs" / "benchmarks.md").read_text())
    assert {t.split(",")[0] for t in tables} >= {
        "SpMV y = A x",
        "SpMM C = A B",
        "SDDMM S .* (X Y^T)",
    }
    with Image.open(repo / "docs" / "figures" / "cpu_ratios.png") as image:
        drawn = image.info.get("Description")
    assert drawn == module.fingerprint(tables), "run make_cpu_figure.py after a new CPU run"
    out = tmp_path / "cpu.png"
    proc = run(str(path), str(repo / "docs" / "benchmarks.md"), str(out))
    assert proc.returncode == 0, proc.stderr
    with Image.open(out) as image:
        assert image.info.get("Description") == drawn


def test_stages_figure_is_fresh(repo):
    """docs/design.md's table of stages matches a fresh compile (operation counts, lines,
    library size) and docs/figures/stages.png was drawn from that table."""
    from PIL import Image

    from sparsecomp.targets import detect_host, target_from_attr

    module = import_file(repo / "docs" / "figures" / "make_stages_figure.py")
    recorded = module.read_table((repo / "docs" / "design.md").read_text())
    with Image.open(repo / "docs" / "figures" / "stages.png") as image:
        assert image.info.get("Description") == module.fingerprint(recorded), (
            "run docs/figures/make_stages_figure.py --write"
        )
    if target_from_attr(module.TARGET).missing_on(detect_host()):
        pytest.skip("the table's counts are for an AVX2 CPU")
    fresh = module.measure()
    assert [(r["stage"], r["operations"], r["lines"]) for r in fresh] == [
        (r["stage"], r["operations"], r["lines"]) for r in recorded
    ], "stale: docs/figures/make_stages_figure.py --write"
    assert fresh[-1]["IR"] == recorded[-1]["IR"]  # the library's size


def test_choice_figure_is_fresh(repo):
    """docs/figures/choices.png shows what ``choose`` picks today for its three matrices."""
    from PIL import Image

    module = import_file(repo / "docs" / "figures" / "make_choice_figure.py")
    with Image.open(repo / "docs" / "figures" / "choices.png") as image:
        drawn = image.info.get("Description")
    assert drawn == module.description(module.choices(module.matrices())), (
        "stale: python docs/figures/make_choice_figure.py"
    )


def test_mkl_figure_is_fresh(repo, tmp_path):
    """docs/figures/mkl_ratios.png was drawn from the MKL run docs/benchmarks.md holds,
    with like pairs only (SpGEMM's unordered rows against MKL's unordered ones)."""
    from PIL import Image

    path = repo / "docs" / "figures" / "make_mkl_figure.py"
    module = import_file(path)
    tables = module.mkl_tables((repo / "docs" / "benchmarks.md").read_text())
    titles = {t.split()[0] for t in tables}
    assert titles >= {"SpMV", "SpMM", "SpGEMM"}, titles
    spgemm = next(rows for t, rows in tables.items() if t.startswith("SpGEMM"))
    assert ("mkl-opt", "sparsecomp-unsorted") in module.pairs(spgemm)
    assert ("mkl-opt", "sparsecomp") not in module.pairs(spgemm)
    with Image.open(repo / "docs" / "figures" / "mkl_ratios.png") as image:
        drawn = image.info.get("Description")
    assert drawn == module.fingerprint(tables), "run make_mkl_figure.py after a new MKL run"
    out = tmp_path / "mkl.png"
    proc = run(str(path), str(repo / "docs" / "benchmarks.md"), str(out))
    assert proc.returncode == 0, proc.stderr
    with Image.open(out) as image:
        assert image.info.get("Description") == drawn


def test_gpu_session_prepares_both_benchmarks(repo, tmp_path):
    """scripts/gpu_session: the executables of both GPU benchmarks for sm_90, each with
    its manifest, and the device command naming them."""
    import os

    out = tmp_path / "gpu"
    env = {**os.environ, "GPU_DIR": str(out), "PY": sys.executable}
    done = subprocess.run(["bash", str(repo / "scripts" / "gpu_session")], env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    manifests = [json.loads(p.read_text()) for p in out.glob("*/*/manifest.json")]
    assert {m["device"] for m in manifests} == {"cuda:sm_90"}
    assert {p.parent.name for p in (out / "exes").glob("*/manifest.json")} >= {"split", "sddmm"}
    assert any((out / "bert").glob("*/manifest.json"))
    assert f"--executables {out}/exes" in done.stdout
