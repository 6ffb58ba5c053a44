"""Every registered pass is documented, tested in lit, and listed in docs/passes.md."""

from __future__ import annotations

import dataclasses

import pytest

from sparsecomp.tools.listing import passes_markdown
from sparsecomp.transforms import get_all_passes, get_pass
from sparsecomp.transforms.base import SparsecompPass
from sparsecomp.transforms.pipeline import named_pipelines

PASSES = sorted(get_all_passes())
PREFIX = "sparse-iter-"


@pytest.mark.parametrize("name", PASSES)
def test_pass_has_lit_tests(repo, name):
    assert name.startswith(PREFIX)
    stem = name.removeprefix(PREFIX)
    for suffix in (".mlir", "-invalid.mlir"):
        path = repo / "test" / "lit" / "transforms" / f"{stem}{suffix}"
        assert path.exists(), f"{name} needs {path.relative_to(repo)}"
        assert "RUN:" in path.read_text()


@pytest.mark.parametrize("name", PASSES)
def test_pass_class_follows_conventions(name):
    cls = get_pass(name)
    assert issubclass(cls, SparsecompPass)
    assert cls.NAME == name
    assert dataclasses.is_dataclass(cls)
    assert cls.__dataclass_params__.frozen
    module = cls.__module__.rsplit(".", 1)[1]
    assert module == name.removeprefix(PREFIX).replace("-", "_")
    assert cls.__name__.endswith("Pass")
    assert cls.summary(), f"{name} has no docstring summary"
    assert "```mlir" in cls.description(), f"{name} docstring needs an mlir example"


@pytest.mark.parametrize("name", PASSES)
def test_pass_defaults_construct(name):
    instance = get_pass(name)()
    assert instance.pipeline_text().startswith(name)


def test_named_pipelines_have_lit_smoke_tests(repo):
    assert named_pipelines()
    for name in named_pipelines():
        assert (repo / "test" / "lit" / "pipelines" / f"{name}.mlir").exists(), name


def test_docs_passes_is_fresh(repo):
    committed = (repo / "docs" / "passes.md").read_text()
    assert committed == passes_markdown(), (
        "docs/passes.md is stale: python -m sparsecomp.tools.listing > docs/passes.md"
    )


def test_lit_files_belong_to_registered_passes(repo):
    stems = {n.removeprefix(PREFIX) for n in PASSES}
    for path in (repo / "test" / "lit" / "transforms").glob("*.mlir"):
        stem = path.stem.removesuffix("-invalid")
        assert stem in stems, f"{path.name} tests no registered pass"
