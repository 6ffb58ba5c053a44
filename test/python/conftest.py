"""Shared fixtures: repository paths and a sparsecomp context; the longest tests first."""

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


#: The longest tests (tens of seconds each), started first: on pytest-xdist's
#: workers a long test picked up last leaves the other worker idle at the end.
#: Only the order changes; a name that goes stale is harmless.
LONGEST_FIRST = (
    "test_bench_cuda.py::test_emulated_traffic_table",
    "test_bench_cpu.py::test_cpu_benchmark_quick",
    "test_fuzz.py::test_fixed_seed_set",
    "test_docs_pages.py::test_page_runs_as_written",
    "test_load_concurrency.py::test_stress_cache_bounded",
    "test_cuda_mma.py::test_tensor_core_spmm_matches_scipy",
    "test_upstream_main_programs.py::test_sparse_bool_constant_as_a_mask",
    "test_format_choice.py::test_decomposed_execution_matches_scipy",
    "test_multi_device.py::test_random_call_graphs_match_scipy",
    "test_cuda_profile.py::test_hyb_keeps_lanes_busy_on_power_law_rows",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = item.nodeid.rsplit("/", 1)[-1]
        return next(
            (k for k, p in enumerate(LONGEST_FIRST) if name.startswith(p)), len(LONGEST_FIRST)
        )

    items.sort(key=rank)  # stable: the rest keep their order
