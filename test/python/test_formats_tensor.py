"""Example-based tests of ``sparsecomp.formats.tensor``: buffers of every layout, errors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

from sparsecomp.errors import FormatError
from sparsecomp.formats import (
    DimMap,
    Layout,
    Level,
    SparseTensor,
    assign_parts,
    parse_layout,
)

#: The 3 x 4 matrix most tests pack; row 1 is empty.
A = np.array([[1, 0, 2, 0], [0, 0, 0, 0], [3, 4, 0, 5]], dtype=np.float32)


def layout(levels: list[str], dmap: DimMap | None = None, **kw: object) -> Layout:
    lv = tuple(Level.parse(x) for x in levels)
    return Layout(lv, dmap or DimMap.identity(len(lv)), **kw)  # type: ignore[arg-type]


def bufs(t: SparseTensor) -> dict[str, list[float]]:
    return {name: arr.tolist() for name, arr in t.buffers()}


def mma(name: str) -> Layout:
    return dataclasses.replace(parse_layout("nm:2:4"), nm_metadata=name)  # type: ignore[arg-type]


# -- buffers of each layout --------------------------------------------------------


def test_csr_buffers() -> None:
    t = SparseTensor.from_dense(A, "csr")
    assert bufs(t) == {
        "pos1": [0, 2, 2, 5],
        "crd1": [0, 2, 0, 1, 3],
        "values": [1, 2, 3, 4, 5],
    }
    assert t.positions[0] is None
    assert t.coordinates[0] is None
    assert t.positions[1].dtype == np.int32
    assert t.coordinates[1].dtype == np.int32
    assert t.values.dtype == np.float32
    assert (t.nse, t.nnz, t.shape, t.ndim) == (5, 5, (3, 4), 2)


def test_csc_buffers() -> None:
    t = SparseTensor.from_dense(A, "csc")
    assert bufs(t) == {
        "pos1": [0, 2, 3, 4, 5],
        "crd1": [0, 2, 2, 0, 2],
        "values": [1, 3, 4, 2, 5],
    }
    np.testing.assert_array_equal(t.to_dense(), A)


def test_coo_buffers() -> None:
    t = SparseTensor.from_dense(A, "coo")
    assert [n for n, _ in t.buffers()] == ["pos0", "crd0", "crd1", "values"]
    assert bufs(t) == {
        "pos0": [0, 5],
        "crd0": [0, 0, 2, 2, 2],
        "crd1": [0, 2, 0, 1, 3],
        "values": [1, 2, 3, 4, 5],
    }


def test_dcsr_buffers() -> None:
    t = SparseTensor.from_dense(A, "dcsr")
    assert bufs(t) == {
        "pos0": [0, 2],
        "crd0": [0, 2],
        "pos1": [0, 2, 5],
        "crd1": [0, 2, 0, 1, 3],
        "values": [1, 2, 3, 4, 5],
    }


def test_ell_pads_with_minus_one() -> None:
    t = SparseTensor.from_dense(A, "ell")
    assert bufs(t) == {
        "crd1": [0, 2, -1, -1, -1, -1, 0, 1, 3],
        "values": [1, 2, 0, 0, 0, 0, 3, 4, 5],
    }
    assert (t.nse, t.nnz) == (9, 5)
    np.testing.assert_array_equal(t.to_dense(), A)


def test_ell_static_width() -> None:
    t = SparseTensor.from_dense(A, "ell:4")
    assert bufs(t)["crd1"] == [0, 2, -1, -1, -1, -1, -1, -1, 0, 1, 3, -1]
    with pytest.raises(FormatError, match=r"row 2 holds 3 entries, more than the 2 slots"):
        SparseTensor.from_dense(A, "ell:2")


def test_ell_empty_has_width_zero() -> None:
    t = SparseTensor.from_dense(np.zeros((3, 4), np.float32), "ell")
    assert bufs(t) == {"crd1": [], "values": []}
    assert SparseTensor.from_dense(np.zeros((0, 4), np.float32), "ell:2").nse == 0


def test_bsr_partial_edge_block() -> None:
    t = SparseTensor.from_dense(A, "bsr:2x2")
    assert bufs(t) == {
        "pos1": [0, 2, 4],
        "crd1": [0, 1, 0, 1],
        # blocks (0,0) (0,1) (1,0) (1,1), each row-major; row 3 is padding
        "values": [1, 0, 0, 0, 2, 0, 0, 0, 3, 4, 0, 0, 0, 5, 0, 0],
    }
    np.testing.assert_array_equal(t.to_dense(), A)
    assert t.nnz == 5


def test_bsr_blocks_that_do_not_divide_either_dimension() -> None:
    t = SparseTensor.from_dense(A, "bsr:2x3")
    assert bufs(t) == {
        "pos1": [0, 1, 3],
        "crd1": [0, 0, 1],
        # 2 x 3 blocks (0,0) (1,0) (1,1); row 3 and columns 4, 5 are padding
        "values": [1, 0, 2, 0, 0, 0, 3, 4, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0],
    }
    np.testing.assert_array_equal(t.to_scipy().toarray(), A)


def test_dense_varied_stores_prefixes() -> None:
    t = SparseTensor.from_dense(A, layout(["dense_fixed", "dense_varied"]))
    assert bufs(t) == {"pos1": [0, 3, 3, 7], "values": [1, 0, 2, 3, 4, 0, 5]}
    np.testing.assert_array_equal(t.to_dense(), A)


def test_loose_compressed_pairs() -> None:
    lay = layout(["dense_fixed", "loose_compressed"])
    t = SparseTensor.from_dense(A, lay)
    assert bufs(t) == {
        "pos1": [0, 2, 2, 2, 2, 5],
        "crd1": [0, 2, 0, 1, 3],
        "values": [1, 2, 3, 4, 5],
    }
    # Gaps between the (lo, hi) ranges are never read.
    pos = np.array([0, 2, 3, 3, 3, 6], np.int32)
    crd = np.array([0, 2, 1, 0, 1, 3, 0], np.int32)
    vals = np.array([1, 2, 9, 3, 4, 5, 9], np.float32)
    g = SparseTensor.from_buffers((3, 4), lay, [None, pos], [None, crd], vals)
    np.testing.assert_array_equal(g.to_dense(), A)


def test_nm_indices_and_padding() -> None:
    m = np.array([[1, 0, 2, 0, 0, 0, 0, 3], [0, 0, 0, 0, 4, 5, 0, 0]], np.float64)
    t = SparseTensor.from_dense(m, "nm:2:4")
    assert bufs(t) == {
        "crd2": [0, 2, 0, 3, 0, 1, 0, 1],
        "values": [1, 2, 0, 3, 0, 0, 4, 5],
    }
    np.testing.assert_array_equal(t.to_dense(), m)


def test_nm_partial_last_group() -> None:
    m = np.array([[0, 1, 0, 0, 0, 7]], np.float32)
    t = SparseTensor.from_dense(m, "nm:2:4")
    assert bufs(t) == {"crd2": [0, 1, 0, 1], "values": [0, 1, 0, 7]}
    np.testing.assert_array_equal(t.to_dense(), m)


def test_not_2_4_names_row_and_columns() -> None:
    m = np.zeros((4, 12), np.float32)
    m[3, 8:11] = 1
    with pytest.raises(FormatError, match=r"not 2:4: row 3, columns 8\.\.11 hold 3 nonzeros"):
        SparseTensor.from_dense(m, "nm:2:4")


@pytest.mark.parametrize("name", ["mma_sp_m16n8k16", "mma_sp_m16n8k32"])
def test_mma_sp_metadata_round_trip(name: str) -> None:
    rng = np.random.default_rng(1)
    m = np.zeros((20, 40), np.float32)
    for r in range(20):
        for g in range(10):
            cols = g * 4 + rng.choice(4, int(rng.integers(0, 3)), replace=False)
            m[r, cols] = rng.integers(1, 9, cols.size)
    t = SparseTensor.from_dense(m, mma(name))
    assert t.coordinates[2].dtype == np.uint32
    np.testing.assert_array_equal(t.to_dense(), m)
    g = SparseTensor.from_buffers(m.shape, mma(name), t.positions, t.coordinates, t.values)
    np.testing.assert_array_equal(g.to_dense(), m)
    bad = t.coordinates[2].astype(np.int64)
    with pytest.raises(FormatError, match="must be uint32"):
        SparseTensor.from_buffers(m.shape, mma(name), t.positions, [None, None, bad], t.values)


def test_three_dimensional_layouts() -> None:
    rng = np.random.default_rng(0)
    a = rng.integers(-3, 4, (3, 4, 5)) * (rng.random((3, 4, 5)) < 0.3)
    for name in ["csr", "coo", "dcsr", "dense"]:
        t = SparseTensor.from_dense(a, name)
        np.testing.assert_array_equal(t.to_dense(), a)
        coords, vals = t.to_coo()
        np.testing.assert_array_equal(coords, np.stack(np.nonzero(a)))
        np.testing.assert_array_equal(vals, a[np.nonzero(a)])


# -- conversion, sharing, zeros, NaN ------------------------------------------------


def test_from_scipy_formats_and_to_scipy() -> None:
    for m in [sp.csr_array(A), sp.csc_matrix(A), sp.coo_array(A), sp.lil_matrix(A)]:
        t = SparseTensor.from_scipy(m, "csr")
        for fmt in ["coo", "csr", "csc"]:
            out = t.to_scipy(fmt)
            assert out.format == fmt
            np.testing.assert_array_equal(out.toarray(), A)


def test_from_scipy_csr_copy_false_shares() -> None:
    m = sp.csr_array(A)
    m.indices = m.indices.astype(np.int32)
    m.indptr = m.indptr.astype(np.int32)
    shared = SparseTensor.from_scipy(m, "csr", copy=False)
    assert shared.coordinates[1] is m.indices
    copied = SparseTensor.from_scipy(m, "csr")
    assert copied.coordinates[1] is not m.indices
    assert not np.shares_memory(copied.values, m.data)


def test_unsorted_coo_input_is_sorted() -> None:
    coords = np.array([[2, 0, 2, 0, 2], [3, 2, 0, 0, 1]])
    t = SparseTensor.from_coo((3, 4), coords, [5.0, 2, 3, 1, 4], "csr")
    assert bufs(t)["crd1"] == [0, 2, 0, 1, 3]
    assert bufs(t)["values"] == [1, 2, 3, 4, 5]
    c, v = t.to_coo()
    assert c.tolist() == [[0, 0, 2, 2, 2], [0, 2, 0, 1, 3]]
    assert v.tolist() == [1, 2, 3, 4, 5]


def test_to_converts_between_layouts() -> None:
    t = SparseTensor.from_dense(A, "csr")
    assert t.to("csr") is t
    for name in ["csc", "coo", "dcsr", "ell", "bsr:2x2", "hyb", "bsr+csr:2x2", "dense"]:
        u = t.to(name)
        np.testing.assert_array_equal(u.to_dense(), A)
        np.testing.assert_array_equal(u.to("csc").to_dense(), A)


def test_explicit_zeros_kept_by_exact_layouts_only() -> None:
    m = sp.csr_array((np.array([1.0, 0.0, 2.0]), np.array([0, 1, 3]), np.array([0, 2, 3])))
    for name in ["csr", "csc", "coo", "dcsr", "ell"]:
        t = SparseTensor.from_scipy(m, name)
        assert t.nnz == 3, name
        assert t.to_scipy().nnz == 3, name
    for name in ["bsr:2x2", "dense", "nm:2:4"]:
        assert SparseTensor.from_scipy(m, name).nnz == 2, name


def test_nan_is_a_nonzero() -> None:
    a = np.array([[np.nan, 0], [0, 1]], np.float32)
    for name in ["csr", "bsr:2x2", "dense", "hyb"]:
        t = SparseTensor.from_dense(a, name)
        assert t.nnz == 2
        np.testing.assert_array_equal(t.to_dense(), a)


def test_with_values_shares_structure() -> None:
    t = SparseTensor.from_dense(A, "csr")
    new = np.arange(5, dtype=np.float64)
    u = t.with_values(new)
    assert u.positions[1] is t.positions[1]
    assert u.coordinates[1] is t.coordinates[1]
    assert u.values is not new
    assert u.dtype == np.float64
    np.testing.assert_array_equal(u.to_coo()[1], new)
    with pytest.raises(FormatError, match="values must be 1-D with 5 elements"):
        t.with_values(np.ones(4))
    h = SparseTensor.from_dense(A, "hyb")
    hv = h.with_values(np.ones(h.nse, np.float32))
    for p, q in zip(h.parts, hv.parts, strict=True):
        assert all(x is y for x, y in zip(p.coordinates, q.coordinates, strict=True))


def test_buffers_order_and_repr() -> None:
    t = SparseTensor.from_dense(A, "dcsr")
    assert [n for n, _ in t.buffers()] == ["pos0", "crd0", "pos1", "crd1", "values"]
    assert t.buffers()[0][1] is t.positions[0]
    h = SparseTensor.from_dense(A, "bsr+csr:2x2:2")
    assert [n for n, _ in h.buffers()] == [
        "part0.pos1",
        "part0.crd1",
        "part0.values",
        "part1.pos1",
        "part1.crd1",
        "part1.values",
    ]
    assert repr(t) == "SparseTensor(3x4 float32 dcsr, nse=5)"
    assert repr(h) == "SparseTensor(3x4 float32 bsr+csr:2x2:2, 2 parts, nse=7)"
    with pytest.raises(FormatError, match="composable tensor has no values"):
        _ = h.values


def test_layout_as_attribute_text() -> None:
    text = parse_layout("dcsr").attr_text()  # type: ignore[union-attr]
    t = SparseTensor.from_dense(A, text)
    assert t.layout == parse_layout("dcsr")


def test_nonunique_layout_keeps_duplicates() -> None:
    lay = layout(["compressed_varied(nonunique)", "singleton(nonunique)"])
    t = SparseTensor.from_coo((2, 2), [[0, 0, 1], [1, 1, 0]], [1.0, 2.0, 3.0], lay)
    assert bufs(t)["crd1"] == [1, 1, 0]
    np.testing.assert_array_equal(t.to_dense(), [[0, 3], [3, 0]])
    np.testing.assert_array_equal(t.to("csr").to_dense(), [[0, 3], [3, 0]])


# -- composable layouts ---------------------------------------------------------------


def _rows_matrix(lengths: list[int], ncols: int = 64) -> sp.csr_array:
    rows = np.repeat(np.arange(len(lengths)), lengths)
    cols = np.concatenate([np.arange(n) for n in lengths])
    vals = np.arange(1, rows.size + 1, dtype=np.float64)
    return sp.csr_array((vals, (rows, cols)), shape=(len(lengths), ncols))


def test_hyb_buckets_by_row_length() -> None:
    m = _rows_matrix([0, 1, 2, 3, 5, 40])
    t = SparseTensor.from_scipy(m, "hyb")
    assert len(t.parts) == 7  # widths 1, 2, 4, 8, 16, 32, then csr
    rows_of = [sorted(set(p.to_coo()[0][0].tolist())) for p in t.parts]
    assert rows_of == [[1], [2], [3], [4], [], [], [5]]
    widths = [p.coordinates[1].size // max(p.coordinates[0].size, 1) for p in t.parts[:4]]
    assert widths == [1, 2, 4, 8]
    assert str(t.parts[2].layout.levels[1]) == "compressed_fixed[4]"
    total = sum(p.to_scipy() for p in t.parts)
    np.testing.assert_array_equal(total.toarray(), m.toarray())
    np.testing.assert_array_equal(t.to_scipy().toarray(), m.toarray())
    assert t.nnz == m.nnz


def test_hyb_column_partitions() -> None:
    # 10 columns in 2 partitions of width 5; row 0 has 1 + 3 entries, row 1 has 5 + 0
    m = sp.csr_array(
        (np.ones(9), ([0, 0, 0, 0, 1, 1, 1, 1, 1], [0, 5, 6, 9, 0, 1, 2, 3, 4])), shape=(2, 10)
    )
    lay = parse_layout("hyb:2:4")
    which = assign_parts(lay, (2, 10), np.stack(m.tocoo().coords))  # type: ignore[arg-type]
    names = [lay.parts[i].params for i in which]  # type: ignore[union-attr]
    assert names == [
        (0, 2, 0, 1),  # row 0, partition 0: 1 entry
        (1, 2, 2, 4),  # row 0, partition 1: 3 entries
        (1, 2, 2, 4),
        (1, 2, 2, 4),
        (),  # row 1, partition 0: 5 entries > 4: rest
        (),
        (),
        (),
        (),
    ]
    t = SparseTensor.from_scipy(m, lay)
    np.testing.assert_array_equal(t.to_dense(), m.toarray())


def test_bsr_rest_takes_dense_blocks() -> None:
    m = np.zeros((5, 6), np.float32)
    m[0:2, 0:2] = [[1, 2], [3, 0]]  # 3 nonzeros: BSR
    m[2, 4] = 4  # sparse block: CSR
    m[4, 2:4] = [5, 6]  # partial edge block, 2 nonzeros: CSR at k=3
    t = SparseTensor.from_dense(m, "bsr+csr:2x2:3")
    bsr, rest = t.parts
    assert bufs(bsr)["values"] == [1, 2, 3, 0]
    assert bufs(rest) == {"pos1": [0, 0, 0, 1, 1, 3], "crd1": [4, 2, 3], "values": [4, 5, 6]}
    np.testing.assert_array_equal(t.to_dense(), m)
    t2 = SparseTensor.from_dense(m, "bsr+csr:2x2:2")
    assert t2.parts[0].nnz == 5
    assert t2.parts[1].nnz == 1


def test_composable_rejects_duplicates() -> None:
    with pytest.raises(FormatError, match=r"duplicate coordinate \(0, 1\) \(entries 0 and 2\)"):
        SparseTensor.from_coo((2, 2), [[0, 1, 0], [1, 1, 1]], [1.0, 2, 3], "hyb")


# -- validation errors -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.complex256, np.uint8, np.float128])
def test_bad_value_dtype(dtype: type) -> None:
    with pytest.raises(FormatError, match=r"value dtype .* is not supported; expected one of"):
        SparseTensor.from_dense(np.eye(2, dtype=dtype), "csr")


def test_bad_scipy_input() -> None:
    with pytest.raises(FormatError, match=r"expected a scipy\.sparse matrix or array, got ndarray"):
        SparseTensor.from_scipy(A)
    with pytest.raises(FormatError, match="value dtype uint8"):
        SparseTensor.from_scipy(sp.csr_array(A.astype(np.uint8)))
    # scipy means duplicates summed (test_runtime_robustness.py covers every layout)
    dup = sp.coo_array(([1.0, 2.0], ([1, 1], [2, 2])), shape=(3, 3))
    assert SparseTensor.from_scipy(dup, "csr").to_dense()[1, 2] == 3.0
    with pytest.raises(FormatError, match="needs a matrix"):
        SparseTensor.from_dense(np.ones((2, 2, 2)), "csr").to_scipy()


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ((3, -1), "shape must be non-negative, got -1"),
        ((3, 2.0), "shape must contain ints"),
        ((3,), r"layout csr has rank 2, but the tensor has 1 dimensions"),
        (5, "shape must be a sequence of ints"),
    ],
)
def test_bad_shape(shape: object, message: str) -> None:
    lay = parse_layout("csr")
    with pytest.raises(FormatError, match=message):
        SparseTensor.from_coo(shape, np.zeros((2, 0), int), [], lay)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("coords", "values", "message"),
    [
        (
            [[0, 1, 2, 2], [0, 1, 2, 7]],
            [1, 2, 3, 4],
            "coordinate 7 in dimension 1 is out of range"
            r" for size 5 \(entry 3\)",
        ),
        ([[0, -1], [0, 0]], [1, 2], r"coordinate -1 in dimension 0 is out of range for size 3"),
        ([[0.0], [1.0]], [1], "coordinates must be integers, got dtype float64"),
        ([[0, 1]], [1, 2], r"coordinates must have shape \(ndim, nnz\) = \(2, nnz\)"),
        ([[0, 1], [0, 1]], [1, 2, 3], "values must be 1-D with 2 elements"),
        ([[0, 1, 0], [2, 0, 2]], [1, 2, 3], r"duplicate coordinate \(0, 2\) \(entries 0 and 2\)"),
    ],
)
def test_bad_coo(coords: object, values: object, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        SparseTensor.from_coo((3, 5), coords, np.asarray(values, np.float32), "csr")


def test_other_constructor_errors() -> None:
    with pytest.raises(FormatError, match="rank >= 1"):
        SparseTensor.from_dense(np.float32(1), "csr")
    with pytest.raises(FormatError, match="unknown layout 'blocked'"):
        SparseTensor.from_dense(A, "blocked")
    with pytest.raises(FormatError, match=r"has rank 3, but the tensor has 2 dimensions"):
        SparseTensor.from_dense(A, parse_layout("csr", 3))
    with pytest.raises(FormatError, match="unknown scipy format 'bsr'"):
        SparseTensor.from_dense(A, "csr").to_scipy("bsr")


def test_position_overflow() -> None:
    lay = parse_layout("csr").with_widths(8, 32)  # type: ignore[union-attr]
    ok = np.ones((1, 127), np.float32)
    assert SparseTensor.from_dense(ok, lay).positions[1].tolist() == [0, 127]
    with pytest.raises(FormatError, match=r"stores 128 entries, which overflows 8-bit positions"):
        SparseTensor.from_dense(np.ones((1, 128), np.float32), lay)
    # 2**32 stored entries: found by arithmetic, before anything that large is allocated.
    ragged = layout(["dense_fixed", "dense_varied"], pos_width=32, crd_width=64)
    big = (2, 2**31)
    with pytest.raises(FormatError, match=r"overflows 32-bit positions.*\n.*hint: use 64-bit"):
        SparseTensor.from_coo(big, [[0, 1], [2**31 - 1, 2**31 - 1]], [1.0, 2.0], ragged)
    with pytest.raises(FormatError, match="more than 2\\*\\*63 - 1"):
        SparseTensor.from_coo((2**40, 2**40), [[0], [0]], [1.0], "dense")


def test_coordinate_overflow() -> None:
    lay = parse_layout("csr").with_widths(32, 8)  # type: ignore[union-attr]
    with pytest.raises(FormatError, match="has size 300, which does not fit 8-bit coordinates"):
        SparseTensor.from_coo((2, 300), [[0], [1]], [1.0], lay)
    # Rows of a csr are dense: only the compressed level's size must fit.
    assert SparseTensor.from_coo((300, 2), [[299], [1]], [1.0], lay).nnz == 1


# -- from_buffers validation ---------------------------------------------------------------


def _csr_buffers() -> tuple[list[object], list[object], np.ndarray]:
    t = SparseTensor.from_dense(A, "csr")
    return list(t.positions), list(t.coordinates), t.values


def test_from_buffers_accepts_and_copies() -> None:
    pos, crd, vals = _csr_buffers()
    t = SparseTensor.from_buffers((3, 4), "csr", pos, crd, vals)
    np.testing.assert_array_equal(t.to_dense(), A)
    assert t.coordinates[1] is not crd[1]


@pytest.mark.parametrize(
    ("pos1", "crd1", "message"),
    [
        ([0, 3, 2, 5], None, r"positions decrease at index 2 \(3 then 2\)"),
        ([1, 2, 2, 5], None, "positions must start at 0, got 1"),
        ([0, 2, 5], None, "needs 4 positions for 3 parents, got 3"),
        ([0, 2, 2, 4], None, "positions end at 4 but there are 5 coordinates"),
        (None, [2, 0, 0, 1, 3], r"not strictly increasing within a parent \(2 then 0"),
        (None, [0, 0, 0, 1, 3], r"not strictly increasing within a parent \(0 then 0"),
        (None, [0, 2, 0, 1, 9], "coordinate 9 at position 4 is out of range for size 4"),
        (None, [0, 2, 0, -1, 3], "coordinate -1 at position 3 is out of range"),
    ],
)
def test_from_buffers_rejects(pos1: object, crd1: object, message: str) -> None:
    pos, crd, vals = _csr_buffers()
    if pos1 is not None:
        pos[1] = np.array(pos1, np.int32)
    if crd1 is not None:
        crd[1] = np.array(crd1, np.int32)
    with pytest.raises(FormatError, match=message):
        SparseTensor.from_buffers((3, 4), "csr", pos, crd, vals)


def test_from_buffers_rejects_structure_and_dtypes() -> None:
    pos, crd, vals = _csr_buffers()
    with pytest.raises(FormatError, match=r"positions of level 1 must be int32 \(pos_width 32\)"):
        SparseTensor.from_buffers((3, 4), "csr", [None, pos[1].astype(np.int64)], crd, vals)
    with pytest.raises(FormatError, match=r"level 0 \(dense\) has no positions buffer"):
        SparseTensor.from_buffers((3, 4), "csr", [pos[1], pos[1]], crd, vals)
    with pytest.raises(FormatError, match="needs a coordinates buffer"):
        SparseTensor.from_buffers((3, 4), "csr", pos, [None, None], vals)
    with pytest.raises(FormatError, match="must list one entry per level"):
        SparseTensor.from_buffers((3, 4), "csr", pos[1:], crd, vals)
    with pytest.raises(FormatError, match="values must be 1-D with 5 elements"):
        SparseTensor.from_buffers((3, 4), "csr", pos, crd, vals[:4])
    with pytest.raises(FormatError, match="value dtype uint16"):
        SparseTensor.from_buffers((3, 4), "csr", pos, crd, vals.astype(np.uint16))
    with pytest.raises(FormatError, match="not a composable one"):
        SparseTensor.from_buffers((3, 4), "hyb", pos, crd, vals)


def test_from_buffers_ell_padding() -> None:
    def ell(crd: list[int]) -> SparseTensor:
        c = np.array(crd, np.int32)
        return SparseTensor.from_buffers((2, 4), "ell", [None, None], [None, c], np.ones(c.size))

    assert ell([0, 2, -1, 1, -1, -1]).nnz == 3
    with pytest.raises(FormatError, match=r"padding \(-1\) before a real entry in parent 0"):
        ell([0, -1, 2, 1, -1, -1])
    with pytest.raises(FormatError, match=r"coordinate -2 is out of range \(padding is -1\)"):
        ell([0, -2, -1, 1, -1, -1])
    with pytest.raises(FormatError, match=r"needs 2 x 2 coordinates, got 5"):
        ell([0, 2, -1, 1, -1])
    with pytest.raises(FormatError, match="not strictly increasing"):
        ell([2, 0, -1, 1, -1, -1])


def test_from_buffers_coo_order_and_duplicates() -> None:
    def coo(rows: list[int], cols: list[int]) -> SparseTensor:
        r, c = np.array(rows, np.int32), np.array(cols, np.int32)
        pos = np.array([0, r.size], np.int32)
        return SparseTensor.from_buffers((3, 3), "coo", [pos, None], [r, c], np.ones(r.size))

    assert coo([0, 0, 2], [1, 2, 0]).nnz == 3
    with pytest.raises(FormatError, match="not non-decreasing within a parent"):
        coo([0, 2, 0], [1, 0, 2])
    with pytest.raises(FormatError, match="COO entries are not sorted"):
        coo([0, 0, 2], [2, 1, 0])
    with pytest.raises(FormatError, match=r"duplicate entry at level coordinates \(0, 1\)"):
        coo([0, 0, 2], [1, 1, 0])
    pos = np.array([0, 3], np.int32)
    r, c = np.array([0, 0, 2], np.int32), np.array([1, 2], np.int32)
    with pytest.raises(FormatError, match=r"needs 3 coordinates \(one per parent\), got 2"):
        SparseTensor.from_buffers((3, 3), "coo", [pos, None], [r, c], np.ones(3))


def test_from_buffers_bsr_padding_must_be_zero() -> None:
    t = SparseTensor.from_dense(A, "bsr:2x2")
    vals = t.values.copy()
    vals[10] = 7  # block (1, 0), row 3: outside the 3 x 4 shape
    with pytest.raises(FormatError, match=r"stored entry at \(3, 0\) with value 7.0 lies outside"):
        SparseTensor.from_buffers(t.shape, t.layout, t.positions, t.coordinates, vals)  # type: ignore[arg-type]


def test_from_buffers_structured() -> None:
    t = SparseTensor.from_dense(np.array([[1, 0, 2, 0]], np.float32), "nm:2:4")
    none = [None, None, None]
    unordered = np.array([2, 0], np.int32)
    with pytest.raises(FormatError, match="not strictly increasing"):
        SparseTensor.from_buffers((1, 4), "nm:2:4", none, [None, None, unordered], t.values)
    long = np.array([0, 1, 2], np.int32)
    with pytest.raises(FormatError, match=r"needs 2 coordinates \(2 per parent\), got 3"):
        SparseTensor.from_buffers((1, 4), "nm:2:4", none, [None, None, long], t.values)


def test_explicit_zero_does_not_count_against_nm() -> None:
    coords = [[0, 0, 0], [0, 1, 2]]
    t = SparseTensor.from_coo((1, 4), coords, [1.0, 0.0, 2.0], "nm:2:4")
    assert bufs(t) == {"crd2": [0, 2], "values": [1, 2]}
    with pytest.raises(FormatError, match=r"duplicate coordinate \(0, 1\)"):
        SparseTensor.from_coo((1, 4), [[0, 0], [1, 1]], [0.0, 2.0], "nm:2:4")


def test_huge_shape_sorts_without_a_linear_key() -> None:
    lay = parse_layout("coo").with_widths(64, 64)  # type: ignore[union-attr]
    big = (2**40, 2**40)
    coords = np.array([[2**39, 5, 5], [7, 2**40 - 1, 3]])
    t = SparseTensor.from_coo(big, coords, [1.0, 2.0, 3.0], lay)
    assert bufs(t)["crd0"] == [5, 5, 2**39]
    assert bufs(t)["crd1"] == [3, 2**40 - 1, 7]
    c, v = t.to(parse_layout("dcsr").with_widths(0, 0)).to_coo()  # type: ignore[union-attr]
    assert c.tolist() == [[5, 5, 2**39], [3, 2**40 - 1, 7]]
    assert v.tolist() == [3.0, 2.0, 1.0]
    with pytest.raises(FormatError, match=r"duplicate coordinate \(5, 3\) \(entries 1 and 2\)"):
        SparseTensor.from_coo(big, [[2**39, 5, 5], [7, 3, 3]], [1.0, 2.0, 3.0], lay)


def test_more_validation_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    big = np.array([[0], [2**63]], dtype=np.uint64)
    with pytest.raises(FormatError, match="coordinate 9223372036854775808 is out of range"):
        SparseTensor.from_coo((3, 3), big, [1.0], "csr")
    with pytest.raises(FormatError, match=r"expected a 2-D scipy\.sparse matrix, got 3-D"):
        SparseTensor.from_scipy(sp.coo_array(np.ones((2, 2, 2))))
    bad = sp.csr_array((np.array([1.0]), np.array([7]), np.array([0, 1])), shape=(1, 3))
    with pytest.raises(FormatError, match="invalid scipy csr matrix: an index is out of range"):
        SparseTensor.from_scipy(bad, "csr")
    with pytest.raises(
        FormatError, match=r"rule 'ell_bucket' needs a matrix, got shape \(2, 2, 2\)"
    ):
        assign_parts(parse_layout("hyb"), (2, 2, 2), np.zeros((3, 0), int))  # type: ignore[arg-type]


def test_mma_sp_needs_dense_rows_and_groups() -> None:
    dmap = DimMap.parse("(d0, d1, d2) -> (d0, d1, d2 floordiv 4, d2 mod 4)")
    levels = ["dense_fixed", "dense_fixed", "dense_fixed", "structured[2,4]"]
    batched = layout(levels, dmap, nm_metadata="mma_sp_m16n8k16")
    with pytest.raises(FormatError, match=r"needs levels \[dense, dense, structured"):
        SparseTensor.from_dense(np.eye(4, dtype=np.float32)[None], batched)


def test_from_buffers_other_levels() -> None:
    ragged = layout(["dense_fixed", "dense_varied"])
    pos = np.array([0, 3, 3, 8], np.int32)
    with pytest.raises(FormatError, match="parent 2 stores 5 entries, more than the level size 4"):
        SparseTensor.from_buffers((3, 4), ragged, [None, pos], [None, None], np.ones(8))
    with pytest.raises(FormatError, match="positions of level 1 must be 1-D"):
        SparseTensor.from_buffers((3, 4), ragged, [None, pos[None]], [None, None], np.ones(8))
    loose = layout(["dense_fixed", "loose_compressed"])
    lpos = np.array([-1, 0, 0, 0], np.int32)
    with pytest.raises(FormatError, match="positions must be non-negative, got -1"):
        SparseTensor.from_buffers((2, 4), loose, [None, lpos], [None, np.zeros(1, np.int32)], [1.0])
    unordered = layout(["dense_fixed", "compressed_varied(nonordered)"])
    crd = np.array([3, 1, 3], np.int32)
    with pytest.raises(FormatError, match=r"coordinate 3 repeats within a parent \(position 0\)"):
        SparseTensor.from_buffers(
            (1, 4), unordered, [None, np.array([0, 3], np.int32)], [None, crd], np.ones(3)
        )
    ok = np.array([3, 1, 2], np.int32)
    t = SparseTensor.from_buffers(
        (1, 4), unordered, [None, np.array([0, 3], np.int32)], [None, ok], np.ones(3)
    )
    assert t.to_coo()[0].tolist() == [[0, 0, 0], [1, 2, 3]]
    c = np.zeros(6, np.int32)
    with pytest.raises(FormatError, match=r"needs 2 x 4 coordinates, got 6"):
        SparseTensor.from_buffers((2, 4), "ell:4", [None, None], [None, c], np.ones(6))
    nm = SparseTensor.from_dense(np.zeros((16, 16), np.float32), mma("mma_sp_m16n8k16"))
    short = nm.coordinates[2][:-1]
    with pytest.raises(FormatError, match="metadata for 16 rows and 4 groups needs 8 words"):
        SparseTensor.from_buffers((16, 16), nm.layout, [None] * 3, [None, None, short], nm.values)  # type: ignore[arg-type]


def test_scipy_conversion_paths_keep_explicit_zeros() -> None:
    m = sp.csr_array((np.array([1.0, 0.0, 2.0]), np.array([0, 1, 3]), np.array([0, 2, 3])))
    for src in [m, m.tocsc(), m.tocoo()]:
        for name in ["csr", "csc"]:
            t = SparseTensor.from_scipy(src, name)
            assert t.nnz == 3
            np.testing.assert_array_equal(t.to_scipy("coo").coords, m.tocoo().coords)


def test_bsr_from_scipy_matches_general_packing() -> None:
    rng = np.random.default_rng(3)
    dense = (rng.integers(1, 9, (6, 8)) * (rng.random((6, 8)) < 0.3)).astype(np.float32)
    m = sp.csr_array(dense)
    via_scipy = SparseTensor.from_scipy(m, "bsr:3x4")  # blocks divide the shape: tobsr
    general = SparseTensor.from_coo(
        m.shape, np.stack(np.nonzero(dense)), dense[dense != 0], "bsr:3x4"
    )
    assert bufs(via_scipy) == bufs(general)
    assert via_scipy.positions[1].dtype == np.int32
    np.testing.assert_array_equal(via_scipy.to_dense(), dense)


def test_bsr_from_scipy_drops_explicit_zeros() -> None:
    m = sp.csr_array((np.array([0.0, 1.0, 0.0]), np.array([0, 3, 1]), np.array([0, 1, 2, 3])))
    t = SparseTensor.from_scipy(m, "bsr:1x2")  # shape (3, 4): tobsr path
    assert bufs(t) == {"pos1": [0, 0, 1, 1], "crd1": [1], "values": [0, 1]}
    assert m.nnz == 3  # the input is left alone


@pytest.mark.parametrize("widths", [(32, 32), (64, 16)])
def test_coo_shortcut_matches_the_general_path(widths: tuple[int, int]) -> None:
    m = sp.random(40, 30, density=0.1, format="csr", random_state=7, dtype=np.float32)
    coo = parse_layout("coo").with_widths(*widths)  # type: ignore[union-attr]
    fast = SparseTensor.from_scipy(m, coo)
    rows, cols = m.tocoo().row, m.tocoo().col
    general = SparseTensor.from_coo(m.shape, np.stack([rows, cols]), m.tocoo().data, coo)
    for (name, a), (_, b) in zip(fast.buffers(), general.buffers(), strict=True):
        assert a.dtype == b.dtype, name
        assert np.array_equal(a, b), name
    assert (fast.to_scipy() != m).nnz == 0


def test_from_scipy_takes_sparse_vectors() -> None:
    """scipy's 1-D sparse arrays (coo_array, dok_array) pack into rank-1 layouts, their
    duplicates summed; they were refused as 'expected a 2-D scipy.sparse matrix'."""
    coo = sp.coo_array((np.array([1.0, 2.0, 3.0]), (np.array([4, 1, 4]),)), shape=(6,))
    t = SparseTensor.from_scipy(coo, "csr")
    assert t.shape == (6,)
    np.testing.assert_array_equal(t.to_dense(), [0, 2, 0, 0, 4, 0])
    dok = sp.dok_array((5,), dtype=np.float32)
    dok[3] = 7.0
    np.testing.assert_array_equal(SparseTensor.from_scipy(dok, "coo").to_dense(), [0, 0, 0, 7, 0])


def test_index_buffers_cannot_be_made_writable_again() -> None:
    """Calls check a tensor's index buffers once and trust them after; a caller who set
    one writable again and edited it made the next call read out of bounds (a
    segfault). They are views numpy will not make writable."""
    t = SparseTensor.from_dense(A, "csr")
    for buf in (t.positions[1], t.coordinates[1]):
        with pytest.raises(ValueError, match="WRITEABLE"):
            buf.setflags(write=True)
    u = t.with_values(np.ones(t.nse))  # shares them, still locked
    assert u.coordinates[1] is t.coordinates[1]
    with pytest.raises(ValueError, match="WRITEABLE"):
        u.coordinates[1].setflags(write=True)
    t.values[0] = 7.0  # values may change


@pytest.mark.parametrize("layout", ["csr", "coo", "csc", "bsr:2x2", "ell", "dcsr"])
def test_bool_tensors_pack_as_the_kernels_give_them_back(layout: str) -> None:
    """An i1 kernel returns bool SparseTensors, and from_dense refused bool to pack one
    again ("value dtype bool is not supported")."""
    mask = np.random.default_rng(1).random((7, 6)) > 0.6
    t = SparseTensor.from_dense(mask, layout)
    assert t.dtype == np.bool_
    assert t.nnz == int(mask.sum())
    np.testing.assert_array_equal(t.to_dense(), mask)
    np.testing.assert_array_equal(t.astype(np.float32).to_dense(), mask.astype(np.float32))
