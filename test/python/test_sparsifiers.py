"""Tests of ``sparsecomp.formats.sparsifiers`` and ``sparsecomp.sparsify``."""

from __future__ import annotations

import math
import subprocess
import sys
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import sparsecomp
from sparsecomp.errors import FormatError
from sparsecomp.formats.sparsifiers import KINDS, Sparsifier, removed_count

NAN = math.nan
FAST = settings(max_examples=60, deadline=None)


def mask_of(x, text: str) -> list:
    return Sparsifier.parse(text).mask(np.asarray(x)).astype(int).tolist()


# -- hand-checked examples -------------------------------------------------------


def test_keep_all_drops_zeros_keeps_nan():
    x = np.array([1.0, 0.0, -0.0, NAN, -2.0])
    assert mask_of(x, "keep_all") == [1, 0, 0, 1, 1]
    out = sparsecomp.sparsify(x, "keep_all")
    assert np.array_equal(out, x, equal_nan=True)


def test_keep_all_complex_and_int():
    assert mask_of(np.array([0j, 1j, 2 + 0j]), "keep_all") == [0, 1, 1]
    assert mask_of(np.array([[0, 3], [-1, 0]], np.int16), "keep_all") == [[0, 1], [1, 0]]


def test_threshold_keeps_ge_and_never_nan():
    x = np.array([0.5, -1.0, 1.0, 0.999, NAN, -np.inf, 0.0])
    assert mask_of(x, "threshold:1") == [0, 1, 1, 0, 0, 1, 0]
    # t = 0 keeps every number, zeros included, but not NaN.
    assert mask_of(x, "threshold:0") == [1, 1, 1, 1, 0, 1, 1]
    assert mask_of(x, "threshold:inf") == [0, 0, 0, 0, 0, 1, 0]


def test_threshold_compares_exactly_not_in_element_type():
    x32 = np.float32(0.3)  # 0.30000001192092896
    above = float(x32) + 1e-12  # rounds to x32 in f32, but is larger than it
    assert np.float32(above) == x32
    assert mask_of(np.array([x32]), f"threshold:{above!r}") == [0]
    assert mask_of(np.array([x32]), f"threshold:{float(x32)!r}") == [1]
    # f16(0.1) = 0.0999755859375 < 0.1 although f16(0.1) == f16(x).
    assert mask_of(np.array([0.1], np.float16), "threshold:0.1") == [0]
    assert mask_of(np.array([0.3], np.float16), "threshold:0.3") == [1]  # 0.300048828125


def test_threshold_integers():
    x = np.array([-128, -3, 2, 3, 127], np.int8)
    assert mask_of(x, "threshold:2.5") == [1, 1, 0, 1, 1]  # |x| >= ceil(2.5)
    assert mask_of(x, "threshold:128") == [1, 0, 0, 0, 0]  # |-128| is 128, exactly
    assert mask_of(x, "threshold:129") == [0, 0, 0, 0, 0]
    assert mask_of(x, "threshold:1e30") == [0, 0, 0, 0, 0]
    assert mask_of(np.array([2**64 - 1], np.uint64), "threshold:1.8446744073709552e19") == [0]
    big = np.array([np.iinfo(np.int64).min, 2**53 + 1, 2**53], np.int64)
    assert mask_of(big, "threshold:9007199254740992") == [1, 1, 1]


def test_threshold_complex_uses_modulus():
    assert mask_of(np.array([3 + 4j, 1 + 1j, complex(NAN, 0)]), "threshold:5") == [1, 0, 0]


def test_scalar_fraction_removes_smallest():
    x = np.array([[1.0, -3.0, 0.0, 2.0], [5.0, -0.5, 4.0, 1.0]])
    # 8 elements, 0.5 removed -> 4 removed: 0, -0.5, then the two 1s.
    assert mask_of(x, "scalar_fraction:0.5") == [[0, 1, 0, 1], [1, 0, 1, 0]]
    assert mask_of(x, "scalar_fraction:0") == [[1] * 4] * 2  # the zero is kept too
    assert mask_of(x, "scalar_fraction:1") == [[0] * 4] * 2


def test_scalar_fraction_ties_keep_lower_index():
    x = np.array([2.0, -2.0, 2.0, 2.0, 1.0])
    # 0.4 * 5 = 2 removed: the 1, then the last of the tied 2s.
    assert mask_of(x, "scalar_fraction:0.4") == [1, 1, 1, 0, 0]
    assert mask_of(x, "scalar_fraction:0.8") == [1, 0, 0, 0, 0]


def test_scalar_fraction_rounding_half_up():
    x = np.array([3.0, 2.0, 1.0])
    assert mask_of(x, "scalar_fraction:0.5") == [1, 0, 0]  # 1.5 -> 2 removed
    assert mask_of(x, "scalar_fraction:0.49") == [1, 1, 0]  # 1.47 -> 1 removed
    assert mask_of(np.arange(1.0, 11.0), "scalar_fraction:0.7") == [0] * 7 + [1] * 3


def test_scalar_fraction_nan_removed_first_and_always():
    x = np.array([NAN, 1.0, 2.0, 3.0])
    assert mask_of(x, "scalar_fraction:0.25") == [0, 1, 1, 1]  # the NaN is the one removed
    assert mask_of(x, "scalar_fraction:0.5") == [0, 0, 1, 1]
    assert mask_of(x, "scalar_fraction:0") == [0, 1, 1, 1]  # more NaNs than removals
    assert mask_of(np.array([NAN, NAN, 1.0]), "scalar_fraction:0.3") == [0, 0, 1]


def test_scalar_fraction_int8_min():
    x = np.array([127, -128, 5, -6], np.int8)
    assert mask_of(x, "scalar_fraction:0.75") == [0, 1, 0, 0]


def test_scalar_fraction_flattens_all_dims():
    x = np.arange(24.0).reshape(2, 3, 4)
    kept = Sparsifier.parse("scalar_fraction:0.5").mask(x)
    assert kept.shape == x.shape
    assert np.array_equal(kept.reshape(-1), np.arange(24) >= 12)


def test_random_fraction_pinned():
    # Pins the stream: PCG64(seed).random_raw keys, smallest removed.
    assert mask_of(np.zeros((2, 6)), "random_fraction:0.5:42") == [
        [1, 0, 1, 0, 0, 1],
        [1, 1, 0, 0, 0, 1],
    ]
    assert mask_of(np.zeros(8), "random_fraction:0.25:7") == [1, 1, 1, 0, 1, 1, 0, 1]


def test_random_fraction_ignores_values_and_keeps_nan():
    s = Sparsifier.random_fraction(0.5, seed=3)
    a = s.mask(np.arange(10.0))
    b = s.mask(np.full(10, NAN))
    assert np.array_equal(a, b)
    assert int(a.sum()) == 5
    assert Sparsifier.parse("random_fraction:0.5") == Sparsifier.random_fraction(0.5, 0)


def test_block_fraction_keeps_best_blocks():
    x = np.array(
        [
            [1.0, 1.0, 0.0, 0.0, 9.0],
            [1.0, 1.0, 0.0, 1.0, 0.0],
            [0.0, 0.0, 3.0, 3.0, 0.0],
        ]
    )
    # 2x2 blocks: [[4, 1, 9], [0, 6, 0]] (edge blocks partial); 0.5 of 6 -> 3 removed.
    assert mask_of(x, "block_fraction:2x2:0.5") == [
        [1, 1, 0, 0, 1],
        [1, 1, 0, 0, 1],
        [0, 0, 1, 1, 0],
    ]


def test_block_fraction_ties_and_kept_zeros():
    x = np.array([[1.0, 0.0, -1.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    # 1x2 blocks: norms [1, 1, 0, 0]; 0.75 of 4 -> 3 removed; the first 1-block stays.
    assert mask_of(x, "block_fraction:1x2:0.75") == [[1, 1, 0, 0], [0, 0, 0, 0]]
    # The kept block's zero is part of the mask and of a sparse result.
    out = sparsecomp.sparsify(x, "block_fraction:1x2:0.75")
    assert out.tolist() == [[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]


def test_block_fraction_batches_rank_together():
    x = np.zeros((2, 2, 2))
    x[1, 0, 0] = 5.0
    x[0, 1, 1] = 1.0
    kept = Sparsifier.parse("block_fraction:1x1:0.75").mask(x)
    assert kept.sum() == 2
    assert kept[1, 0, 0]
    assert kept[0, 1, 1]


def test_block_fraction_nan_counts_as_zero_and_is_dropped():
    x = np.array([[NAN, 3.0, 1.0, 1.0]])
    # 1x2 norms: [3, 2] -> the NaN block wins, but the NaN itself is not kept.
    assert mask_of(x, "block_fraction:1x2:0.5") == [[0, 1, 0, 0]]


def test_nm_examples():
    x = np.array([[1.0, -3.0, 0.0, 2.0, 5.0, -0.5], [4.0, 4.0, -4.0, 1.0, 0.0, NAN]])
    assert mask_of(x, "nm:2:4") == [[0, 1, 0, 1, 1, 1], [1, 1, 0, 0, 1, 0]]
    assert mask_of(x, "nm:1:3") == [[0, 1, 0, 0, 1, 0], [1, 0, 0, 1, 0, 0]]
    assert mask_of(x, "nm:4:4") == [[1] * 6, [1] * 5 + [0]]
    assert mask_of(np.array([0.0, 0.0, 0.0, 0.0]), "nm:2:4") == [1, 1, 0, 0]  # ties, zeros


def test_grouped_nm_rows_share_the_columns_with_the_largest_group_norms():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((11, 23))  # partial row group and partial column group
    n, m, g = 2, 5, 4
    keep = Sparsifier.parse(f"nm:{n}:{m}:{g}").mask(x)
    for r0 in range(0, 11, g):
        rows = keep[r0 : r0 + g]
        assert (rows == rows[0]).all()  # one pattern per group of rows
        norms = np.abs(x[r0 : r0 + g]).sum(axis=0)
        for c0 in range(0, 23, m):
            kept = rows[0, c0 : c0 + m]
            assert kept.sum() == min(n, len(kept))
            if (~kept).any():
                assert norms[c0 : c0 + m][kept].min() >= norms[c0 : c0 + m][~kept].max()


def test_grouped_nm_pattern_is_exactly_g_by_1_blocks():
    x = np.random.default_rng(4).standard_normal((16, 40)).astype(np.float32)
    t = sparsecomp.sparsify(x, "grouped_nm:1:4:8", "bsr:8x1")
    assert t.nse == t.nnz == 16 * 40 // 4
    np.testing.assert_array_equal(t.to_dense(), sparsecomp.sparsify(x, "grouped_nm:1:4:8"))


def test_grouped_nm_needs_rows_and_a_group():
    with pytest.raises(FormatError, match="'grouped_nm' needs an array of rank >= 2"):
        Sparsifier.parse("nm:1:2:2").mask(np.ones(4))
    with pytest.raises(FormatError, match="group of g >= 1 rows"):
        Sparsifier.parse("grouped_nm:1:2:0")


def test_nm_rank1_and_rank3():
    assert mask_of(np.array([1, -5, 3, 2, 7], np.int32), "nm:1:2") == [0, 1, 1, 0, 1]
    x = np.arange(16.0).reshape(2, 2, 4)
    kept = Sparsifier.nm(2, 4).mask(x)
    assert np.array_equal(kept, np.broadcast_to([False, False, True, True], x.shape))


def test_empty_arrays():
    for text in [
        "keep_all",
        "threshold:1",
        "random_fraction:0.5:1",
        "scalar_fraction:0.5",
        "nm:2:4",
    ]:
        assert Sparsifier.parse(text).mask(np.zeros((0,))).shape == (0,)
        assert Sparsifier.parse(text).mask(np.zeros((3, 0))).shape == (3, 0)
    assert Sparsifier.parse("block_fraction:2x2:0.5").mask(np.zeros((0, 4, 4))).shape == (0, 4, 4)
    out = sparsecomp.sparsify(np.zeros((2, 0), np.float32), "scalar_fraction:0.5")
    assert out.shape == (2, 0)
    assert out.dtype == np.float32


def test_sparsify_dense_result():
    x = np.array([[1, -3, 0, 2]], np.int16)
    out = sparsecomp.sparsify(x, "nm:1:2")
    assert out.dtype == np.int16
    assert out.tolist() == [[0, -3, 0, 2]]
    assert x.tolist() == [[1, -3, 0, 2]]  # not modified
    assert sparsecomp.sparsify([[1.0, 2.0]], Sparsifier.threshold(1.5)).tolist() == [[0.0, 2.0]]
    f = np.asfortranarray(np.arange(6.0).reshape(2, 3))
    assert sparsecomp.sparsify(f, "scalar_fraction:0.5").tolist() == [[0, 0, 0], [3, 4, 5]]


# -- validation -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "params", "match"),
    [
        ("dropout", (), "unknown sparsifier kind 'dropout'; expected one of keep_all, threshold"),
        ("keep_all", (1.0,), r"'keep_all' takes 0 parameter\(s\) none, got 1"),
        ("threshold", (), r"'threshold' takes 1 parameter\(s\) \(threshold\), got 0"),
        ("nm", (2, 4, 8), r"'nm' takes 2 parameter\(s\) \(n, m\), got 3"),
        ("threshold", (-1.0,), "threshold must be >= 0"),
        ("threshold", (NAN,), "threshold must not be NaN"),
        ("threshold", ("0.1",), "threshold must be a number"),
        ("threshold", (True,), "threshold must be a number"),
        ("threshold", "1", "params must be a sequence"),
        ("scalar_fraction", (1.5,), r"sparsity \(the fraction removed\) must lie in \[0, 1\]"),
        ("scalar_fraction", (-0.1,), r"must lie in \[0, 1\]"),
        ("random_fraction", (0.5, 1.5), "seed must be an integer"),
        ("random_fraction", (0.5, -1), "seed must be >= 0"),
        ("random_fraction", (0.5, 2**53 + 1), "not exactly representable"),
        ("random_fraction", (0.5, 2.0**60), r"seed must be an integer \(at most 2\*\*53\)"),
        ("random_fraction", (0.5, 10**400), "too large for f64"),
        ("block_fraction", (0, 4, 0.5), "block sizes must be positive, got 0x4"),
        ("block_fraction", (4, -2, 0.5), "block sizes must be positive"),
        ("block_fraction", (2.5, 4, 0.5), "block_rows must be an integer"),
        ("block_fraction", (4, math.inf, 0.5), "block_cols must be an integer"),
        ("block_fraction", (4, 4, 2.0), r"must lie in \[0, 1\]"),
        ("nm", (5, 4), "needs 0 < n <= m, got 5:4"),
        ("nm", (0, 4), "needs 0 < n <= m"),
        ("nm", (2, 4.5), "m must be an integer"),
        ("nm", (1.5, 4), "n must be an integer"),
    ],
)
def test_validation(kind, params, match):
    with pytest.raises(FormatError, match=match):
        Sparsifier(kind, params)


def test_params_are_floats_and_equal():
    s = Sparsifier("nm", (2, 4))
    assert s.params == (2.0, 4.0)
    assert all(type(v) is float for v in s.params)
    assert s == Sparsifier.nm(2, 4) == Sparsifier("nm", [np.int64(2), np.float32(4)])
    assert hash(s) == hash(Sparsifier.nm(2, 4))
    assert s.named_params == {"n": 2, "m": 4}
    assert Sparsifier.block_fraction(16, 8, 0.9).named_params == {
        "block_rows": 16,
        "block_cols": 8,
        "sparsity": 0.9,
    }


def test_is_streaming():
    streaming = {kind for kind in KINDS if Sparsifier.parse(_example(kind)).is_streaming}
    assert streaming == {"keep_all", "threshold"}


@pytest.mark.parametrize(
    ("x", "text", "match"),
    [
        (np.array([True, False]), "keep_all", "integer, float or complex array, got dtype bool"),
        (np.array(["a"]), "keep_all", "got dtype <U1"),
        (np.array([1, "a"], dtype=object), "keep_all", "object arrays"),
        (np.array(["2020-01-01"], dtype="datetime64[D]"), "keep_all", "got dtype datetime64"),
        (np.float64(1.0), "keep_all", r"rank >= 1, got rank 0"),
        (np.ones(4), "block_fraction:2x2:0.5", r"'block_fraction' needs an array of rank >= 2"),
        ([[1.0], [1.0, 2.0]], "keep_all", "cannot make an array"),
    ],
)
def test_bad_arrays(x, text, match):
    with pytest.raises(FormatError, match=match):
        sparsecomp.sparsify(x, text)
    with pytest.raises(FormatError, match=match):
        Sparsifier.parse(text).mask(x)


def test_format_error_is_value_error():
    with pytest.raises(ValueError, match="unknown sparsifier kind"):
        Sparsifier.parse("top_k:3")


# -- text ------------------------------------------------------------------------------


def _example(kind: str) -> str:
    return {
        "keep_all": "keep_all",
        "threshold": "threshold:0.001",
        "random_fraction": "random_fraction:0.9:42",
        "scalar_fraction": "scalar_fraction:0.9",
        "block_fraction": "block_fraction:16x16:0.9",
        "nm": "nm:2:4",
        "grouped_nm": "grouped_nm:2:4:8",
    }[kind]


ATTRS = {
    "keep_all": "#sparse_iter.sparsifier<keep_all>",
    "threshold:0.001": "#sparse_iter.sparsifier<threshold[0.001]>",
    "random_fraction:0.9:42": "#sparse_iter.sparsifier<random_fraction[0.9, 42]>",
    "scalar_fraction:0.9": "#sparse_iter.sparsifier<scalar_fraction[0.9]>",
    "block_fraction:16x16:0.9": "#sparse_iter.sparsifier<block_fraction[16, 16, 0.9]>",
    "nm:2:4": "#sparse_iter.sparsifier<nm[2, 4]>",
    "grouped_nm:1:10:8": "#sparse_iter.sparsifier<grouped_nm[1, 10, 8]>",
    "threshold:inf": "#sparse_iter.sparsifier<threshold[inf]>",
    "threshold:1e-05": "#sparse_iter.sparsifier<threshold[1.0e-05]>",
    "random_fraction:0.123456789:123456789": (
        "#sparse_iter.sparsifier<random_fraction[0.123456789, 123456789]>"
    ),
}


@pytest.mark.parametrize(("short", "attr"), ATTRS.items())
def test_short_and_attr_text(short, attr):
    s = Sparsifier.parse(short)
    assert s.attr_text() == attr
    assert Sparsifier.parse(attr) == s
    assert str(s) == short
    assert Sparsifier.parse(str(s)) == s
    assert Sparsifier.parse(s) is s


def test_parse_lenient_spacing_and_forms():
    assert Sparsifier.parse("  nm : 2 : 4 ") == Sparsifier.nm(2, 4)
    assert Sparsifier.parse("block_fraction:4X2:0.5") == Sparsifier.block_fraction(4, 2, 0.5)
    assert Sparsifier.parse("threshold:1e-3") == Sparsifier.threshold(0.001)
    text = "#sparse_iter.sparsifier< nm [2.0,4.]>"
    assert Sparsifier.parse(text) == Sparsifier.nm(2, 4)
    hexed = "#sparse_iter.sparsifier<threshold[0x1]>"
    assert Sparsifier.parse(hexed) == Sparsifier.threshold(1.0)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("top_k:3", "unknown sparsifier kind 'top_k' in 'top_k:3'; expected one of keep_all"),
        ("threshold", r"takes 1 parameter\(s\)"),
        ("threshold:abc", "bad number 'abc' in sparsifier 'threshold:abc'"),
        ("keep_all:", "bad number ''"),
        ("nm:2", r"'nm' takes 2 parameter\(s\)"),
        ("nm:2:4:1:3", r"'nm' takes 2 parameter\(s\)"),
        ("block_fraction:16:0.9", "block_fraction needs RxC block sizes, got '16'"),
        ("block_fraction:16x16", r"takes 3 parameter\(s\)"),
        ("scalar_fraction:90", r"must lie in \[0, 1\]"),
        ("#sparse_iter.layout<{map = (i) -> (i : dense)}>", "expected #sparse_iter.sparsifier"),
        ("#sparse_iter.sparsifier<nm>", r"'nm' takes 2 parameter\(s\)"),
        ("#sparse_iter.sparsifier<nm, 2>", "expected #sparse_iter.sparsifier with 1 parameter"),
        ("#sparse_iter.sparsifier<nm[2, x]>", "bad number 'x'"),
        ("#sparse_iter.sparsifier<nm[2, 4e0]>", r"bad number '4e0' \(floats need a '.'"),
        ('#sparse_iter.sparsifier<"nm">', "expected #sparse_iter.sparsifier<kind"),
        ("#sparse_iter.sparsifier<threshold[nan]>", "NaN"),
        ("#sparse_iter.sparsifier<threshold[-1.5]>", "threshold must be >= 0, got -1.5"),
    ],
)
def test_parse_errors(text, match):
    with pytest.raises(FormatError, match=match):
        Sparsifier.parse(text)


def test_parse_rejects_non_text():
    with pytest.raises(FormatError, match="a sparsifier is a string or a Sparsifier, got int"):
        Sparsifier.parse(3)  # type: ignore[arg-type]


@st.composite
def sparsifiers(draw: st.DrawFn) -> Sparsifier:
    kind = draw(st.sampled_from(sorted(KINDS)))
    frac = st.floats(0.0, 1.0)
    small = st.integers(1, 64)
    if kind == "keep_all":
        return Sparsifier.keep_all()
    if kind == "threshold":
        return Sparsifier.threshold(draw(st.floats(0.0, allow_nan=False)))
    if kind == "random_fraction":
        return Sparsifier.random_fraction(draw(frac), draw(st.integers(0, 2**53)))
    if kind == "scalar_fraction":
        return Sparsifier.scalar_fraction(draw(frac))
    if kind == "block_fraction":
        return Sparsifier.block_fraction(draw(small), draw(small), draw(frac))
    m = draw(small)
    return Sparsifier.nm(draw(st.integers(1, m)), m)


@given(sparsifiers())
@FAST
def test_text_round_trips(s):
    assert Sparsifier.parse(s.attr_text()) == s
    assert Sparsifier.parse(s.short_text()) == s


@given(sparsifiers())
@FAST
def test_random_attr_text_matches_mlir(s):
    from mlir import ir

    from sparsecomp.ir.context import make_context

    ctx = _CTX.setdefault("ctx", make_context())
    assert str(ir.Attribute.parse(s.attr_text(), ctx)) == s.attr_text()


_CTX: dict[str, object] = {}


def test_attr_text_matches_mlir(ctx):
    """The printed text is what MLIR prints for the same attribute."""
    from mlir import ir

    samples = [Sparsifier.parse(t) for t in ATTRS] + [
        Sparsifier.threshold(v)
        for v in (0.1234567, 1 / 3, 5e-324, 1.234567e308, 1e22, 0.0, 2.0**53 + 2)
    ]
    for s in samples:
        assert str(ir.Attribute.parse(s.attr_text(), ctx)) == s.attr_text()


# -- properties ---------------------------------------------------------------------

_floats = st.floats(-1e6, 1e6, allow_nan=False, width=64)


def _matrices(min_dims: int = 1, max_dims: int = 3) -> st.SearchStrategy[np.ndarray]:
    shapes = hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=0, max_side=7)
    # Few distinct values so that ties are common.
    values = st.one_of(st.sampled_from([0.0, 1.0, -1.0, 2.5, -2.5]), _floats)
    return hnp.arrays(np.float64, shapes, elements=values)


@given(_matrices(), st.floats(0.0, 1e6))
@FAST
def test_threshold_property(x, t):
    assert np.array_equal(Sparsifier.threshold(t).mask(x), np.abs(x) >= t)


@given(_matrices(), st.floats(0.0, 1.0))
@FAST
def test_scalar_fraction_property(x, f):
    kept = Sparsifier.scalar_fraction(f).mask(x)
    assert kept.shape == x.shape
    assert int((~kept).sum()) == removed_count(f, x.size)
    mag, flat_kept = np.abs(x).reshape(-1), kept.reshape(-1)
    if flat_kept.any() and (~flat_kept).any():
        assert mag[flat_kept].min() >= mag[~flat_kept].max()
        # Ties: a kept element never follows a dropped one of the same magnitude.
        for value in set(mag[flat_kept]) & set(mag[~flat_kept]):
            where = np.flatnonzero(mag == value)
            assert np.all(np.diff(flat_kept[where].astype(int)) <= 0)


@given(_matrices(), st.data())
@FAST
def test_nm_property(x, data):
    m = data.draw(st.integers(1, 6))
    n = data.draw(st.integers(1, m))
    kept = Sparsifier.nm(n, m).mask(x)
    length = x.shape[-1]
    for start in range(0, length, m):
        group_kept = kept[..., start : start + m].reshape(-1, min(m, length - start))
        group_mag = np.abs(x[..., start : start + m]).reshape(group_kept.shape)
        assert np.all(group_kept.sum(axis=-1) == min(n, group_kept.shape[-1]))
        for row_kept, row_mag in zip(group_kept, group_mag, strict=True):
            if row_kept.any() and (~row_kept).any():
                assert row_mag[row_kept].min() >= row_mag[~row_kept].max()


@given(_matrices(min_dims=2), st.integers(1, 4), st.integers(1, 4), st.floats(0.0, 1.0))
@FAST
def test_block_fraction_property(x, r, c, f):
    kept = Sparsifier.block_fraction(r, c, f).mask(x)
    rows, cols = x.shape[-2:]
    flat_x = np.abs(x).reshape(math.prod(x.shape[:-2]), rows, cols)
    flat_kept = kept.reshape(flat_x.shape)
    norms, decisions = [], []
    for b in range(flat_x.shape[0]):
        for i in range(0, rows, r):
            for j in range(0, cols, c):
                block = flat_kept[b, i : i + r, j : j + c]
                assert block.all() or not block.any(), "blocks are kept whole"
                norms.append(flat_x[b, i : i + r, j : j + c].sum())
                decisions.append(bool(block.all()))
    decided = np.array(decisions, dtype=bool)
    values = np.array(norms)
    assert int((~decided).sum()) == removed_count(f, len(norms))
    if decided.any() and (~decided).any():
        assert values[decided].min() >= values[~decided].max()


@given(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=8), st.floats(0, 1))
@FAST
def test_random_fraction_property(shape, f):
    x = np.ones(shape)
    a = Sparsifier.random_fraction(f, 11).mask(x)
    assert int((~a).sum()) == removed_count(f, x.size)
    assert np.array_equal(a, Sparsifier.random_fraction(f, 11).mask(-x))
    assert np.array_equal(a, Sparsifier.parse(f"random_fraction:{f!r}:11").mask(x))


def test_random_fraction_seeds_differ():
    x = np.ones((16, 16))
    masks = {Sparsifier.random_fraction(0.5, seed).mask(x).tobytes() for seed in range(8)}
    assert len(masks) == 8


@given(st.floats(0.0, 1.0), st.integers(0, 10**6))
@FAST
def test_removed_count(f, n):
    count = removed_count(f, n)
    assert 0 <= count <= n
    assert abs(count - f * n) <= 0.5


# -- layout path and package -----------------------------------------------------------


def test_sparsify_with_layout_calls_from_coo(monkeypatch):
    """The layout path hands the kept coordinates and values to ``SparseTensor.from_coo``.

    Runs against a stand-in ``sparsecomp.formats.tensor`` so it does not depend
    on the real one.
    """
    calls = []

    class FakeSparseTensor:
        @classmethod
        def from_coo(cls, shape, coords, values, layout):
            calls.append((shape, coords, values, layout))
            return "tensor"

    fake = types.ModuleType("sparsecomp.formats.tensor")
    fake.SparseTensor = FakeSparseTensor  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sparsecomp.formats.tensor", fake)
    x = np.array([[0.0, 3.0, 0.0, 1.0], [2.0, 0.0, 0.0, 0.0]])
    assert sparsecomp.sparsify(x, "nm:2:4", layout="nm:2:4") == "tensor"
    ((shape, coords, values, layout),) = calls
    assert shape == (2, 4)
    assert layout == "nm:2:4"
    assert coords.dtype == np.int64
    assert coords.shape == (2, 4)
    # Kept zeros are stored: row 1 keeps the 2.0 and its first zero.
    assert coords.tolist() == [[0, 0, 1, 1], [1, 3, 0, 1]]
    assert values.tolist() == [3.0, 1.0, 2.0, 0.0]
    calls.clear()
    sparsecomp.sparsify(np.zeros(3), "keep_all", layout="coo")
    assert calls[0][1].shape == (1, 0)
    assert calls[0][2].shape == (0,)


def test_sparsify_with_layout_real_tensor():
    x = np.array([[0.0, 3.0, 0.0, 1.0], [2.0, 0.0, 5.0, 0.0]])
    csr = sparsecomp.sparsify(x, "threshold:1.5", layout="csr")
    assert np.array_equal(csr.to_dense(), [[0.0, 3.0, 0.0, 0.0], [2.0, 0.0, 5.0, 0.0]])
    nm = sparsecomp.sparsify(x, "nm:2:4", layout="nm:2:4")
    assert np.array_equal(nm.to_dense(), sparsecomp.sparsify(x, "nm:2:4"))


def test_import_sparsecomp_stays_light():
    code = (
        "import sys, sparsecomp; sparsecomp.sparsify; "
        "print('numpy' in sys.modules, 'mlir' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_scipy_and_big_endian_inputs() -> None:
    """A scipy matrix got "sparsifiers do not take object arrays"; a '>f4' array was
    refused with a layout and came back '<f4' without one (session 44)."""
    import scipy.sparse as sp

    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    with pytest.raises(FormatError, match="take a dense array, got a scipy csr_matrix"):
        sparsecomp.sparsify(sp.csr_matrix(x), "threshold:1")
    big = x.astype(">f4")
    dense = sparsecomp.sparsify(big, "nm:2:4")
    assert dense.dtype == np.float32
    np.testing.assert_array_equal(dense, sparsecomp.sparsify(x, "nm:2:4"))
    packed = sparsecomp.sparsify(big, "nm:2:4", layout="csr")
    np.testing.assert_array_equal(packed.to_dense(), dense)
