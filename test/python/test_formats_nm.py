"""Tests of ``sparsecomp.formats.nm``: n:m compression and the PTX ``mma.sp`` metadata layout."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparsecomp.errors import FormatError
from sparsecomp.formats import mma_sp, nm

REPO = Path(__file__).resolve().parents[2]
SHAPES = mma_sp.MMA_SP_SHAPES
K_GROUPS = {"m16n8k16": 4, "m16n8k32": 8}
PAD_WORD = 0x44444444  # every nibble 0b0100: indices [0, 1]


def random_nm(
    rng: np.random.Generator, rows: int, cols: int, n: int, m: int, full: bool = False
) -> np.ndarray:
    """A random n:m matrix with small integer values; ``full``: exactly n nonzeros per group."""
    groups = -(-cols // m)
    count = np.full((rows, groups, 1), n) if full else rng.integers(0, n + 1, (rows, groups, 1))
    rank = np.argsort(np.argsort(rng.random((rows, groups, m)), axis=-1), axis=-1)
    values = rng.integers(1, 10, (rows, groups, m)) * rng.choice([-1, 1], (rows, groups, m))
    dense = np.where(rank < count, values, 0).astype(np.float64)
    return dense.reshape(rows, groups * m)[:, :cols]


def ascending_pairs(rng: np.random.Generator, rows: int, groups: int) -> np.ndarray:
    """Random strictly ascending 2:4 index pairs, ``(rows, 2 * groups)`` uint8."""
    pairs = np.array([(a, b) for a in range(4) for b in range(a + 1, 4)], dtype=np.uint8)
    return pairs[rng.integers(0, len(pairs), (rows, groups))].reshape(rows, 2 * groups)


# -- n:m: examples -------------------------------------------------------------


def test_compress_hand_checked() -> None:
    dense = np.array([[1, 0, 2, 0, 0, 0, 0, 3, 0, 0, 0, 0, 5]], dtype=np.float32)
    values, indices = nm.compress_nm(dense, 2, 4)
    # group 0: nonzeros at 0, 2; group 1: one nonzero at 3, padded with 0;
    # group 2: empty, [0, 1]; group 3 (columns 12..15, cut at 12): 5 at 0, padded with 1.
    assert values.tolist() == [[1, 2, 0, 3, 0, 0, 5, 0]]
    assert indices.tolist() == [[0, 2, 0, 3, 0, 1, 0, 1]]
    assert values.dtype == np.float32
    assert indices.dtype == np.uint8
    assert np.array_equal(nm.decompress_nm(values, indices, 13, 2, 4), dense)


def test_compress_other_ratios() -> None:
    dense = np.array([[0, 7, 8, 0], [9, 0, 0, 0]])
    values, indices = nm.compress_nm(dense, 1, 2)
    assert values.tolist() == [[7, 8], [9, 0]]
    assert indices.tolist() == [[1, 0], [0, 0]]
    values, indices = nm.compress_nm(dense, 3, 8)
    assert values.tolist() == [[0, 7, 8], [9, 0, 0]]
    assert indices.tolist() == [[0, 1, 2], [0, 1, 2]]
    values, indices = nm.compress_nm(dense, 4, 4)  # 4:4 is dense
    assert np.array_equal(values, dense)
    assert indices.tolist() == [[0, 1, 2, 3]] * 2


def test_empty_shapes() -> None:
    for rows, cols in [(0, 0), (0, 7), (3, 0)]:
        values, indices = nm.compress_nm(np.zeros((rows, cols)), 2, 4)
        assert values.shape == indices.shape == (rows, 2 * (-(-cols // 4)))
        assert nm.decompress_nm(values, indices, cols, 2, 4).shape == (rows, cols)
        for shape in SHAPES:
            meta = mma_sp.to_mma_sp(indices, rows, -(-cols // 4), shape)
            assert np.array_equal(mma_sp.from_mma_sp(meta, rows, -(-cols // 4), shape), indices)


def test_check_nm_message() -> None:
    dense = np.zeros((5, 16))
    dense[3, 8:11] = 1
    dense[4, 0:4] = 1
    with pytest.raises(FormatError, match=r"^not 2:4: row 3, columns 8\.\.11 hold 3 nonzeros$"):
        nm.check_nm(dense, 2, 4)
    with pytest.raises(FormatError, match="not 2:4: row 3"):
        nm.compress_nm(dense, 2, 4)


def test_check_nm_partial_group() -> None:
    dense = np.zeros((2, 10))
    dense[1, 8:10] = 1  # the last group is columns 8..9, checked as zero-padded
    nm.check_nm(dense, 2, 4)
    with pytest.raises(FormatError, match=r"^not 1:4: row 1, columns 8\.\.9 hold 2 nonzeros$"):
        nm.check_nm(dense, 1, 4)


def test_check_nm_counts_nan() -> None:
    with pytest.raises(FormatError, match="hold 3 nonzeros"):
        nm.check_nm(np.array([[np.nan, 1.0, np.nan, 0.0]]), 2, 4)


@pytest.mark.parametrize(
    ("n", "m", "message"),
    [
        (5, 4, r"0 < n <= m, got 5:4"),
        (0, 4, r"0 < n <= m, got 0:4"),
        (2, 0, r"0 < n <= m, got 2:0"),
        (2.0, 4, r"must be integers"),
        (2, 512, r"at most 256"),
    ],
)
def test_bad_n_m(n: object, m: object, message: str) -> None:
    for call in (
        lambda: nm.check_nm(np.zeros((2, 4)), n, m),  # type: ignore[arg-type]
        lambda: nm.compress_nm(np.zeros((2, 4)), n, m),  # type: ignore[arg-type]
        lambda: nm.decompress_nm(np.zeros((2, 2)), np.zeros((2, 2), np.uint8), 4, n, m),  # type: ignore[arg-type]
    ):
        with pytest.raises(FormatError, match=message):
            call()


@pytest.mark.parametrize("shape", [(4,), (2, 2, 4), ()])
def test_dense_must_be_2d(shape: tuple[int, ...]) -> None:
    with pytest.raises(FormatError, match="dense must be a 2-D array"):
        nm.compress_nm(np.zeros(shape), 2, 4)


def test_decompress_errors() -> None:
    values = np.ones((2, 4))
    indices = np.array([[0, 1, 2, 3], [0, 1, 0, 1]], dtype=np.uint8)
    with pytest.raises(FormatError, match="same shape"):
        nm.decompress_nm(values, indices[:, :2], 8, 2, 4)
    with pytest.raises(FormatError, match="12 columns at 2:4 need 6 stored columns, got 4"):
        nm.decompress_nm(values, indices, 12, 2, 4)
    with pytest.raises(FormatError, match=r"row 1, group 0 has index 4, expected 0\.\.3"):
        nm.decompress_nm(values, np.array([[0, 1, 2, 3], [0, 4, 0, 1]]), 8, 2, 4)
    with pytest.raises(FormatError, match=r"row 0, group 1 has indices \[3, 3\]"):
        nm.decompress_nm(values, np.array([[0, 1, 3, 3], [0, 1, 0, 1]]), 8, 2, 4)
    with pytest.raises(FormatError, match=r"row 0, group 0 has indices \[1, 0\]"):
        nm.decompress_nm(values, np.array([[1, 0, 2, 3], [0, 1, 0, 1]]), 8, 2, 4)
    with pytest.raises(FormatError, match="indices must be integers"):
        nm.decompress_nm(values, indices.astype(float), 8, 2, 4)
    with pytest.raises(FormatError, match="cols must be >= 0"):
        nm.decompress_nm(values, indices, -1, 2, 4)
    # 6 columns: group 1 covers columns 4..7; row 0 has nonzeros at indices 2, 3 = columns 6, 7.
    with pytest.raises(FormatError, match="row 0 stores a nonzero at column 6, past the last"):
        nm.decompress_nm(values, indices, 6, 2, 4)


# -- n:m: properties -------------------------------------------------------------

nm_params = st.integers(1, 8).flatmap(lambda m: st.tuples(st.integers(1, m), st.just(m)))


@settings(max_examples=80, deadline=None)
@given(
    nm_params,
    st.integers(0, 12),
    st.integers(0, 30),
    st.integers(0, 2**32 - 1),
    st.booleans(),
)
def test_compress_decompress_roundtrip(
    n_m: tuple[int, int], rows: int, cols: int, seed: int, full: bool
) -> None:
    n, m = n_m
    rng = np.random.default_rng(seed)
    dense = random_nm(rng, rows, cols, n, m, full)
    nm.check_nm(dense, n, m)
    values, indices = nm.compress_nm(dense, n, m)
    groups = -(-cols // m)
    assert values.shape == indices.shape == (rows, groups * n)
    assert indices.dtype == np.uint8
    idx = indices.reshape(rows, groups, n).astype(int)
    assert (np.diff(idx, axis=-1) > 0).all()
    assert (idx < m).all()
    # exactly the nonzeros are kept, plus zeros at the smallest unused positions
    padded = np.pad(dense, ((0, 0), (0, groups * m - cols))).reshape(rows, groups, m)
    nnz = np.count_nonzero(padded, axis=-1)
    assert (np.count_nonzero(values.reshape(rows, groups, n), axis=-1) == nnz).all()
    assert np.array_equal(nm.decompress_nm(values, indices, cols, n, m), dense)


@settings(max_examples=40, deadline=None)
@given(nm_params, st.integers(1, 6), st.integers(1, 20), st.integers(0, 2**32 - 1))
def test_not_nm_is_rejected(n_m: tuple[int, int], rows: int, cols: int, seed: int) -> None:
    n, m = n_m
    rng = np.random.default_rng(seed)
    dense = random_nm(rng, rows, cols, n, m)
    r, group = int(rng.integers(rows)), int(rng.integers(-(-cols // m)))
    width = min(m, cols - group * m)
    if width <= n:
        return  # this group cannot hold more than n nonzeros
    dense[r, group * m : group * m + width] = 1.0
    first_bad = (
        np.count_nonzero(np.pad(dense, ((0, 0), (0, -cols % m))).reshape(rows, -1, m), axis=-1) > n
    )
    row0, group0 = np.argwhere(first_bad)[0]
    with pytest.raises(FormatError, match=rf"^not {n}:{m}: row {row0}, columns {group0 * m}\.\."):
        nm.compress_nm(dense, n, m)


# -- mma.sp metadata: examples ---------------------------------------------------


def nibbles_to_indices(nibbles: np.ndarray) -> np.ndarray:
    return np.stack([nibbles & 3, nibbles >> 2], axis=-1).reshape(nibbles.shape[0], -1)


def test_uniform_metadata_matches_llvm_constant() -> None:
    # llvm-project sparse-mma-2-4-f16.mlir: nonzeros at 0 and 2 everywhere -> 0x8888 per i16.
    indices = np.tile([0, 2], (16, 8)).astype(np.uint8)
    assert (mma_sp.to_mma_sp(indices, 16, 8, "m16n8k32") == 0x88888888).all()
    assert (mma_sp.to_mma_sp(indices, 16, 8, "m16n8k16") == 0x88888888).all()


def test_single_nibble_k16() -> None:
    nibbles = np.full((16, 4), 0b0100)
    nibbles[8, 3] = 0b1110  # row 8 = g + 8 for g = 0, group 3 -> bits 31:28 of word 0
    nibbles[5, 1] = 0b1001  # row 5 = g for g = 5, group 1 -> bits 7:4 of word 5
    meta = mma_sp.to_mma_sp(nibbles_to_indices(nibbles), 16, 4, "m16n8k16")
    expected = np.full(8, PAD_WORD, dtype=np.uint32)
    expected[0] = 0xE4444444
    expected[5] = 0x44444494
    assert meta.dtype == np.uint32
    assert meta.tolist() == expected.tolist()


def test_single_nibble_k32() -> None:
    nibbles = np.full((16, 8), 0b0100)
    nibbles[9, 5] = 0b1101  # g = 1, p = 1 (groups 4..7), h = 1, j = 1 -> word 3, bits 23:20
    nibbles[2, 0] = 0b1100  # g = 2, p = 0, h = 0, j = 0 -> word 4, bits 3:0
    meta = mma_sp.to_mma_sp(nibbles_to_indices(nibbles), 16, 8, "m16n8k32")
    expected = np.full(16, PAD_WORD, dtype=np.uint32)
    expected[3] = 0x44D44444
    expected[4] = 0x4444444C
    assert meta.tolist() == expected.tolist()


def test_padding_words() -> None:
    indices = np.array([[1, 2]], dtype=np.uint8)  # one row, one group: nibble 0b1001
    for shape, words in (("m16n8k16", 8), ("m16n8k32", 16)):
        meta = mma_sp.to_mma_sp(indices, 1, 1, shape)
        assert meta.tolist() == [0x44444449] + [PAD_WORD] * (words - 1)
        assert mma_sp.from_mma_sp(meta, 1, 1, shape).tolist() == [[1, 2]]
        # the padded region decodes to [0, 1]
        full = mma_sp.from_mma_sp(meta, 16, K_GROUPS[shape], shape)
        assert full[0, :2].tolist() == [1, 2]
        assert (full.reshape(-1, 2)[1:] == [0, 1]).all()


@pytest.mark.parametrize("shape", SHAPES)
def test_word_order_matches_row_major_i16_metadata(shape: str) -> None:
    """Cross-check against the naive layout of the llvm-project test and PyTorch.

    Both keep metadata as one 16-bit word per row and 16 dense columns, group j
    at bits 4j (PyTorch's ``meta`` before the CUTLASS reorder; llvm-project's
    ``memref<16x2xi16>``). A metadata-holding lane 4g + p takes
    ``meta16[g, p] | meta16[g + 8, p] << 16`` for its k-tile.
    """
    rng = np.random.default_rng(7)
    rows, groups = 48, 3 * K_GROUPS[shape]
    indices = ascending_pairs(rng, rows, groups)
    pairs = indices.reshape(rows, groups // 4, 4, 2).astype(np.uint32)
    meta16 = ((pairs[..., 0] | (pairs[..., 1] << 2)) << (4 * np.arange(4, dtype=np.uint32))).sum(
        axis=-1, dtype=np.uint32
    )  # (rows, groups / 4)
    meta = mma_sp.to_mma_sp(indices, rows, groups, shape)
    p_count = K_GROUPS[shape] // 4
    tiles = meta.reshape(rows // 16, groups // K_GROUPS[shape], -1)
    for rt in range(rows // 16):
        for kt in range(groups // K_GROUPS[shape]):
            for lane in range(32):
                g, p = lane >> 2, lane % 4
                if p >= p_count:
                    continue  # not a metadata lane for selector 0
                col = kt * p_count + p
                want = meta16[16 * rt + g, col] | (meta16[16 * rt + g + 8, col] << 16)
                got = tiles[rt, kt, mma_sp.mma_sp_lane_words(shape)[lane]]
                assert got == want, (rt, kt, lane)


@pytest.mark.parametrize("shape", SHAPES)
def test_bit_layout_matches_from_mma_sp(shape: str) -> None:
    """Probe from_mma_sp with one set bit per 2-bit field and compare to mma_sp_bit_layout."""
    layout = mma_sp.mma_sp_bit_layout(shape)
    words = mma_sp.mma_sp_words_per_tile(shape)
    k_groups = K_GROUPS[shape]
    assert layout.shape == (words, 16, 3)
    for w in range(words):
        for f in range(16):
            meta = np.zeros(words, dtype=np.uint32)
            meta[w] = 1 << (2 * f)
            indices = mma_sp.from_mma_sp(meta, 16, k_groups, shape)
            (row, col) = np.argwhere(indices == 1)[0]
            assert np.count_nonzero(indices) == 1
            assert layout[w, f].tolist() == [row, col // 2, col % 2]


@pytest.mark.parametrize("shape", SHAPES)
def test_lanes_and_loads(shape: str) -> None:
    words = mma_sp.mma_sp_words_per_tile(shape)
    loads = mma_sp.mma_sp_lane_words(shape)
    assert sorted(set(loads.tolist())) == list(range(words))
    for selector in range(4 if shape == "m16n8k16" else 2):
        lanes = mma_sp.mma_sp_word_lanes(shape, selector)
        assert (lanes % 4 // (words // 8) == selector).all()  # threadID_in_group
        assert loads[lanes].tolist() == list(range(words))
    # selector 0: words in lane order
    assert list(mma_sp.mma_sp_word_lanes(shape)) == sorted(mma_sp.mma_sp_word_lanes(shape))
    with pytest.raises(FormatError, match="sparsity selector"):
        mma_sp.mma_sp_word_lanes(shape, 4 if shape == "m16n8k16" else 2)


def test_thread_registers_follow_ptx_fragments() -> None:
    a = np.arange(16 * 16).reshape(16, 16)
    regs = mma_sp.mma_sp_thread_registers(a, np.arange(16), "m16n8k32")
    lane = 5  # groupID 1, threadID_in_group 1 -> chunk 1 (columns 4..7) and 5 (20..23)
    assert regs.a.shape == (32, 4, 2)
    assert regs.a[lane].tolist() == [
        a[1, 2:4].tolist(),
        a[9, 2:4].tolist(),
        a[1, 10:12].tolist(),
        a[9, 10:12].tolist(),
    ]
    assert regs.e[lane] == 3  # word 2 * 1 + 1
    regs = mma_sp.mma_sp_thread_registers(a[:, :8], np.arange(8), "m16n8k16")
    assert regs.a.shape == (32, 2, 2)
    assert regs.a[30].tolist() == [a[7, 4:6].tolist(), a[15, 4:6].tolist()]
    assert regs.e[30] == 7


def test_reference_hand_checked() -> None:
    # A row 0 has 3 at column 1 and 4 at column 2 (group 0, indices [1, 2]); B = ones.
    indices = np.tile([0, 1], (16, 4)).astype(np.uint8)
    indices[0, :2] = [1, 2]
    values = np.zeros((16, 8))
    values[0, :2] = [3, 4]
    meta = mma_sp.to_mma_sp(indices, 16, 4, "m16n8k16")
    b = np.zeros((16, 8))
    b[1, :] = 10
    b[2, :] = 100
    d = mma_sp.mma_sp_reference(values, meta, b, "m16n8k16")
    assert d[0].tolist() == [430.0] * 8
    assert not d[1:].any()


def test_mma_sp_errors() -> None:
    indices = np.tile([0, 1], (16, 4)).astype(np.uint8)
    with pytest.raises(FormatError, match=r"unknown mma\.sp shape 'm16n8k8'"):
        mma_sp.to_mma_sp(indices, 16, 4, "m16n8k8")
    with pytest.raises(FormatError, match=r"must have shape \(16, 10\), got \(16, 8\)"):
        mma_sp.to_mma_sp(indices, 16, 5, "m16n8k16")
    bad = indices.copy()
    bad[3, 4:6] = [2, 1]
    with pytest.raises(FormatError, match=r"row 3, group 2 has indices \[2, 1\]"):
        mma_sp.to_mma_sp(bad, 16, 4, "m16n8k16")
    bad[3, 4:6] = [2, 4]
    with pytest.raises(FormatError, match=r"row 3, group 2 has index 4, expected 0\.\.3"):
        mma_sp.to_mma_sp(bad, 16, 4, "m16n8k16")
    with pytest.raises(FormatError, match="rows must be >= 0"):
        mma_sp.to_mma_sp(indices, -16, 4, "m16n8k16")
    meta = mma_sp.to_mma_sp(indices, 16, 4, "m16n8k16")
    with pytest.raises(FormatError, match="needs 16 words, got 8"):
        mma_sp.from_mma_sp(meta, 16, 4, "m16n8k32")
    with pytest.raises(FormatError, match="metadata must be integers"):
        mma_sp.from_mma_sp(meta.astype(float), 16, 4, "m16n8k16")
    # signed words are read as bit patterns
    assert np.array_equal(mma_sp.from_mma_sp(meta.view(np.int32), 16, 4, "m16n8k16"), indices)
    values = np.zeros((16, 8))
    with pytest.raises(FormatError, match=r"B must have shape \(16, 8\)"):
        mma_sp.mma_sp_reference(values, meta, np.zeros((16, 4)), "m16n8k16")
    with pytest.raises(FormatError, match=r"takes sparsity selector 0\.\.1, got 2"):
        mma_sp.mma_sp_reference(np.zeros((16, 16)), np.zeros(16), np.zeros((32, 8)), "m16n8k32", 2)
    with pytest.raises(FormatError, match="not strictly ascending"):
        mma_sp.mma_sp_reference(values, np.zeros(8, np.uint32), np.zeros((16, 8)), "m16n8k16")
    with pytest.raises(FormatError, match=r"A values must have shape \(16, 8\)"):
        mma_sp.mma_sp_reference(np.zeros((16, 16)), meta, np.zeros((16, 8)), "m16n8k16")


# -- mma.sp metadata: properties -------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(SHAPES), st.integers(0, 40), st.integers(0, 20), st.integers(0, 2**32 - 1))
def test_mma_sp_roundtrip(shape: str, rows: int, groups: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    indices = ascending_pairs(rng, rows, groups)
    meta = mma_sp.to_mma_sp(indices, rows, groups, shape)
    row_tiles, k_tiles = mma_sp.mma_sp_tiles(rows, groups, shape)
    assert meta.shape == (row_tiles * k_tiles * mma_sp.mma_sp_words_per_tile(shape),)
    assert meta.dtype == np.uint32
    assert np.array_equal(mma_sp.from_mma_sp(meta, rows, groups, shape), indices)
    # every nibble, padding included, is a valid ordered pair
    nibbles = (meta[:, None] >> np.arange(0, 32, 4, dtype=np.uint32)) & 0xF
    assert np.isin(nibbles, [0b0100, 0b1000, 0b1001, 0b1100, 0b1101, 0b1110]).all()


@settings(max_examples=50, deadline=None)
@given(
    st.sampled_from(SHAPES),
    st.integers(1, 40),
    st.integers(1, 70),
    st.integers(1, 20),
    st.integers(0, 2**32 - 1),
)
def test_mma_sp_reference_equals_dense_matmul(
    shape: str, rows: int, cols: int, n_cols: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    dense = random_nm(rng, rows, cols, 2, 4)
    values, indices = nm.compress_nm(dense, 2, 4)
    groups = -(-cols // 4)
    meta = mma_sp.to_mma_sp(indices, rows, groups, shape)
    b = rng.integers(-9, 10, (cols, n_cols)).astype(np.float64)
    got = mma_sp.mma_sp_matmul_reference(values, meta, rows, groups, b, shape)
    assert np.array_equal(got, dense @ b)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(SHAPES), st.integers(0, 2**32 - 1))
def test_reference_any_selector(shape: str, seed: int) -> None:
    """Every lane loads a word, so each valid sparsity selector reads the same metadata."""
    rng = np.random.default_rng(seed)
    k = 4 * K_GROUPS[shape]
    dense = random_nm(rng, 16, k, 2, 4, full=True)
    values, indices = nm.compress_nm(dense, 2, 4)
    meta = mma_sp.to_mma_sp(indices, 16, k // 4, shape)
    b = rng.integers(-9, 10, (k, 8)).astype(np.float64)
    for selector in range(4 if shape == "m16n8k16" else 2):
        assert np.array_equal(mma_sp.mma_sp_reference(values, meta, b, shape, selector), dense @ b)


# -- docs ------------------------------------------------------------------------


def test_doc_table_is_generated() -> None:
    """docs/nm-metadata.md carries the table that docs/figures/make_nm_figure.py prints."""
    path = REPO / "docs" / "figures" / "make_nm_figure.py"
    spec = importlib.util.spec_from_file_location("make_nm_figure", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    doc = (REPO / "docs" / "nm-metadata.md").read_text()
    assert module.table_text() in doc
    assert re.search(r"figures/nm_metadata\.png", doc)
