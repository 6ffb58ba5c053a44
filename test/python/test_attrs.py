"""Tests of attribute text: splitting, every attribute's host twin against MLIR, encodings."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from mlir import ir

from sparsecomp.errors import FormatError
from sparsecomp.formats.attrtext import Indexed, Keyword, format_value, parse_attr, split_top_level
from sparsecomp.formats.composable import Part
from sparsecomp.formats.literals import format_number, parse_number
from sparsecomp.formats.names import layout_from_attr
from sparsecomp.formats.sparsifiers import Sparsifier
from sparsecomp.ir import attrs, odsgen
from sparsecomp.ir.context import make_context
from sparsecomp.targets import target_from_attr
from sparsecomp.targets.resolve import Encoding, IndexingMap, Sparsity, Use

TD_FILE = odsgen.td_path()

CSR = (
    "#sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), "
    "posWidth = 32, crdWidth = 32}>"
)
ELL4 = "#sparse_iter.layout<{map = (i, j) -> (i : compressed, j : compressed_fixed[4])}>"
NM = "#sparse_iter.sparsity<nm[2, 4], density = 0.5>"
#: One sample per attribute kind; the op name is chosen to trip a naive comma splitter.
SAMPLES = {
    "sparsity": NM,
    "encoding": (
        f'#sparse_iter.encoding<{NM}, op_name = "a, \\"b>\\" <c", operand = 1,'
        " element_types = [f32, f16],"
        " indexing_maps = [affine_map<(m, k) -> (m, k)>, affine_map<(m, k)[s0] -> (k, m + s0)>]>"
    ),
    "layout": CSR,
    "part": f"#sparse_iter.part<ell_bucket[0, 1, 2, 4], {ELL4}>",
    "composable": f"#sparse_iter.composable<[#sparse_iter.part<rest, {CSR}>]>",
    "cpu": "#sparse_iter.cpu<x86_64, features = [avx2, fma], vector_bits = 256, threads = 0>",
    "cuda": "#sparse_iter.cuda<sm_90, mma_shapes = [m16n8k16], sparse_mma_shapes = [m16n8k32]>",
    "sparsifier": "#sparse_iter.sparsifier<block_fraction[16, 8, 0.25]>",
}


@pytest.fixture(scope="module")
def ctx() -> ir.Context:
    return make_context()


def parse(text: str, ctx: ir.Context) -> ir.Attribute:
    return ir.Attribute.parse(text, ctx)


# -- split_top_level ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", []),
        ("a", ["a"]),
        ("a, b ,c", ["a", "b", "c"]),
        ("[1, 2], 3", ["[1, 2]", "3"]),
        ("f(a, (b, c)), {k = 1, l = [2, 3]}", ["f(a, (b, c))", "{k = 1, l = [2, 3]}"]),
        ("array<i64: 2, 4>, 0.5", ["array<i64: 2, 4>", "0.5"]),
        ('"a, b", c', ['"a, b"', "c"]),
        ('"say \\"x, y\\"", z', ['"say \\"x, y\\""', "z"]),
        ('"back\\\\", z', ['"back\\\\"', "z"]),
        ('"<(", ")>"', ['"<("', '")>"']),
        (
            "affine_map<(i, j) -> (i, j)>, 32",
            ["affine_map<(i, j) -> (i, j)>", "32"],
        ),
        (
            "[affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>], x",
            ["[affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>]", "x"],
        ),
        ("#a.b<#c.d<1, 2>, 3>, 4", ["#a.b<#c.d<1, 2>, 3>", "4"]),
        ("  a  ,  b  ", ["a", "b"]),
    ],
)
def test_split_top_level(text: str, expected: list[str]) -> None:
    assert split_top_level(text) == expected


_STRING_CHARS = st.sampled_from(list('ab ,<>()[]{}-"\\'))


@st.composite
def string_literal(draw: st.DrawFn) -> str:
    body = draw(st.text(_STRING_CHARS, max_size=8))
    return '"' + body.replace("\\", "\\\\").replace('"', '\\"') + '"'


_ATOMS = st.one_of(
    st.integers(-100, 100).map(str),
    st.sampled_from(["f32", "unit", "#map", "-1.5", "affine_map<(d0, d1) -> (d1, d0)>"]),
    string_literal(),
)


def _nested(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    items = st.lists(children, min_size=1, max_size=4).map(", ".join)
    return st.one_of(
        items.map(lambda s: f"[{s}]"),
        items.map(lambda s: f"({s})"),
        items.map(lambda s: f"{{k = {s}}}"),
        items.map(lambda s: f"array<{s}>"),
        items.map(lambda s: f"affine_map<(d0, d1) -> ({s})>"),
        st.tuples(items, items).map(lambda p: f"#x.y<{p[0]}, ({p[1]}) -> (d0)>"),
    )


PIECES = st.recursive(_ATOMS, _nested, max_leaves=12)


@settings(deadline=None)
@given(st.lists(PIECES, max_size=6), st.sampled_from([",", ", ", " ,  "]))
def test_split_top_level_recovers_joined_pieces(pieces: list[str], sep: str) -> None:
    assert split_top_level(sep.join(pieces)) == pieces


@given(PIECES)
def test_split_top_level_keeps_a_single_piece_whole(piece: str) -> None:
    assert split_top_level(f"  {piece} ") == [piece]


# -- every attribute: MLIR's printing and the host twin agree ----------------


def _td_mnemonics() -> set[str]:
    text = TD_FILE.read_text(encoding="utf-8")
    return set(re.findall(r'def \w+ : SparseIter_Attr<"\w+", "(\w+)">', text))


def test_samples_cover_every_attribute_kind() -> None:
    assert set(SAMPLES) == _td_mnemonics()


def _host_text(kind: str, text: str) -> str:
    """The text the host twin of ``text`` prints."""
    if kind in ("sparsity", "encoding"):
        enc = Encoding.parse(text)
        return enc.sparsity.attr_text() if kind == "sparsity" else enc.attr_text()
    if kind in ("layout", "composable"):
        return layout_from_attr(text).attr_text()
    if kind == "part":
        return Part.from_node(parse_attr(text)).attr_text()
    if kind == "sparsifier":
        return Sparsifier.parse(text).attr_text()
    return target_from_attr(text).attr_text()


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_host_twin_prints_like_mlir(kind: str, ctx: ir.Context) -> None:
    attr = parse(SAMPLES[kind], ctx)
    assert attrs.mnemonic(attr) == kind
    assert _host_text(kind, str(attr)) == str(attr)
    assert parse(str(attr), ctx) == attr


def test_sample_values_read_by_the_host(ctx: ir.Context) -> None:
    enc = Encoding.parse(str(parse(SAMPLES["encoding"], ctx)))
    assert enc.sparsity == Sparsity("nm", (2, 4), 0.5)
    assert enc.use.op_name == 'a, "b>" <c'
    assert (enc.use.operand_index, enc.use.element_types) == (1, ("f32", "f16"))
    assert [m.results for m in enc.use.indexing_maps] == [(0, 1), (1, None)]
    layout = layout_from_attr(str(parse(CSR, ctx)))
    assert [lv.name for lv in layout.levels] == ["dense_fixed", "compressed_varied"]
    assert (layout.pos_width, layout.crd_width) == (32, 32)


def test_mnemonic_of_other_attributes(ctx: ir.Context) -> None:
    for text in ['"layout"', "[1, 2]", "affine_map<(i) -> (i)>"]:
        assert attrs.mnemonic(parse(text, ctx)) is None


_KINDS = st.sampled_from(["unstructured", "nm", "block", "ragged"])


@settings(deadline=None, max_examples=60)
@given(
    kind=_KINDS,
    values=st.lists(st.integers(-(2**40), 2**40), max_size=3),
    density=st.floats(0.0, 1.0),
    op_name=st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=12),
    index=st.integers(0, 5),
)
def test_sparsity_and_encoding_text_property(
    ctx: ir.Context, kind: str, values: list[int], density: float, op_name: str, index: int
) -> None:
    """Any kind, params and density print the same from MLIR and the host, and read back."""
    spec = format_value(Indexed(kind, tuple(values)))
    dens = f", density = {format_number(density)}" if density != 1.0 else ""
    text = f"#sparse_iter.sparsity<{spec}{dens}>"
    assert str(parse(text, ctx)) == text
    node = parse_attr(text)
    assert node.args[0] in (Indexed(kind, tuple(values)), Keyword(kind))
    maps = ("affine_map<(d0, d1) -> (d0, d1)>",) * (index + 1)
    use = Use(op_name, index, ("f32",), tuple(IndexingMap.parse(m) for m in maps), maps)
    try:
        sparsity = Sparsity(kind, tuple(values), density)
    except FormatError:
        return  # the host refuses what the verifier refuses; the text above still agrees
    enc = Encoding(sparsity, use)
    assert str(parse(enc.attr_text(), ctx)) == enc.attr_text()
    assert Encoding.parse(enc.attr_text()) == enc


@settings(deadline=None, max_examples=200)
@given(st.one_of(st.floats(allow_nan=False), st.integers(-(2**60), 2**60).map(float)))
@example(2.0**-24)  # 5.960464477539063e-08: %.16e rounds the tie the wrong way
@example(5e-324)
@example(1.7976931348623157e308)
def test_numbers_print_like_the_dialect(ctx: ir.Context, value: float) -> None:
    """format_number is formatNumber: the same text, the shortest that reads back exactly."""
    text = f"#sparse_iter.sparsifier<threshold[{format_number(value)}]>"
    assert str(parse(text, ctx)) == text
    (spec,) = parse_attr(text).args
    back = float(spec.args[0])
    assert (back == value and math.copysign(1, back) == math.copysign(1, value)) or value == 0


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (16.0, "16"),
        (0.01, "0.01"),
        (1e-05, "1.0e-05"),
        (1.5e-07, "1.5e-07"),
        (1e16, "1.0e+16"),
        (0.1 + 0.2, "0.30000000000000004"),
        (2.0**53, "9007199254740992.0"),
        (-0.5, "-0.5"),
        (float("inf"), "inf"),
        (float("-inf"), "-inf"),
        (float("nan"), "nan"),
    ],
)
def test_format_number(value: float, text: str) -> None:
    assert format_number(value) == text
    back = parse_number(text)
    assert back == value or (math.isnan(value) and math.isnan(back))


# -- encoding_of -------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "tensor<?x?xf32>",
        "tensor<4xi8>",
        'tensor<?xf32, "not sparse_iter">',
        "tensor<?xf32, #sparse_tensor.encoding<{map = (d0) -> (d0 : compressed)}>>",
        "tensor<*xf32>",
        "memref<?xf32>",
        "vector<4xf32>",
        "f32",
        "index",
    ],
)
def test_encoding_of_without_sparse_iter_encoding(text: str, ctx: ir.Context) -> None:
    assert attrs.encoding_of(ir.Type.parse(text, ctx)) is None


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_encoding_of_encoded_tensor(kind: str, ctx: ir.Context) -> None:
    ty = ir.Type.parse(f"tensor<?x?xf32, {SAMPLES[kind]}>", ctx)
    enc = attrs.encoding_of(ty)
    assert enc is not None
    assert enc == parse(SAMPLES[kind], ctx)
    assert attrs.mnemonic(enc) == kind
