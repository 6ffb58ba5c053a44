"""sparsecomp.runtime: calling kernels built by the stand-in back end (runtime_fixture.py).

These tests also pin MLIR's C interface (checked against the generated
``_mlir_ciface_*`` wrappers): with results, the first parameter points to
the result descriptor (one memref) or to a struct of all flattened results;
a lone scalar result is the C return value; scalars pass by value.
"""

from __future__ import annotations

import ctypes
import gc
import os
import re
from collections.abc import Iterator

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime_kernels import ADD, ADD_ABIS, KERNEL_ABIS, KERNELS, kernel_dir
from sparsecomp.formats import SparseTensor
from sparsecomp.runtime import Executable, load, memref
from sparsecomp.runtime.marshal import c_signature
from sparsecomp.runtime.memref import Malloced


@pytest.fixture(scope="module", params=["c", "python"])
def call_path(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test here runs twice: calls through the C call path (runtime/fastcall.py)
    where it takes them, and every call through the Python path."""
    with pytest.MonkeyPatch.context() as patch:
        if request.param == "python":
            patch.setenv("SPARSECOMP_NATIVE_CALLS", "0")
        yield request.param


@pytest.fixture(scope="module")
def exe(tmp_path_factory: pytest.TempPathFactory, call_path: str) -> Executable:
    return load(kernel_dir(tmp_path_factory.mktemp("kernels"), KERNELS, KERNEL_ABIS))


@pytest.fixture(scope="module")
def add(tmp_path_factory: pytest.TempPathFactory, call_path: str) -> Executable:
    return load(kernel_dir(tmp_path_factory.mktemp("add"), ADD, ADD_ABIS))


def test_each_call_path_is_taken(exe: Executable, call_path: str) -> None:
    x = np.arange(4.0)
    assert exe.total(x) == 6.0
    native = exe.functions["total"]._caller.native
    assert (native is not None) == (call_path == "c")
    if native is not None:
        assert native.accepts((x,))
        assert not native.accepts((x.astype(np.float32),))


def matrix(rows: int = 7, cols: int = 5, seed: int = 0) -> sp.csr_matrix:
    m = sp.random(rows, cols, density=0.4, format="csr", dtype=np.float32, random_state=seed)
    return sp.csr_matrix(m)


def owner_of(array: np.ndarray) -> object:
    """The object at the end of an array's ``base`` chain."""
    base: object = array
    while getattr(base, "base", None) is not None:
        base = base.base  # type: ignore[attr-defined]
    return base


LLVM_TYPES = {ctypes.c_int64: "i64", ctypes.c_float: "float", ctypes.c_double: "double"}
LLVM_TYPES |= {ctypes.c_uint8: "i1", ctypes.c_int32: "i32", None: "void"}


def llvm_type(ctype: object) -> str:
    return "ptr" if hasattr(ctype, "_type_") and hasattr(ctype, "contents") else LLVM_TYPES[ctype]


def test_c_signatures_match_the_generated_wrappers(exe: Executable) -> None:
    """The marshalling's C types agree with the ``_mlir_ciface_*`` definitions in LLVM IR."""
    text = (exe.directory / "kernel.ll").read_text()
    wrappers = re.findall(r"^define (\w+) @_mlir_ciface_(\w+)\((.*)\)", text, re.M)
    defined = {
        name: (ret, [p.split()[0] for p in params.split(", ") if p])
        for ret, name, params in wrappers
    }
    assert set(defined) == set(KERNEL_ABIS)
    for name, function in exe.functions.items():
        if name == "half":  # float16 by value: rejected by the runtime
            assert defined[name] == ("half", ["half"])
            continue
        argtypes, restype, _ = c_signature(function.signature)
        assert defined[name] == (llvm_type(restype), [llvm_type(t) for t in argtypes]), name
    assert defined["scale"] == ("void", ["ptr", "ptr", "ptr", "ptr", "i64", "i64", "float"])
    assert defined["total"] == ("double", ["ptr"])


def test_dense_add_matches_numpy(add: Executable) -> None:
    rng = np.random.default_rng(0)
    a, b = rng.random((3, 5), np.float32), rng.random((3, 5), np.float32)
    np.testing.assert_array_equal(add(a, b), a + b)
    np.testing.assert_array_equal(add.add(a, b), a + b)
    np.testing.assert_array_equal(add.functions["add"](a.T.T, b), a + b)


def test_non_contiguous_dense_args_are_copied(add: Executable) -> None:
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    np.testing.assert_array_equal(add(a[:, ::2], a.T[::2, :4].T.copy()), a[:, ::2] + a[:, :6:2])


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(0, 9),
    cols=st.integers(0, 9),
    seed=st.integers(0, 2**16),
    transpose=st.booleans(),
)
def test_dense_add_random_shapes(
    add: Executable, rows: int, cols: int, seed: int, transpose: bool
) -> None:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((rows, cols)).astype(np.float32)
    b = rng.standard_normal((cols, rows)).astype(np.float32).T if transpose else a * 2
    got = add(a, b)
    assert got.shape == (rows, cols)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, a + b)


@pytest.mark.parametrize(
    "wrap",
    [
        pytest.param(lambda m: m, id="csr_matrix"),
        pytest.param(sp.csr_array, id="csr_array"),
        pytest.param(sp.coo_matrix, id="coo_matrix"),
        pytest.param(lambda m: SparseTensor.from_scipy(m, "csr"), id="SparseTensor-csr"),
        pytest.param(lambda m: SparseTensor.from_scipy(m, "coo"), id="SparseTensor-coo"),
        pytest.param(lambda m: SparseTensor.from_scipy(m, "bsr:2x2"), id="SparseTensor-bsr"),
    ],
)
def test_spmv_sparse_argument(exe: Executable, wrap) -> None:
    m = matrix()
    x = np.arange(5, dtype=np.float32) - 2
    np.testing.assert_allclose(exe.spmv(wrap(m), x), m @ x, rtol=1e-6)


def test_sparse_result_shares_index_buffers(exe: Executable) -> None:
    t = SparseTensor.from_scipy(matrix(), "csr")
    r = exe.scale(t, 2.5)
    assert isinstance(r, SparseTensor)
    assert r.shape == t.shape
    assert r.layout == t.layout
    assert r.dtype == np.float32
    assert r.positions[1] is t.positions[1]  # returned arguments come back as themselves
    assert r.coordinates[1] is t.coordinates[1]
    assert not np.shares_memory(r.values, t.values)
    assert isinstance(owner_of(r.values), Malloced)
    np.testing.assert_array_equal(r.to_dense(), t.to_dense() * np.float32(2.5))


def test_aliasing_results_are_the_input_or_a_view(exe: Executable) -> None:
    a = np.arange(6, dtype=np.float64)
    same, view = exe.views(a)
    assert same is a
    assert view.shape == (2, 3)
    assert owner_of(view) is a
    view[1, 2] = -1.0
    assert a[5] == -1.0


def test_scalar_results(exe: Executable) -> None:
    a = np.array([1.0, 2.0, 4.5])
    total = exe.total(a)
    assert type(total) is np.float64
    assert total == 7.5
    doubled, s, n = exe.stats(a)
    np.testing.assert_array_equal(doubled, 2 * a)
    assert (s, n) == (7.5, 3)
    assert type(n) is np.int64
    h, less = exe.pair(np.array([1.5, 2.0], np.float16))
    assert type(h) is np.float16
    assert h == 3.5
    assert less is np.True_
    assert exe.pair(np.array([2.0, 1.5], np.float16))[1] is np.False_
    assert exe.less(1.0, 2) is np.True_
    assert exe.less(np.float32(3), 2.0) is np.False_


def test_constant_result_is_copied(exe: Executable, monkeypatch: pytest.MonkeyPatch) -> None:
    gc.collect()  # earlier tests' buffers go now, not into `freed` below
    freed: list[int] = []
    monkeypatch.setattr(memref.Malloced, "release", staticmethod(freed.append))  # none here
    r = exe.cst()
    np.testing.assert_array_equal(r, [1.0, 2.0, 3.0])
    assert r.flags.owndata
    r[0] = 7.0
    np.testing.assert_array_equal(exe.cst(), [1.0, 2.0, 3.0])
    del r
    gc.collect()
    assert freed == []


def test_rank0_and_no_results(exe: Executable) -> None:
    r = exe.r0(np.array(1.25, np.float32))
    assert r.shape == ()
    assert r == 2.5
    assert exe.nothing(np.zeros(3, np.float32)) is None


def test_owned_result_freed_once(exe: Executable, monkeypatch: pytest.MonkeyPatch) -> None:
    freed: list[int] = []
    real = memref.free
    spy = staticmethod(lambda p: (freed.append(p), real(p)))
    monkeypatch.setattr(memref.Malloced, "release", spy)
    x, y = exe.twice(4)
    np.testing.assert_array_equal(x, np.ones(4, np.float32))
    owner = owner_of(x)
    assert owner is owner_of(y)  # one allocation, one owner
    assert isinstance(owner, Malloced)
    address = owner.address
    del owner, x
    gc.collect()
    assert freed == []  # y still holds it
    del y
    gc.collect()
    assert freed == [address]


def test_empty_owned_results(exe: Executable, monkeypatch: pytest.MonkeyPatch) -> None:
    freed: list[int] = []
    real = memref.free
    spy = staticmethod(lambda p: (freed.append(p), real(p)))
    monkeypatch.setattr(memref.Malloced, "release", spy)
    x, y = exe.twice(0)
    assert x.shape == y.shape == (0,)
    del x, y
    gc.collect()
    assert len(freed) <= 1  # malloc(0) may give NULL (nothing to own) or one block


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_repeated_calls_do_not_leak(exe: Executable) -> None:
    n = 1 << 20  # 8 MiB per result
    exe.big(n, 1.0)
    before = rss()
    for i in range(40):
        r = exe.big(n, float(i))
        assert r[-1] == i
        del r
    assert rss() - before < 100 * 2**20


def test_functions_and_repr(exe: Executable) -> None:
    assert set(exe.functions) == set(KERNEL_ABIS)
    assert "spmv" in dir(exe)
    text = repr(exe)
    assert "13 function(s)" in text
    assert "spmv(sparse float32[m, k] csr, dense float32[k]) -> dense float32[m]" in text
    assert "stats(dense float64[n]) -> (dense float64[n], float64, int64)" in text
    assert "nothing(dense float32[?]) -> ()" in text
    assert repr(exe.views).startswith("<sparsecomp function views(dense float64[6])")
