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
