"""The layout resolver's rules (sparsecomp.targets.resolve), without MLIR."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparsecomp.errors import FormatError, TargetError
from sparsecomp.formats.layout import standard_layout
from sparsecomp.formats.names import layout_from_attr
from sparsecomp.targets import CpuTarget, CudaTarget
from sparsecomp.targets.resolve import (
    INDEX32_MAX,
    Encoding,
    IndexingMap,
    Sparsity,
    Use,
    resolve,
    resolve_text,
    select_target,
    unblocked,
)

CPU = CpuTarget()
CUDA = CudaTarget(80, ("m16n8k16",), ("m16n8k32",))
MATMUL = (
    "(m, n, k) -> (m, k)",
    "(m, n, k) -> (k, n)",
    "(m, n, k) -> (m, n)",
)
TRANSPOSED_A = ("(m, n, k) -> (k, m)", *MATMUL[1:])
VECMAT = ("(m, n) -> (m)", "(m, n) -> (m, n)", "(m, n) -> (n)")
UNSTRUCTURED = Sparsity("unstructured", (), 0.01)


def use(maps: tuple[str, ...], index: int, elt: str = "f32", op: str = "linalg.matmul") -> Use:
    parsed = tuple(IndexingMap.parse(m) for m in maps)
    return Use(op, index, (elt,) * len(maps), parsed)


def test_parse_encoding_text():
    text = (
        "#sparse_iter.encoding<#sparse_iter.sparsity<nm[2, 4], density = 0.5>,"
        ' op_name = "linalg.matmul", operand = 0, element_types = [f16, f16, f32],'
        " indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>,"
        " affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>]>"
    )
    enc = Encoding.parse(text)
    assert enc.sparsity == Sparsity("nm", (2, 4), 0.5)
    assert enc.use.op_name == "linalg.matmul"
    assert enc.use.element_types == ("f16", "f16", "f32")
    assert enc.use.operand_map == IndexingMap(3, (0, 2))
    assert enc.attr_text() == text
    bare = Encoding.parse("#sparse_iter.sparsity<ragged>")
    assert bare == Encoding(Sparsity("ragged", (), 1.0))


def test_indexing_map_keeps_compound_results_unknown():
    assert IndexingMap.parse("affine_map<(d0, d1)[s0] -> (d0 + d1, 0, d1)>").results == (
        None,
        None,
        1,
    )


@pytest.mark.parametrize(
    ("sparsity", "shape", "expected"),
    [
        (Sparsity("block", (4, 8)), (None, None), "bsr:4x8"),
        (Sparsity("block", (1, 1)), (None, None), "csr"),  # an entry a block
        (Sparsity("nm", (2, 4)), (8, 16), "nm:2:4"),
        (Sparsity("ragged"), (None, None), "ell"),
        (UNSTRUCTURED, (None, None), "csr"),
    ],
)
def test_kinds(sparsity, shape, expected):
    assert str(resolve(Encoding(sparsity), shape, CPU)) == expected


@pytest.mark.parametrize("rank", [1, 3, 4])
def test_other_ranks_compress_the_last_dimension(rank):
    layout = resolve(Encoding(UNSTRUCTURED), (None,) * rank, CPU)
    assert layout == standard_layout("csr", rank)
    assert [lv.name for lv in layout.levels][-1] == "compressed_varied"


def test_nm_rank_1_splits_the_only_dimension():
    layout = resolve(Encoding(Sparsity("nm", (1, 8))), (64,), CPU)
    assert [str(lv) for lv in layout.levels] == ["dense", "structured[1, 8]"]
    assert str(layout.dim_to_lvl) == "(d0) -> (d0 floordiv 8, d0 mod 8)"


@pytest.mark.parametrize(
    ("maps", "index", "transposed"),
    [
        (MATMUL, 0, False),  # A as (m, k): m is the outer parallel loop
        (TRANSPOSED_A, 0, True),  # A as (k, m)
        (MATMUL, 1, False),  # B: m does not index it; rows are streamed per m
        (MATMUL, 2, False),  # the result itself
        (VECMAT, 1, True),  # y(n) = x(m) A(m, n): n is outer, A's second dimension
        (("(i, j) -> (i, j)", "(i, j) -> ()"), 0, False),  # a full reduction has no outer loop
        (("(i, j) -> (i, i + j)", "(i, j) -> ()"), 0, False),
    ],
)
def test_transposed_use_gets_csc_on_cpu_only(maps, index, transposed):
    enc = Encoding(UNSTRUCTURED, use(maps, index))
    assert enc.use.transposed is transposed
    assert str(resolve(enc, (None, None), CPU)) == ("csc" if transposed else "csr")
    assert str(resolve(enc, (None, None), CUDA)) == "csr"


@pytest.mark.parametrize(
    ("elt", "index", "target", "metadata"),
    [
        # the words the 2:4 tensor-core kernel reads (m16n8k16, f16): a target listing
        # m16n8k32 first got those, which no kernel reads (the scalar schedule read
        # them as coordinates, out of bounds: a segfault)
        ("f16", 0, CudaTarget(80, ("m16n8k16",), ("m16n8k32", "m16n8k16")), "mma_sp_m16n8k16"),
        ("f16", 0, CUDA, ""),  # m16n8k32 only
        ("bf16", 0, CudaTarget(80, ("m16n8k16",), ("m16n8k16",)), ""),  # no bf16 2:4 kernel
        ("f32", 0, CUDA, ""),  # mma.sp is for 16-bit floats here
        ("f16", 1, CUDA, ""),  # the sparse operand of mma.sp is A
        ("f16", 0, CudaTarget(80, (), ()), ""),  # no sparse MMA shape to plan for
        ("f16", 0, CPU, ""),
    ],
)
def test_mma_sp_metadata(elt, index, target, metadata):
    enc = Encoding(Sparsity("nm", (2, 4), 0.5), use(MATMUL, index, elt))
    assert resolve(enc, (16, 32), target).nm_metadata == metadata


@pytest.mark.parametrize(
    ("maps", "op"),
    [
        (("(m, n) -> (m, n)", "(m, n) -> (n)", "(m, n) -> (m)"), "linalg.matvec"),
        (("(m, n, k) -> (m, k)", "(m, n, k) -> (n, k)", "(m, n, k) -> (m, n)"), "linalg.matmul"),
        (("(m, n) -> (m, n)", "(m, n) -> (m)"), "linalg.reduce"),
    ],
    ids=["matvec", "a_b_transposed", "row_sum"],
)
def test_mma_sp_metadata_only_for_the_product_its_kernel_computes(maps, op):
    """An f16 SpMV, A @ B^T or row sum over nm[2, 4] got the mma.sp words, which only the
    2:4 tensor-core kernel (C += A B) reads: the build failed in stage loops."""
    target = CudaTarget(80, ("m16n8k16",), ("m16n8k16",))
    enc = Encoding(Sparsity("nm", (2, 4), 0.5), use(maps, 0, "f16", op))
    assert resolve(enc, (16, 32), target).nm_metadata == ""


@pytest.mark.parametrize(
    ("density", "densify", "expected"),
    [(0.6, True, "dense"), (0.5, True, "dense"), (0.49, True, "csr"), (1.0, True, "csr"),
     (0.6, False, "csr")],
)  # fmt: skip
def test_densify_only_when_asked_and_density_known(density, densify, expected):
    enc = Encoding(Sparsity("unstructured", (), density))
    assert str(resolve(enc, (None, None), CPU, densify=densify)) == expected


def test_densify_leaves_structured_kinds_alone():
    enc = Encoding(Sparsity("block", (2, 2), 0.9))
    assert str(resolve(enc, (None, None), CPU, densify=True)) == "bsr:2x2"


@pytest.mark.parametrize(
    ("shape", "widths"),
    [
        ((None, None), (32, 32)),
        ((40000, 40000), (32, 32)),
        ((60000, 60000), (64, 32)),  # 3.6e9 entries may be stored
        ((3_000_000_000, 4), (64, 32)),  # the long dimension is dense: no coordinates
        ((4, 3_000_000_000), (64, 64)),
        ((None, 3_000_000_000), (64, 64)),
    ],
)
def test_index_widths(shape, widths):
    layout = resolve(Encoding(UNSTRUCTURED), shape, CPU)
    assert (layout.pos_width, layout.crd_width) == widths


@pytest.mark.parametrize(
    ("text", "shape", "message"),
    [
        ("#sparse_iter.sparsity<unstructured>", (), "rank-0"),
        ("#sparse_iter.sparsity<block[2, 2]>", (4, 4, 4), "rank-2"),
        ("#sparse_iter.sparsity<ragged>", (4,), "rank-2"),
        (
            "#sparse_iter.encoding<#sparse_iter.sparsity<unstructured>, "
            'op_name = "linalg.matvec", operand = 0, element_types = [],'
            " indexing_maps = [affine_map<(i, j) -> (i, j)>]>",
            (4,),
            "has 2 results but the tensor has rank 1",
        ),
    ],
)
def test_unresolvable(text, shape, message):
    with pytest.raises(FormatError, match=message):
        resolve_text(text, shape, CPU)


def test_unknown_kind_is_rejected():
    with pytest.raises(FormatError, match="unknown sparsity kind"):
        Sparsity("diagonal")


class TestSelectTarget:
    TARGETS = {"cpu": CPU, "gpu": CUDA}  # noqa: RUF012

    def host(self):
        return CpuTarget("x86_64", ("avx2",), 256, 3)

    def test_option_names_a_module_target_for_every_function(self):
        assert select_target("gpu", "cpu", self.TARGETS, self.host) is CUDA

    def test_host_option(self):
        assert select_target("host", "gpu", self.TARGETS, self.host) == self.host()

    def test_module_target_called_host_wins(self):
        assert select_target("host", None, {"host": CUDA}, self.host) is CUDA

    def test_unknown_option(self):
        with pytest.raises(TargetError, match=r"unknown target 'tpu'.*\(cpu, gpu\)"):
            select_target("tpu", None, self.TARGETS, self.host)

    def test_without_option(self):
        assert select_target("", "gpu", self.TARGETS, self.host) is CUDA
        assert select_target("", None, {"only": CUDA}, self.host) is CUDA
        assert select_target("", None, {}, self.host) == self.host()
        with pytest.raises(TargetError, match="several targets"):
            select_target("", None, self.TARGETS, self.host)


# -- properties ------------------------------------------------------------------

sizes = st.one_of(st.none(), st.integers(1, 2**34))


@st.composite
def cases(draw):
    kind = draw(st.sampled_from(["unstructured", "nm", "block", "ragged"]))
    rank = 2 if kind in ("block", "ragged") else draw(st.integers(1, 4))
    if kind == "nm":
        m = draw(st.integers(1, 16))
        params: tuple[int, ...] = (draw(st.integers(1, m)), m)
    elif kind == "block":
        params = (draw(st.integers(1, 32)), draw(st.integers(1, 32)))
    else:
        params = ()
    density = draw(st.sampled_from([0.01, 0.5, 0.9, 1.0]))
    shape = tuple(draw(sizes) for _ in range(rank))
    return Sparsity(kind, params, density), shape


@settings(max_examples=200, deadline=None)
@given(case=cases(), target=st.sampled_from([CPU, CUDA]), densify=st.booleans())
def test_resolved_layouts_are_valid_and_round_trip(case, target, densify):
    sparsity, shape = case
    layout = resolve(Encoding(sparsity), shape, target, densify=densify)
    assert layout.rank == len(shape)
    assert layout_from_attr(layout.attr_text()) == layout
    assert layout.pos_width in (32, 64)
    assert layout.crd_width in (32, 64)


@settings(max_examples=200, deadline=None)
@given(case=cases())
def test_widths_follow_the_static_sizes(case):
    sparsity, shape = case
    layout = resolve(Encoding(sparsity), shape, CPU)
    if all(s is None for s in shape):
        assert (layout.pos_width, layout.crd_width) == (32, 32)
    static = [s for s in shape if s is not None]
    if math.prod(static) <= INDEX32_MAX and sparsity.kind in ("unstructured", "ragged"):
        assert layout.pos_width == 32  # no padding: level sizes are the dim sizes
    if layout.crd_width == 64:
        assert max(static) > INDEX32_MAX


@pytest.mark.parametrize(
    ("name", "expected"),
    [("bsr:2x3", "csr"), ("nm:2:4", "csr"), ("csr", "csr"), ("dcsr", "dcsr"), ("coo", "coo")],
)
def test_unblocked_drops_blocks(name, expected):
    assert unblocked(standard_layout(name, 2)) == standard_layout(expected, 2)


def test_unblocked_keeps_level_order_and_widens_narrow_widths():
    bsr_cols = layout_from_attr(
        "#sparse_iter.layout<{map = (i, j) -> (j floordiv 2 : dense, i floordiv 4 : compressed,"
        " j mod 2 : dense, i mod 4 : dense), posWidth = 8}>"
    )
    got = unblocked(bsr_cols)
    assert str(got.dim_to_lvl) == "(d0, d1) -> (d1, d0)"
    assert [lv.name for lv in got.levels] == ["dense_fixed", "compressed_varied"]
    assert (got.pos_width, got.crd_width) == (32, 0)


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(["bsr:2x2", "bsr:4x3", "nm:2:4", "nm:1:8", "csr"]),
    m=st.integers(0, 9),
    n=st.integers(0, 17),
    seed=st.integers(0, 2**16),
)
def test_unblocked_holds_the_same_matrix(name, m, n, seed):
    """A matrix packed in a layout, converted to its unblocked form, loses nothing."""
    import numpy as np

    from sparsecomp.formats import SparseTensor

    layout = standard_layout(name, 2)
    rng = np.random.default_rng(seed)
    a = (rng.random((m, n)) < 0.4) * rng.integers(1, 9, (m, n)).astype(np.float32)
    if layout.is_structured:  # keep at most n nonzeros of every m columns
        keep, group = layout.levels[-1].n, layout.levels[-1].m
        for j0 in range(0, n, group):
            a[:, j0 : j0 + group] *= np.cumsum(a[:, j0 : j0 + group] != 0, axis=1) <= keep
    t = SparseTensor.from_dense(a, layout).to(unblocked(layout))
    assert t.layout.dim_to_lvl.is_permutation
    np.testing.assert_array_equal(t.to_dense(), a)
