"""The compile cache's key covers every source a build reads."""

from __future__ import annotations

from pathlib import Path

from sparsecomp.compiler import cache


def test_key_covers_pipelines_shim_and_dialect() -> None:
    # pipelines/ is a symbolic link in a checkout: a walk that does not follow it
    # kept stale kernels after a pipeline changed
    names = {p.name for p in cache._sources()}
    assert {"sparsecomp-cuda-schedule.txt", "sparsecomp-cpu.txt"} <= names
    assert {"cuda_shim.c", "sparse_iter.td", "driver.py"} <= names
    assert all("__pycache__" not in p.parts for p in cache._sources())


def test_key_changes_with_a_pipeline(monkeypatch, tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "real").mkdir(parents=True)
    (package / "real" / "p.txt").write_text("canonicalize")
    (package / "pipelines").symlink_to(package / "real")
    monkeypatch.setattr(cache, "_PACKAGE", package)
    hashed = cache.package_hash.__wrapped__  # the cached one is the installed package's
    before = hashed()
    (package / "real" / "p.txt").write_text("cse")
    assert hashed() != before
