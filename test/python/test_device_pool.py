"""The caching pool in front of the CUDA driver's allocations (runtime/device_pool.py)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import sparsecomp
from sparsecomp.runtime import device_pool
from sparsecomp.runtime.cuda import use_driver
from sparsecomp.runtime.device_pool import OUT_OF_MEMORY, Pool, size_class
from test_cuda_runtime import SPMM, FakeDriver


class Driver:
    """Counting allocation entries; ``room`` bytes before out-of-memory."""

    def __init__(self, room: int = 1 << 40) -> None:
        self.next = 1 << 20
        self.live: dict[int, tuple[bool, int]] = {}
        self.allocs = self.frees = 0
        self.room = room

    def alloc(self, managed: bool, nbytes: int) -> tuple[int, int]:
        if sum(n for _, n in self.live.values()) + nbytes > self.room:
            return OUT_OF_MEMORY, 0
        self.allocs += 1
        ptr, self.next = self.next, self.next + nbytes + 4096
        self.live[ptr] = (managed, nbytes)
        return 0, ptr

    def free(self, ptr: int) -> int:
        if ptr not in self.live:
            return 1  # CUDA_ERROR_INVALID_VALUE
        self.frees += 1
        del self.live[ptr]
        return 0

    def pool(self, limit: int = device_pool.LIMIT) -> Pool:
        return Pool(lambda n: self.alloc(True, n), lambda n: self.alloc(False, n), self.free,
                    limit)  # fmt: skip


@given(st.integers(0, 1 << 34))
def test_size_classes_cover_the_request_within_an_eighth(nbytes: int) -> None:
    size = size_class(nbytes)
    assert size >= max(nbytes, 1)
    assert size % 512 == 0
    assert size - max(nbytes, 1) < max(512, nbytes / 8)
    assert size_class(size) == size  # a class is its own class


def test_a_freed_block_serves_the_next_request_of_its_kind_and_class() -> None:
    d = Driver()
    pool = d.pool()
    _, a = pool.allocate(True, 1000)
    assert pool.free(a) == 0
    assert d.frees == 0
    assert pool.allocate(True, 900) == (0, a)  # same class (1024)
    assert d.allocs == 1
    _, b = pool.allocate(False, 900)  # device memory is another kind
    assert b != a
    assert d.allocs == 2
    pool.free(a)
    pool.free(b)
    _, c = pool.allocate(True, 5000)  # another class
    assert c not in (a, b)
    assert d.allocs == 3
    pool.release()
    assert d.frees == 2
    assert pool.cached == 0
    pool.free(c)
    assert set(d.live) == {c}


def test_past_the_limit_frees_go_to_the_driver() -> None:
    d = Driver()
    pool = d.pool(limit=2048)
    ptrs = [pool.allocate(True, 1024)[1] for _ in range(3)]
    for p in ptrs:
        pool.free(p)
    assert pool.cached == 2048
    assert d.frees == 1


def test_out_of_memory_releases_the_cache_and_tries_again() -> None:
    d = Driver(room=4096)
    pool = d.pool()
    _, a = pool.allocate(False, 3000)  # class 3072
    pool.free(a)
    code, _b = pool.allocate(False, 3500)  # another class: the cached 3072 must go first
    assert code == 0
    assert d.frees == 1
    assert a not in d.live
    assert pool.allocate(False, 3500)[0] == OUT_OF_MEMORY  # truly full: the driver's answer


def test_unknown_pointers_go_to_the_driver() -> None:
    d = Driver()
    pool = d.pool()
    assert pool.free(12345) == 1


@settings(deadline=None, max_examples=30)
@given(st.lists(st.tuples(st.booleans(), st.integers(1, 1 << 22), st.booleans()), max_size=40))
def test_live_blocks_never_share_memory(requests: list[tuple[bool, int, bool]]) -> None:
    """However requests and frees interleave, no two live blocks overlap, and each is at
    least as large as asked."""
    d = Driver()
    pool = d.pool(limit=1 << 23)
    live: dict[int, int] = {}
    for managed, nbytes, free_one in requests:
        code, ptr = pool.allocate(managed, nbytes)
        assert code == 0
        assert ptr not in live
        assert d.live[ptr][1] >= nbytes
        assert d.live[ptr][0] == managed
        live[ptr] = nbytes
        if free_one and live:
            pool.free(next(iter(live)))
            del live[next(iter(live))]
    spans = sorted((p, p + n) for p, n in live.items())
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))


def test_calls_through_a_pooled_table_reuse_memory() -> None:
    """Two calls of a CUDA executable through the fake driver with a pool in front: the
    second allocates nothing new, and the results' memory comes back to the pool."""
    exe = sparsecomp.compile(SPMM, target="cuda:sm_80")
    fake = FakeDriver()
    pool, hooks = device_pool.pooled(fake.driver.table)
    fake.keep += hooks
    old = use_driver(fake.driver)
    A = sp.random(30, 20, density=0.3, format="csr", dtype=np.float32, random_state=1)
    B = np.ones((20, 7), np.float32)
    try:
        exe(A, B)
        first: Any = dict(fake.live)
        exe(A, B)
    finally:
        use_driver(old)
    assert first
    assert set(fake.live) == set(first)
    assert not fake.freed
    assert pool.cached == sum(len(b) for b in first.values())  # all idle again
    pool.release()
    assert not fake.live


if __name__ == "__main__":
    pytest.main([__file__])
