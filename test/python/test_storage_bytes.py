"""``storage_bytes`` predicts the bytes of the real buffers, for every documented layout."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import sparsecomp
from sparsecomp.errors import FormatError
from sparsecomp.formats import Layout, SparseTensor, parse_layout, storage_bytes
from sparsecomp.formats.sizes import data_levels

#: The layouts of docs/formats.md ("Every layout, with a picture").
NAMES = ["dense", "csr", "csc", "coo", "dcsr", "ell", "ell:9", "bsr:4x4", "bsr:3x5", "nm:2:4",
         "hyb", "hyb:2:4", "bsr+csr:4x4", "bsr+csr:2x2:3"]  # fmt: skip
DTYPES = [np.float32, np.float64, np.int8, np.complex64]


def _counts(t: SparseTensor) -> dict[int, int]:
    """Stored positions of each data-dependent level, read off the buffers."""
    out = {}
    for lvl in data_levels(t.layout):
        level = t.layout.levels[lvl]
        if level.has_coordinates:
            out[lvl] = len(t.coordinates[lvl])
        else:  # dense_varied: the last position
            out[lvl] = int(t.positions[lvl][-1])
    return out


def _predict(t: SparseTensor, *, all_counts: bool) -> int:
    if t.parts:
        return sum(_predict(p, all_counts=all_counts) for p in t.parts)
    counts = _counts(t)
    if not all_counts and counts:
        counts.pop(max(counts))  # the last one comes from nse
    return storage_bytes(t.layout, t.shape, t.values.dtype, nse=t.nse, counts=counts)


def _tensor(name: str, m: sp.csr_matrix) -> SparseTensor:
    if name.startswith("nm"):
        dense = m.toarray()
        dense[:, 2::4] = 0  # at most 2 of every 4
        dense[:, 3::4] = 0
        return SparseTensor.from_dense(dense, name)
    try:
        return SparseTensor.from_scipy(m, name)
    except FormatError:  # a row longer than ell:9's 9 slots
        assume(False)
        raise


@settings(deadline=None, max_examples=60)
@given(
    name=st.sampled_from(NAMES),
    rows=st.integers(0, 20).map(lambda r: 4 * r),
    cols=st.integers(0, 10).map(lambda c: 4 * c),
    density=st.floats(0.0, 0.5),
    seed=st.integers(0, 2**16),
    dtype=st.sampled_from(DTYPES),
)
def test_storage_bytes_equals_the_buffers(name, rows, cols, density, seed, dtype) -> None:
    m = sp.random(rows, cols, density=density, format="csr", random_state=seed).astype(dtype)
    t = _tensor(name, m)
    assert _predict(t, all_counts=False) == t.storage_bytes
    assert _predict(t, all_counts=True) == t.storage_bytes


def test_closed_forms() -> None:
    # CSR 100x50 with 300 entries, 32-bit indices, f64 values.
    assert storage_bytes("csr", (100, 50), np.float64, nse=300) == 101 * 4 + 300 * 4 + 300 * 8
    # dense: no index buffers at all.
    assert storage_bytes("dense", (7, 3), np.float32) == 7 * 3 * 4
    # BSR 4x4 with 5 blocks: nse counts the blocks' entries.
    bsr = storage_bytes("bsr:4x4", (16, 16), np.float32, nse=5 * 16)
    assert bsr == 5 * 4 + 5 * 4 + 5 * 16 * 4
    # 2:4 of an 8x16 matrix: two slots per group of four.
    assert storage_bytes("nm:2:4", (8, 16), np.float16) == 8 * 4 * 2 * (4 + 2)
    # ELL of static width 3: every row has 3 slots.
    assert storage_bytes("ell:3", (10, 50), np.float32) == 10 * 3 * (4 + 4)


def test_mma_sp_metadata_words() -> None:
    layout = dataclasses.replace(parse_layout("nm:2:4"), nm_metadata="mma_sp_m16n8k16")
    assert isinstance(layout, Layout)
    dense = np.zeros((16, 16), np.float16)
    dense[:, ::4] = 1
    t = SparseTensor.from_dense(dense, layout)
    assert storage_bytes(layout, (16, 16), np.float16) == t.storage_bytes


def test_data_dependent_levels_need_counts() -> None:
    with pytest.raises(FormatError, match=r"level\(s\) 0 \(compressed\) depends on the data"):
        storage_bytes("dcsr", (10, 10), np.float32, nse=12)
    with pytest.raises(FormatError, match="composable"):
        storage_bytes("hyb", (10, 10), np.float32, nse=12)
    with pytest.raises(FormatError, match="not a multiple of 16"):
        storage_bytes("bsr:4x4", (16, 16), np.float32, nse=17)


@pytest.fixture(scope="module")
def size_kernels() -> sparsecomp.Executable:
    """``@s{i}`` returns ``sparse_iter.storage_size`` of a tensor in layout ``NAMES[i]``."""
    funcs = []
    for i, name in enumerate(NAMES):
        ty = f"tensor<?x?xf32, {parse_layout(name, 2).attr_text()}>"
        funcs.append(
            f"func.func @s{i}(%a: {ty}) -> index {{\n"
            f"  %n = sparse_iter.storage_size %a : {ty}\n  return %n : index\n}}"
        )
    funcs.append(
        "func.func @dense(%a: tensor<?x?xf64>) -> index {\n"
        "  %n = sparse_iter.storage_size %a : tensor<?x?xf64>\n  return %n : index\n}"
    )
    return sparsecomp.compile("\n".join(funcs))


@settings(deadline=None, max_examples=40)
@given(
    index=st.integers(0, len(NAMES) - 1),
    rows=st.integers(0, 12).map(lambda r: 4 * r),
    cols=st.integers(0, 8).map(lambda c: 4 * c),
    density=st.floats(0.0, 0.5),
    seed=st.integers(0, 2**16),
)
def test_storage_size_op_equals_the_buffers(size_kernels, index, rows, cols, density, seed) -> None:
    """The compiled ``sparse_iter.storage_size`` counts what the host tensor holds."""
    m = sp.random(rows, cols, density=density, format="csr", random_state=seed)
    t = _tensor(NAMES[index], m.astype(np.float32))
    assert (
        size_kernels.functions[f"s{index}"](t) == t.storage_bytes == _predict(t, all_counts=False)
    )
    assert size_kernels.dense(m.toarray()) == rows * cols * 8


def test_storage_bytes_refuses_what_no_tensor_can_be() -> None:
    """A negative count or size, or a value dtype no sparse tensor holds, is a
    FormatError (``nse=-100`` gave -788 bytes, ``float128`` 32 a value)."""
    with pytest.raises(FormatError, match="nse=-1"):
        storage_bytes("csr", (2, 8), "float32", nse=-1)
    with pytest.raises(FormatError, match="dimension 0 is -2"):
        storage_bytes("csr", (-2, 8), "float32", nse=1)
    with pytest.raises(FormatError, match="value dtype float128 is not supported"):
        storage_bytes("csr", (2, 8), "float128", nse=1)
    assert storage_bytes("csr", (2, 8), "float32", nse=0) == 3 * 4  # positions only
