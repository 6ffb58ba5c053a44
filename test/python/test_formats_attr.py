"""Host-side layouts, targets and sparsifiers print exactly as MLIR prints the attributes.

The 1:1 mapping between ``sparsecomp.formats`` objects and ``#sparse_iter``
attributes is checked against MLIR itself: the host text parses in MLIR, MLIR
prints it back unchanged, and the host parser reads MLIR's print back to an
equal object.
"""

from __future__ import annotations

import platform
import re
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from mlir import ir

from sparsecomp.errors import FormatError, TargetError
from sparsecomp.formats import Composable, DimMap, Layout, Level, LevelExpr, parse_layout
from sparsecomp.formats.layout import NM_METADATA, short_name
from sparsecomp.formats.names import layout_from_attr
from sparsecomp.ir.context import make_context
from sparsecomp.ir.upstream import layout_from_sparse_tensor, sparse_tensor_text
from sparsecomp.ir.verify import verify
from sparsecomp.targets import CpuTarget, CudaTarget, detect_host, target_from_attr

SHORT = [
    "dense", "csr", "csc", "coo", "dcsr", "ell", "ell:4", "bsr:16x16", "bsr:3x5", "nm:2:4",
    "nm:1:2", "hyb", "hyb:2:8", "bsr+csr:4x4", "bsr+csr:8x2:3",
]  # fmt: skip


@pytest.fixture(scope="module")
def ctx() -> ir.Context:
    return make_context()


def mlir_print(text: str, ctx: ir.Context) -> str:
    return str(ir.Attribute.parse(text, ctx))


def tensor_ok(layout: Layout | Composable, ctx: ir.Context) -> bool:
    """The MLIR verifier accepts a tensor type with this layout."""
    dims = "x".join("?" * layout.rank)
    module = ir.Module.parse(f"func.func private @f(tensor<{dims}xf32, {layout.attr_text()}>)", ctx)
    return verify(module.operation)


@pytest.mark.parametrize("name", SHORT)
def test_short_layouts_print_like_mlir(name: str, ctx: ir.Context) -> None:
    layout = parse_layout(name)
    text = layout.attr_text()
    assert mlir_print(text, ctx) == text
    assert layout_from_attr(text) == layout
    assert tensor_ok(layout, ctx)


@pytest.mark.parametrize("name", ["dense", "csr", "coo", "dcsr"])
@pytest.mark.parametrize("rank", [1, 3])
def test_other_ranks(name: str, rank: int, ctx: ir.Context) -> None:
    layout = parse_layout(name, rank)
    assert layout.rank == rank
    assert mlir_print(layout.attr_text(), ctx) == layout.attr_text()
    assert tensor_ok(layout, ctx)


def test_short_names_are_recovered() -> None:
    for name in ["dense", "csr", "csc", "coo", "dcsr", "ell", "ell:4", "bsr:16x16", "nm:2:4"]:
        layout = parse_layout(name)
        assert isinstance(layout, Layout)
        assert short_name(layout) == name
        assert str(layout) == name


def test_composable_names() -> None:
    assert str(parse_layout("hyb")) == "hyb"
    assert str(parse_layout("bsr+csr:4x4")) == "bsr+csr:4x4"
    hyb = parse_layout("hyb:2:8")
    assert isinstance(hyb, Composable)
    # two column partitions x widths 1, 2, 4, 8, then the CSR rest
    assert [p.rule for p in hyb.parts] == ["ell_bucket"] * 8 + ["rest"]
    assert [p.params for p in hyb.parts[:4]] == [
        (0, 2, 0, 1),
        (0, 2, 1, 2),
        (0, 2, 2, 4),
        (0, 2, 4, 8),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("bsr:0x4", "'bsr:0x4': block sizes must be positive, got 0x4"),
        ("bsr+csr:3x0", "block sizes must be positive, got 3x0"),
        ("nm:5:4", "structured\\[n, m\\] needs 0 < n <= m"),
        ("hyb:1:12", "power-of-two max_width"),
        ("csx", "unknown layout 'csx' for rank 2"),
        ("csc", "unknown layout 'csc' for rank 3"),
    ],
)
def test_bad_short_names(text: str, message: str) -> None:
    rank = 3 if text == "csc" else 2
    with pytest.raises(FormatError, match=message):
        parse_layout(text, rank)


# -- random layouts ------------------------------------------------------------

_BASES = [
    "dense_fixed", "dense_varied", "compressed_varied", "compressed_fixed", "compressed_fixed[3]",
    "loose_compressed", "singleton", "structured[2,4]", "structured[1,2]",
]  # fmt: skip
_PROPS = st.lists(st.sampled_from(["nonunique", "nonordered", "soa"]), unique=True, max_size=2)


@st.composite
def levels(draw: st.DrawFn) -> str:
    base = draw(st.sampled_from(_BASES))
    props = [] if base.startswith(("dense", "structured")) else draw(_PROPS)
    return f"{base}({', '.join(props)})" if props else base


@st.composite
def dim_maps(draw: st.DrawFn) -> DimMap:
    rank = draw(st.integers(1, 3))
    perm = draw(st.permutations(range(rank)))
    blocks = draw(st.lists(st.sampled_from([0, 2, 4]), min_size=rank, max_size=rank))
    outer = [LevelExpr(d, "floordiv", blocks[d]) if blocks[d] else LevelExpr(d) for d in perm]
    inner = [LevelExpr(d, "mod", blocks[d]) for d in perm if blocks[d]]
    return DimMap(rank, tuple(outer + inner))


@st.composite
def layouts(draw: st.DrawFn) -> Layout:
    """Random valid layouts: random parts, kept when the layout rules accept them."""
    dmap = draw(dim_maps())
    names = [draw(levels()) for _ in range(dmap.n_levels)]
    widths = st.sampled_from([0, 8, 16, 32, 64])
    options = {
        "index_group": draw(st.sampled_from(["", "g", "sddmm.x"])),
        "nm_metadata": draw(st.sampled_from(["", *NM_METADATA])),
    }
    try:
        lvls = tuple(Level.parse(n) for n in names)
        return Layout(lvls, dmap, draw(widths), draw(widths), **options)
    except FormatError:
        assume(False)
        raise


@settings(max_examples=150, deadline=None)
@given(layouts())
def test_random_layouts_print_like_mlir(layout: Layout) -> None:
    ctx = _CTX
    text = layout.attr_text()
    printed = mlir_print(text, ctx)
    assert printed == text
    assert layout_from_attr(printed) == layout
    assert tensor_ok(layout, ctx)


@settings(max_examples=150, deadline=None)
@given(layouts())
def test_upstream_round_trip(layout: Layout) -> None:
    """Layouts with a #sparse_tensor form convert there and back unchanged."""
    exportable = all(lv.name not in ("compressed_fixed", "dense_varied") for lv in layout.levels)
    blocks = {e.const for e in layout.dim_to_lvl.results if e.op == "mod"}
    structured = any(lv.kind == "structured" for lv in layout.levels)
    exportable = exportable and not (structured and len(blocks) > 1)
    if not exportable or layout.nm_metadata.startswith("mma_sp"):
        with pytest.raises(FormatError, match=r"ha(s|ve) no #sparse_tensor form"):
            sparse_tensor_text(layout)
        return
    plain = Layout(layout.levels, layout.dim_to_lvl, layout.pos_width, layout.crd_width)
    attr = ir.Attribute.parse(sparse_tensor_text(layout), _CTX)
    assert layout_from_sparse_tensor(attr) == plain


_CTX = make_context()


# -- targets --------------------------------------------------------------------


def test_targets_print_like_mlir(ctx: ir.Context) -> None:
    tuned = CpuTarget("x86_64", ("avx2", "fma"), 256, 2, "intel")
    for target in [
        detect_host(),
        CpuTarget("aarch64", ("neon", "sve"), 128, 4),
        tuned,
        CudaTarget(90),
    ]:
        text = target.attr_text()
        assert mlir_print(text, ctx) == text
        assert target_from_attr(text) == target


def test_cuda_target_shape_lists_may_be_left_out(ctx: ir.Context) -> None:
    """``#sparse_iter.cuda<sm_90>`` is the target ``cuda:sm_90`` names (it was a parse
    error, "expected ','"); a list left out is every shape of its kind the sm has."""
    assert mlir_print("#sparse_iter.cuda<sm_90>", ctx) == "#sparse_iter.cuda<sm_90>"
    assert target_from_attr("#sparse_iter.cuda<sm_90>") == CudaTarget.for_sm(90)
    some = target_from_attr("#sparse_iter.cuda<sm_80, sparse_mma_shapes = [m16n8k16]>")
    assert some == CudaTarget(80, CudaTarget.for_sm(80).mma_shapes, ("m16n8k16",))
    none = target_from_attr("#sparse_iter.cuda<sm_75, mma_shapes = []>")
    assert none == CudaTarget(75, (), ())


def test_targets_accept_named_parameters_in_any_order(ctx: ir.Context) -> None:
    text = "#sparse_iter.cpu<aarch64, threads = 4, vector_bits = 128, features = [neon]>"
    want = CpuTarget("aarch64", ("neon",), 128, 4)
    assert target_from_attr(text) == want
    assert mlir_print(text, ctx) == want.attr_text()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('#sparse_iter.cpu<"x86_64", [avx2], 256, 0>', "expected #sparse_iter.cpu<<value>"),
        ("#sparse_iter.cpu<x86_64, features = [avx2], vector_bits = 256>", "threads = ..."),
        ('#sparse_iter.cpu<"x86_64", features = [], vector_bits = 128, threads = 0>',
         "expected x86_64 or aarch64 and a feature list"),
        ("#sparse_iter.cpu<x86_64, features = [1], vector_bits = 128, threads = 0>",
         "cpu features must be bare names"),
        ("#sparse_iter.cpu<x86_64, features = [], vector_bits = wide, threads = 0>",
         "vector_bits and threads must be integers"),
        ("#sparse_iter.cpu<x86_64, features = [], vector_bits = 128, threads = 0, tune = 3>",
         "tune must be a bare name (intel, amd)"),
        ("#sparse_iter.cuda<90, mma_shapes = [], sparse_mma_shapes = []>",
         "expected a compute capability such as sm_90"),
        ('#sparse_iter.cuda<sm_90, mma_shapes = ["m16n8k16"], sparse_mma_shapes = []>',
         "MMA shapes must be bare names"),
    ],
)  # fmt: skip
def test_target_text_errors(text: str, message: str, ctx: ir.Context) -> None:
    with pytest.raises((FormatError, TargetError), match=re.escape(message)):
        target_from_attr(text)
    with pytest.raises(ir.MLIRError):  # the dialect's parser refuses it too
        ir.Attribute.parse(text, ctx)


def test_detect_host_is_consistent() -> None:
    host = detect_host()
    assert host.threads >= 1
    assert host.vector_bits <= host.max_vector_bits


def test_an_unknown_tune_is_refused() -> None:
    text = "#sparse_iter.cpu<x86_64, features = [], vector_bits = 128, threads = 0, tune = zen>"
    with pytest.raises(TargetError, match="unknown tune 'zen'; known: intel, amd"):
        target_from_attr(text)


@pytest.mark.parametrize(
    ("vendor", "tune"),
    [("GenuineIntel", "intel"), ("AuthenticAMD", "amd"), ("HygonGenuine", ""), (None, "")],
)
def test_the_host_is_tuned_for_its_vendor(
    vendor: str | None, tune: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``vendor_id`` in /proc/cpuinfo picks the tuning; a vendor we do not know, or
    none, gets none. A second processor's line does not override the first's."""
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    lines = [f"vendor_id\t: {vendor}"] if vendor else []
    info = tmp_path / "cpuinfo"
    info.write_text("\n".join(["processor\t: 0", *lines, "flags\t\t: fpu avx2 fma avx512f", ""]))
    host = detect_host(info)
    assert host.tune == tune
    assert host.features == ("avx2", "fma", "avx512f")
    mixed = [CpuTarget("x86_64", ("avx2",), 256, 0, t) for t in ("intel", "amd")]
    assert CpuTarget.common(mixed).tune == ""  # no tuning is every one's
    assert CpuTarget.common(mixed[:1]).tune == "intel"


def test_nm_with_mixed_block_sizes_has_no_upstream_form() -> None:
    """MLIR rejects n:m levels under blocks of different sizes (found by the property above)."""
    dmap = DimMap.parse("(d0, d1) -> (d0 floordiv 2, d1 floordiv 4, d0 mod 2, d1 mod 4)")
    names = ["dense_fixed", "dense_fixed", "dense_fixed", "structured[2,4]"]
    levels = tuple(Level.parse(n) for n in names)
    with pytest.raises(FormatError, match=r"blocks of sizes \[2, 4\] with an n:m level"):
        sparse_tensor_text(Layout(levels, dmap))


def test_rest_min_row_entries() -> None:
    """hyb's rest keeps only rows longer than its widest bucket (in some column partition)."""
    from sparsecomp.formats.composable import Composable, Part, ell_bucket_layout

    assert Composable.hyb().rest_min_row_entries() == 33
    assert Composable.hyb(2, 8).rest_min_row_entries() == 9
    assert Composable.bsr_rest(4, 4).rest_min_row_entries() is None  # blocks take entries
    rest = Composable.hyb().parts[-1]
    gap = Composable(
        (Part("ell_bucket", (0, 1, 0, 1), ell_bucket_layout(1)),
         Part("ell_bucket", (0, 1, 2, 4), ell_bucket_layout(4)), rest)
    )  # fmt: skip
    assert gap.rest_min_row_entries() == 2  # rows of 2 entries skip both buckets
    assert Composable((rest,)).rest_min_row_entries() is None


@pytest.mark.parametrize("name", ["bsr:8x1", "bsr:1x4"])
def test_unit_blocks_survive_mlir_printing(name: str, ctx: ir.Context) -> None:
    """MLIR prints ``d floordiv 1`` as ``d`` and ``d mod 1`` as ``0``; both read back."""
    layout = parse_layout(name)
    printed = mlir_print(layout.attr_text(), ctx)
    assert layout_from_attr(printed) == layout
    assert short_name(layout_from_attr(printed)) == name
    assert tensor_ok(layout, ctx)


def test_a_constant_level_must_be_a_unit_block() -> None:
    with pytest.raises(FormatError, match="only the 'd mod 1' of a block of size 1"):
        layout_from_attr(
            "#sparse_iter.layout<{map = (d0, d1) -> (0 : dense, d0 : dense, d1 : compressed)}>"
        )
