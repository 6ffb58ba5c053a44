"""The runtime's fast path (runtime/fastpath.py) against its careful path (marshal.flatten).

Calls whose arguments are already what the ABI wants skip the careful path;
these tests pin that both paths agree, that the fast path hands everything
else over, and what the remembered SparseTensors cost and guarantee.
"""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest
import scipy.sparse as sp

from runtime_kernels import KERNEL_ABIS, KERNELS, kernel_dir
from sparsecomp.formats import SparseTensor, parse_layout
from sparsecomp.runtime import Executable, load
from sparsecomp.runtime.fastpath import Out


@pytest.fixture(scope="module")
def exe(tmp_path_factory: pytest.TempPathFactory) -> Executable:
    return load(kernel_dir(tmp_path_factory.mktemp("kernels"), KERNELS, KERNEL_ABIS))


def matrix(rows: int = 9, cols: int = 6, seed: int = 0) -> sp.csr_matrix:
    return sp.csr_matrix(
        sp.random(rows, cols, density=0.4, format="csr", dtype=np.float32, random_state=seed)
    )


def caller(exe: Executable, name: str):  # -> Caller, bound on first use
    function = exe.functions[name]
    if function._caller is None:
        function(*_sample_args(name))
    assert function._caller is not None
    return function._caller


def _sample_args(name: str) -> tuple:
    return {"spmv": (matrix(), np.ones(6, np.float32)), "twice": (3,)}[name]


def fast_takes(exe: Executable, name: str, *args) -> bool:
    return caller(exe, name).fast.emit(args, Out(0, []))


def test_fast_path_takes_exact_arguments(exe: Executable) -> None:
    t = SparseTensor.from_scipy(matrix(), "csr")
    x = np.ones(6, np.float32)
    assert fast_takes(exe, "spmv", t, x)
    assert fast_takes(exe, "spmv", matrix(), x)  # scipy CSR of the ABI's dtypes
    assert fast_takes(exe, "spmv", sp.csr_array(matrix()), x)
    assert fast_takes(exe, "twice", 4)


def _unsorted() -> sp.csr_matrix:
    m = matrix()  # rows with several entries: reversed, they are out of order
    return sp.csr_matrix((m.data, m.indices[::-1].copy(), m.indptr), shape=m.shape)


def _widened() -> sp.csr_matrix:
    m = matrix()
    m.indices = m.indices.astype(np.int64)
    return m


def _out_of_range() -> sp.csr_matrix:
    m = matrix()
    m.indices[0] = 6
    return m


def test_scipy_arrays_are_checked_on_every_call(exe: Executable) -> None:
    from sparsecomp.errors import FormatError

    m, x = matrix(), np.ones(6, np.float32)
    np.testing.assert_allclose(exe.spmv(m, x), m @ x, rtol=1e-6)
    m.indices[0] = 6  # edited in place: out of range
    with pytest.raises(FormatError, match="out of range"):
        exe.spmv(m, x)


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(lambda t, x: (matrix().tocsc(), x), id="scipy-to-pack"),
        pytest.param(lambda t, x: (_widened(), x), id="scipy-other-widths"),
        pytest.param(lambda t, x: (_unsorted(), x), id="scipy-not-canonical"),
        pytest.param(lambda t, x: (_out_of_range(), x), id="scipy-invalid"),
        pytest.param(lambda t, x: (t.to("coo"), x), id="layout-to-convert"),
        pytest.param(lambda t, x: (t, np.ones(12, np.float32)[::2]), id="strided-to-copy"),
        pytest.param(lambda t, x: (t, x.astype(np.float64)), id="wrong-dtype"),
        pytest.param(lambda t, x: (t, x[:5]), id="size-symbol-mismatch"),
        pytest.param(lambda t, x: (t, x.reshape(6, 1)), id="wrong-rank"),
        pytest.param(lambda t, x: (t, list(x)), id="not-an-array"),
        pytest.param(lambda t, x: (t,), id="too-few"),
    ],
)
def test_fast_path_hands_over_the_rest(exe: Executable, args) -> None:
    t = SparseTensor.from_scipy(matrix(), "csr")
    assert not fast_takes(exe, "spmv", *args(t, np.ones(6, np.float32)))


@pytest.mark.parametrize("value", [True, 2.0, 2**70, -1 - 2**63, np.int64(3)])
def test_fast_path_hands_over_other_scalars(exe: Executable, value) -> None:
    assert not fast_takes(exe, "twice", value)


def test_both_paths_give_the_same_results(exe: Executable) -> None:
    m = matrix(31, 17, seed=3)
    x = np.random.default_rng(1).standard_normal(17).astype(np.float32)
    fast = exe.spmv(SparseTensor.from_scipy(m, "csr"), x)
    careful = exe.spmv(m, np.asfortranarray(np.stack([x, x]))[0])  # scipy + a strided x
    np.testing.assert_array_equal(fast, careful)
    np.testing.assert_allclose(fast, m @ x, rtol=1e-6)


def test_an_equal_layout_object_takes_the_fast_path(exe: Executable) -> None:
    layout = parse_layout(str(exe.spmv.signature.args[0].layout))
    assert layout is not exe.spmv.signature.args[0].layout
    t = SparseTensor.from_scipy(matrix(), layout)
    assert fast_takes(exe, "spmv", t, np.ones(6, np.float32))


def test_checked_tensors_are_forgotten_when_they_die(exe: Executable) -> None:
    step = caller(exe, "spmv").fast.steps[0]
    checked = next(c.cell_contents for c in step.__closure__ if isinstance(c.cell_contents, dict))
    before = len(checked)
    t = SparseTensor.from_scipy(matrix(), "csr")
    exe.spmv(t, np.ones(6, np.float32))
    exe.spmv(t, np.ones(6, np.float32))
    assert len(checked) == before + 1
    del t
    gc.collect()
    assert len(checked) == before


def test_checked_tensor_buffers_cannot_be_reallocated(exe: Executable) -> None:
    t = SparseTensor.from_scipy(matrix(), "csr")
    exe.spmv(t, np.ones(6, np.float32))
    with pytest.raises(ValueError, match="reference"):
        t.values.resize(1000)  # would leave the remembered descriptor dangling


def test_concurrent_calls(exe: Executable) -> None:
    rng = np.random.default_rng(2)
    cases = [(matrix(40, 30, seed=s), rng.standard_normal(30).astype(np.float32)) for s in range(8)]
    tensors = [SparseTensor.from_scipy(m, "csr") for m, _ in cases]
    failures: list[str] = []

    def work(i: int) -> None:
        m, x = cases[i]
        for _ in range(200):
            if not np.allclose(exe.spmv(tensors[i], x), m @ x, rtol=1e-5, atol=1e-6):
                failures.append(f"case {i}")
                return

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(cases))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
