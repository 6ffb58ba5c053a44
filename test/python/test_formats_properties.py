"""Property tests of ``sparsecomp.formats``: exact round trips through every layout."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from sparsecomp.formats import (
    AnyLayout,
    Composable,
    DimMap,
    Layout,
    Level,
    Part,
    SparseTensor,
    assign_parts,
    parse_layout,
)

DTYPES = [np.float32, np.float64, np.float16, np.int32, np.int64]
WIDTHS = [(32, 32), (64, 64), (32, 64), (64, 32), (0, 0)]
EXACT = ["csr", "csc", "coo", "dcsr", "ell"]
SETTINGS = settings(max_examples=100, deadline=None)


def _layout(levels: list[str], dmap: str | None = None) -> Layout:
    lv = tuple(Level.parse(x) for x in levels)
    return Layout(lv, DimMap.parse(dmap) if dmap else DimMap.identity(len(lv)))


#: Level combinations no short name covers.
EXOTIC = [
    _layout(["dense_fixed", "dense_varied"]),
    _layout(["dense_varied", "compressed_varied"]),
    _layout(["compressed_varied", "dense_fixed"]),
    _layout(["loose_compressed", "compressed_varied(nonordered)"]),
    _layout(["dense_fixed", "loose_compressed"], "(d0, d1) -> (d1, d0)"),
    _layout(["compressed_varied", "compressed_fixed"]),
    _layout(["dense_fixed", "compressed_fixed"], "(d0, d1) -> (d1, d0)"),
    _layout(
        ["compressed_varied", "compressed_varied", "dense_fixed", "compressed_varied"],
        "(d0, d1) -> (d0 floordiv 3, d1 floordiv 2, d0 mod 3, d1 mod 2)",
    ),
    _layout(
        ["dense_fixed", "compressed_varied(nonunique)", "singleton"],
        "(d0, d1) -> (d1 floordiv 4, d0, d1 mod 4)",
    ),
]


@dataclass(frozen=True)
class Case:
    """A canonical CSR matrix of small integers (exact in every dtype).

    scipy.sparse has no float16: a float16 case (``half``) is a float32 matrix
    whose values are narrowed, exactly, when packed; ``to_scipy`` widens back.
    """

    m: sp.csr_array
    half: bool = False

    def pack(self, layout: Any) -> SparseTensor:
        if not self.half:
            return SparseTensor.from_scipy(self.m, layout)
        coo = self.m.tocoo()
        return SparseTensor.from_coo(self.m.shape, coo.coords, coo.data.astype(np.float16), layout)

    def nm(self, n: int = 2, group: int = 4) -> Case:
        """Each row's groups of ``group`` columns cut to their first ``n`` entries."""
        coo = self.m.tocoo()
        key = coo.row * (self.m.shape[1] // group + 1) + coo.col // group
        order = np.lexsort((coo.col, key))
        first = np.searchsorted(key[order], key[order])  # first entry of each group
        keep = order[np.arange(order.size) - first < n]
        cut = sp.csr_array((coo.data[keep], (coo.row[keep], coo.col[keep])), shape=self.m.shape)
        return Case(cut, self.half)


@st.composite
def cases(draw: st.DrawFn, max_dim: int = 9, zeros: bool = False) -> Case:
    rows, cols = draw(st.integers(0, max_dim)), draw(st.integers(0, max_dim))
    cells = st.tuples(st.integers(0, max(rows - 1, 0)), st.integers(0, max(cols - 1, 0)))
    entries = sorted(draw(st.sets(cells, max_size=rows * cols)))
    n = len(entries)
    mags = draw(st.lists(st.integers(0 if zeros else 1, 100), min_size=n, max_size=n))
    signs = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    dtype = draw(st.sampled_from(DTYPES))
    wide = np.float32 if dtype == np.float16 else dtype
    vals = np.array([-v if s else v for v, s in zip(mags, signs, strict=True)], wide)
    coords = np.array(entries, dtype=np.int64).reshape(-1, 2).T
    m = sp.csr_array((vals, (coords[0], coords[1])), shape=(rows, cols), dtype=wide)
    return Case(m, dtype == np.float16)


def widen(layout: AnyLayout, pos: int, crd: int) -> AnyLayout:
    """``layout`` (or every part of it) with the given index widths."""
    if isinstance(layout, Layout):
        return layout.with_widths(pos, crd)
    parts = tuple(Part(p.rule, p.params, p.layout.with_widths(pos, crd)) for p in layout.parts)
    return Composable(parts, layout.name)


@st.composite
def layouts(draw: st.DrawFn, case: Case) -> tuple[str | Layout, Case]:
    """A layout name for ``case``, and the case adapted to it (made 2:4 for nm:2:4)."""
    m = case.m
    most = int(np.diff(m.indptr).max()) if m.shape[0] else 0
    r, c = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    k = draw(st.integers(1, r * c))
    names = [*EXACT, f"ell:{most + draw(st.integers(0, 2)) or 1}", f"bsr:{r}x{c}", "nm:2:4"]
    names += ["hyb", "hyb:2:4", f"bsr+csr:{r}x{c}", f"bsr+csr:{r}x{c}:{k}", "dense"]
    name = draw(st.sampled_from([*names, *EXOTIC]))
    return name, case.nm() if name == "nm:2:4" else case


def assert_same(t: SparseTensor, case: Case) -> None:
    """``t`` holds exactly the entries of the case (values and dtype included)."""
    m = case.m
    assert t.dtype == (np.float16 if case.half else m.dtype)
    out = t.to_scipy("csr")
    assert out.shape == m.shape
    assert out.dtype == m.dtype
    np.testing.assert_array_equal(out.indptr, m.indptr)
    np.testing.assert_array_equal(out.indices, m.indices)
    np.testing.assert_array_equal(out.data, m.data)
    assert t.nnz == m.nnz
    coords, vals = t.to_coo()
    coo = m.tocoo()
    np.testing.assert_array_equal(coords, np.stack([coo.row, coo.col]))
    np.testing.assert_array_equal(vals, coo.data.astype(t.dtype))
    np.testing.assert_array_equal(t.to_dense(), m.toarray().astype(t.dtype))


@SETTINGS
@given(data=st.data(), case=cases(), widths=st.sampled_from(WIDTHS))
def test_round_trip(data: st.DataObject, case: Case, widths: tuple[int, int]) -> None:
    name, case = data.draw(layouts(case))
    lay = widen(parse_layout(name), *widths)
    assert isinstance(lay, Layout | Composable)
    t = case.pack(lay)
    assert t.layout == lay
    assert_same(t, case)


@SETTINGS
@given(data=st.data(), case=cases())
def test_layout_to_layout(data: st.DataObject, case: Case) -> None:
    first, case = data.draw(layouts(case))
    second, _ = data.draw(layouts(case))
    if second == "nm:2:4":
        case = case.nm()
    t = case.pack(first)
    u = t.to(second)
    assert_same(u, case)
    assert_same(u.to(first), case)


@SETTINGS
@given(data=st.data(), case=cases())
def test_from_buffers_accepts_packed_buffers(data: st.DataObject, case: Case) -> None:
    name, case = data.draw(layouts(case))
    t = case.pack(name)
    for part in t.parts or (t,):
        assert isinstance(part.layout, Layout)
        again = SparseTensor.from_buffers(
            part.shape, part.layout, part.positions, part.coordinates, part.values
        )
        assert [n for n, _ in again.buffers()] == [n for n, _ in part.buffers()]
        for (_, a), (_, b) in zip(again.buffers(), part.buffers(), strict=True):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)


@SETTINGS
@given(data=st.data(), case=cases(), seed=st.integers(0, 2**32 - 1))
def test_input_order_does_not_matter(data: st.DataObject, case: Case, seed: int) -> None:
    name, case = data.draw(layouts(case))
    coo = case.m.tocoo()
    perm = np.random.default_rng(seed).permutation(coo.nnz)
    coords = np.stack([coo.row, coo.col])[:, perm]
    shuffled = SparseTensor.from_coo(case.m.shape, coords, coo.data[perm], name)
    ordered = SparseTensor.from_scipy(case.m, name)
    assert [n for n, _ in shuffled.buffers()] == [n for n, _ in ordered.buffers()]
    for (_, a), (_, b) in zip(shuffled.buffers(), ordered.buffers(), strict=True):
        np.testing.assert_array_equal(a, b)


@SETTINGS
@given(case=cases(zeros=True), name=st.sampled_from(EXACT), widths=st.sampled_from(WIDTHS))
def test_exact_layouts_keep_explicit_zeros(case: Case, name: str, widths: tuple[int, int]) -> None:
    t = case.pack(widen(parse_layout(name), *widths))
    assert_same(t, case)
    assert_same(t.to("coo").to(name), case)


@SETTINGS
@given(
    case=cases(max_dim=12),
    name=st.sampled_from(["hyb", "hyb:2:4", "hyb:3:2", "bsr+csr:2x3", "bsr+csr:3x2:4"]),
)
def test_composable_parts_follow_rules(case: Case, name: str) -> None:
    m = case.m
    lay = parse_layout(name)
    assert isinstance(lay, Composable)
    t = case.pack(lay)
    total = sum((p.to_scipy() for p in t.parts), sp.csr_array(m.shape, dtype=m.dtype))
    np.testing.assert_array_equal(total.toarray(), m.toarray())
    coo = m.tocoo()
    which = assign_parts(lay, m.shape, np.stack([coo.row, coo.col]))
    for i, (part, tensor) in enumerate(zip(lay.parts, t.parts, strict=True)):
        assert tensor.nnz == int((which == i).sum())
        _check_rule(part, m.shape, coo, which, i)


def _check_rule(part: Part, shape: Any, coo: Any, which: np.ndarray, i: int) -> None:
    """Brute-force the rule of part ``i`` over the entries that earlier parts left."""
    free = which >= i
    mine = which == i
    if part.rule == "ell_bucket":
        p, nparts, lo, hi = part.params
        width = -(-shape[1] // nparts)
        for row in range(shape[0]):
            here = free & (coo.row == row) & (coo.col // width == p)
            count = int(here.sum())
            assert bool((mine & here).any()) == (lo < count <= hi)
            assert (mine & here).sum() in (0, count)
            assert not (mine & (coo.row == row) & ~here).any()
    elif part.rule == "block_dense":
        r, c, k = part.params
        for br, bc in {(a // r, b // c) for a, b in zip(coo.row, coo.col, strict=True)}:
            inside = free & (coo.row // r == br) & (coo.col // c == bc)
            taken = mine & inside
            assert taken.sum() in (0, inside.sum())
            assert bool(taken.any()) == (inside.sum() >= k)


@SETTINGS
@given(
    shape=st.lists(st.integers(0, 4), min_size=1, max_size=4),
    name=st.sampled_from(["csr", "coo", "dcsr", "dense"]),
    seed=st.integers(0, 2**32 - 1),
    dtype=st.sampled_from(DTYPES),
)
def test_any_rank_round_trip(shape: list[int], name: str, seed: int, dtype: type) -> None:
    rng = np.random.default_rng(seed)
    a = (rng.integers(-9, 10, shape) * (rng.random(shape) < 0.4)).astype(dtype)
    t = SparseTensor.from_dense(a, name)
    np.testing.assert_array_equal(t.to_dense(), a)
    coords, vals = t.to_coo()
    np.testing.assert_array_equal(coords, np.stack(np.nonzero(a)).reshape(a.ndim, -1))
    np.testing.assert_array_equal(vals, a[np.nonzero(a)])
    assert t.to("coo").to(name).nnz == np.count_nonzero(a)
