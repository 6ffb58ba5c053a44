"""The pages a user learns from run as written (see :mod:`docs_pages` for the rules)."""

from __future__ import annotations

from pathlib import Path

import pytest

from docs_pages import run_page, scratch, unrunnable

REPO = Path(__file__).resolve().parents[2]
PAGES = [
    REPO / "README.md",
    REPO / "docs" / "guide.md",
    REPO / "docs" / "troubleshooting.md",
    REPO / "docs" / "torch.md",
    REPO / "docs" / "script.md",
    REPO / "docs" / "dask.md",
]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_block_is_run_or_marked(page: Path) -> None:
    assert unrunnable(page) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_runs_as_written(page: Path, tmp_path: Path) -> None:
    failures = run_page(page, scratch(REPO, tmp_path))
    assert not failures, "\n\n".join(failures)


def test_api_reference_is_fresh(repo: Path) -> None:
    from sparsecomp.tools.apidoc import page

    assert (repo / "docs" / "api.md").read_text() == page(), (
        "docs/api.md is stale: python -m sparsecomp.tools.apidoc > docs/api.md"
    )


def test_api_reference_names_every_error_class() -> None:
    """A new error class must be documented (and shown in troubleshooting.md)."""
    import importlib
    import inspect
    import pkgutil

    import sparsecomp
    from sparsecomp.tools.apidoc import API, INTERNAL

    paths = [*(path for _, _, paths in API for path in paths), *INTERNAL]
    listed = {path.removesuffix("()").replace(":", ".") for path in paths}
    found = set()
    for info in pkgutil.walk_packages(sparsecomp.__path__, "sparsecomp."):
        if ".fuzz" in info.name or info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and value.__module__ == info.name
                and issubclass(value, (sparsecomp.SparsecompError, Warning))
            ):
                found.add(f"{info.name}.{name}")
    assert found - listed == set()
