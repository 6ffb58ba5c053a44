"""Tests of ``sparsecomp.ir.attrs``: splitting attribute bodies, params/build, encodings."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mlir import ir

from sparsecomp.ir import attrs, odsgen
from sparsecomp.ir.context import make_context

TD_FILE = odsgen.td_path()

CSR = (
    '#sparse_iter.layout<["dense_fixed", "compressed_varied"], affine_map<(i, j) -> (i, j)>,'
    " 32, 32, {}>"
)
NM = '#sparse_iter.sparsity<"nm", array<i64: 2, 4>, 0.5>'
#: One sample per attribute kind; the op name is chosen to trip a naive comma splitter.
SAMPLES = {
    "sparsity": NM,
    "encoding": (
        f'#sparse_iter.encoding<{NM}, "a, \\"b>\\" <c", 1, [f32, f16],'
        " [affine_map<(m, k) -> (m, k)>, affine_map<(m, k)[s0] -> (k, m + s0)>]>"
    ),
    "layout": CSR,
    "part": f'#sparse_iter.part<"rest", array<i64>, {CSR}>',
    "composable": f'#sparse_iter.composable<[#sparse_iter.part<"rest", array<i64>, {CSR}>]>',
    "cpu": "#sparse_iter.cpu<x86_64, features = [avx2, fma], vector_bits = 256, threads = 0>",
    "cuda": "#sparse_iter.cuda<sm_90, mma_shapes = [m16n8k16], sparse_mma_shapes = [m16n8k32]>",
    "sparsifier": '#sparse_iter.sparsifier<"threshold", array<f64: 0.5>>',
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
    assert attrs.split_top_level(text) == expected


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
    assert attrs.split_top_level(sep.join(pieces)) == pieces


@given(PIECES)
def test_split_top_level_keeps_a_single_piece_whole(piece: str) -> None:
    assert attrs.split_top_level(f"  {piece} ") == [piece]


# -- parameter names, params() and build() -----------------------------------


def _td_parameters() -> dict[str, list[str]]:
    """``{mnemonic: [parameter names]}`` read straight from the dialect's .td file."""
    text = TD_FILE.read_text(encoding="utf-8")
    out = {}
    for match in re.finditer(r'def \w+ : SparseIter_Attr<"\w+", "(\w+)">\s*\{', text):
        body = text[match.end() :]
        ins = re.search(r"let parameters = \(ins(.*?)\);", body, re.S)
        assert ins is not None
        out[match[1]] = re.findall(r":\$(\w+)", ins[1])
    return out


def test_param_names_match_the_td_file() -> None:
    assert attrs.param_names() == _td_parameters()


def test_samples_cover_every_attribute_kind() -> None:
    assert set(SAMPLES) == set(attrs.param_names())


@pytest.mark.parametrize("kind", sorted(set(SAMPLES) - attrs.READABLE))
def test_params_build_round_trip(kind: str, ctx: ir.Context) -> None:
    attr = parse(SAMPLES[kind], ctx)
    assert attrs.mnemonic(attr) == kind
    params = attrs.params(attr)
    assert list(params) == attrs.param_names()[kind]
    assert all(isinstance(v, ir.Attribute) for v in params.values())
    rebuilt = attrs.build(kind, **params)
    assert rebuilt == attr
    assert str(rebuilt) == str(attr)


@pytest.mark.parametrize("kind", sorted(attrs.READABLE))
def test_readable_attributes_are_not_positional(kind: str, ctx: ir.Context) -> None:
    attr = parse(SAMPLES[kind], ctx)
    with pytest.raises(ValueError, match="named parameters"):
        attrs.params(attr)
    with pytest.raises(ValueError, match="named parameters"):
        attrs.build(kind)


def test_params_values_of_sparsity(ctx: ir.Context) -> None:
    p = attrs.params(parse(NM, ctx))
    assert ir.StringAttr(p["kind"]).value == "nm"
    assert list(ir.DenseI64ArrayAttr(p["params"])) == [2, 4]
    assert ir.FloatAttr(p["density"]).value == 0.5


def test_params_values_of_encoding(ctx: ir.Context) -> None:
    p = attrs.params(parse(SAMPLES["encoding"], ctx))
    assert p["sparsity"] == parse(NM, ctx)
    assert ir.StringAttr(p["op_name"]).value == 'a, "b>" <c'
    assert ir.IntegerAttr(p["operand_index"]).value == 1
    types = [ir.TypeAttr(t).value for t in ir.ArrayAttr(p["element_types"])]
    assert types == [ir.F32Type.get(ctx), ir.F16Type.get(ctx)]
    maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(p["indexing_maps"])]
    assert [(m.n_dims, m.n_symbols, len(m.results)) for m in maps] == [(2, 0, 2), (2, 1, 2)]


def test_params_values_of_layout(ctx: ir.Context) -> None:
    p = attrs.params(parse(CSR, ctx))
    assert [ir.StringAttr(x).value for x in ir.ArrayAttr(p["levels"])] == [
        "dense_fixed",
        "compressed_varied",
    ]
    dim_to_lvl = ir.AffineMapAttr(p["dim_to_lvl"]).value
    assert dim_to_lvl == ir.AffineMap.get_permutation([0, 1], ctx)
    assert ir.IntegerAttr(p["pos_width"]).value == 32
    assert ir.IntegerAttr(p["crd_width"]).value == 32


def test_build_replaces_one_parameter(ctx: ir.Context) -> None:
    p = attrs.params(parse(CSR, ctx))
    p["pos_width"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64, ctx), 8)
    changed = attrs.build("layout", **p)
    assert changed != parse(CSR, ctx)
    assert changed == parse(CSR.replace(" 32, 32, {}>", " 8, 32, {}>"), ctx)


def test_build_rejects_missing_and_extra_parameters(ctx: ir.Context) -> None:
    p = attrs.params(parse(NM, ctx))
    density = p.pop("density")
    with pytest.raises(ValueError, match="takes parameters"):
        attrs.build("sparsity", **p)
    with pytest.raises(ValueError, match="takes parameters"):
        attrs.build("sparsity", **p, density=density, extra=density)


def test_params_rejects_other_attributes(ctx: ir.Context) -> None:
    for text in ['"layout"', "[1, 2]", "affine_map<(i) -> (i)>"]:
        attr = parse(text, ctx)
        assert attrs.mnemonic(attr) is None
        with pytest.raises(ValueError, match="not a sparse_iter attribute"):
            attrs.params(attr)


_KINDS = st.sampled_from(["unstructured", "nm", "block", "ragged"])


@settings(deadline=None, max_examples=50)
@given(
    kind=_KINDS,
    values=st.lists(st.integers(-(2**40), 2**40), max_size=3),
    density=st.floats(0.0, 1.0, allow_subnormal=False),
    op_name=st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=12),
    index=st.integers(0, 5),
)
def test_params_build_round_trip_property(
    ctx: ir.Context, kind: str, values: list[int], density: float, op_name: str, index: int
) -> None:
    array = f"array<i64: {', '.join(map(str, values))}>" if values else "array<i64>"
    sparsity = parse(f'#sparse_iter.sparsity<"{kind}", {array}, {density:.17e}>', ctx)
    sp = attrs.params(sparsity)
    assert ir.StringAttr(sp["kind"]).value == kind
    assert list(ir.DenseI64ArrayAttr(sp["params"])) == values
    assert ir.FloatAttr(sp["density"]).value == density
    assert attrs.build("sparsity", **sp) == sparsity

    escaped = op_name.replace("\\", "\\\\").replace('"', '\\"')
    encoding = parse(f'#sparse_iter.encoding<{sparsity}, "{escaped}", {index}, [], []>', ctx)
    ep = attrs.params(encoding)
    assert ir.StringAttr(ep["op_name"]).value == op_name
    assert ep["sparsity"] == sparsity
    assert attrs.build("encoding", **ep) == encoding


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
