"""Shared fixtures: repository paths and a sparsecomp context."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture
def ctx():
    from sparsecomp.ir.context import make_context

    return make_context()


@pytest.fixture(scope="session")
def private_cache(tmp_path_factory: pytest.TempPathFactory):
    """A compile cache of this test session's own (``SPARSECOMP_CACHE_DIR``)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPARSECOMP_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield
