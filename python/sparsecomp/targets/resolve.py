"""Layout resolution: the ``#sparse_iter.layout`` a sparse tensor gets on a target.

Pure host logic, no MLIR: ``sparse-iter-specialize-encodings`` hands it the
text of each ``#sparse_iter.sparsity`` / ``#sparse_iter.encoding`` and the
tensor's shape; the Python API can ask the same questions. Rules, for a
tensor of rank r (the first that applies):

1. r = 0: an error (a scalar has no sparse layout).
2. ``densify`` asked for and ``"unstructured"`` with density d, 0.5 <= d < 1:
   ``dense`` (every level ``dense_fixed``). Density 1.0 means *unknown* and
   never densifies; without ``densify`` density alone never makes a tensor
   dense: the user asks for it.
3. ``"block"`` [R, C]: ``bsr:RxC`` (r = 2 only); [1, 1] is ``csr`` (an entry a block).
4. ``"nm"`` [n, m]: n:m along the innermost dimension, earlier dimensions
   dense (``nm:N:M`` for matrices). On CUDA, a 2:4 f16 ``A`` of a product
   ``C[m, n] += A[m, k] * B[k, n]``, when the target lists the ``m16n8k16``
   sparse MMA shape, gets its ``mma.sp`` metadata (the words the 2:4
   tensor-core kernel reads; other uses keep indices).
5. ``"ragged"``: ``ell`` (r = 2 only); CSR in functions that go to the
   upstream sparsifier (:func:`upstream_form`).
6. ``"unstructured"``: r = 1 a compressed vector; r = 2 ``csr``, or ``csc``
   on CPU targets when the use reads the tensor transposed; r >= 3 batched
   CSR (dense, ..., dense, compressed). CUDA keeps CSR for transposed uses:
   its kernels parallelize over stored rows, and planning the transposed
   product is the lowering's business.

*Transposed*: the outer parallel loop is the first loop dimension indexing
the op's last operand (its result), e.g. ``m`` of a matmul. A use reads a
matrix transposed when that loop indexes the matrix's second dimension:
``(k, m)`` under ``matmul`` with transposed A, or ``A`` of ``vecmat``.

Index widths: 32-bit positions and coordinates, 64 where the static sizes
need it: coordinates when a static level size with coordinates exceeds
2**31 - 1, positions when the product of the static level sizes (the most
entries the tensor can store) does. Dynamic sizes assume 32 bits; packing a
tensor that overflows them is a ``FormatError`` at run time, never a silent
wrap.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from sparsecomp.errors import FormatError, TargetError
from sparsecomp.formats.attrtext import (
    AttrNode,
    Field,
    Indexed,
    Keyword,
    Raw,
    format_value,
    parse_attr,
    split_top_level,
)
from sparsecomp.formats.dimmap import DimMap, LevelExpr
from sparsecomp.formats.layout import Layout, standard_layout
from sparsecomp.formats.levels import Level
from sparsecomp.formats.literals import format_number
from sparsecomp.targets.cpu import CpuTarget, detect_host
from sparsecomp.targets.cuda import CudaTarget

#: ``densify`` turns unstructured tensors at least this dense (and < 1.0) dense.
DENSE_DENSITY = 0.5
INDEX32_MAX = 2**31 - 1
_ARITY = {"unstructured": 0, "nm": 2, "block": 2, "ragged": 0}
KINDS = tuple(_ARITY)
#: Element types and the shape the 2:4 tensor-core kernel takes (``mma.sp``, f16 in,
#: ``lowering/mma_sp_kernels.py``): the operands its metadata words are chosen for.
_MMA_SP_TYPES = ("f16",)
_MMA_SP_SHAPE = "m16n8k16"


@dataclass(frozen=True)
class Sparsity:
    """Host twin of ``#sparse_iter.sparsity``: kind, its parameters, expected density."""

    kind: str = "unstructured"
    params: tuple[int, ...] = ()
    density: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise FormatError(
                f"unknown sparsity kind '{self.kind}'; expected one of {', '.join(KINDS)}"
            )
        arity = _ARITY[self.kind]
        if len(self.params) != arity:
            raise FormatError(
                f"sparsity '{self.kind}' takes {arity} params, got {len(self.params)}"
            )
        if self.kind == "nm" and not 0 < self.params[0] <= self.params[1]:
            raise FormatError(
                f"n:m sparsity needs 0 < n <= m, got {self.params[0]}:{self.params[1]}"
            )
        if self.kind == "block" and min(self.params) <= 0:
            raise FormatError(
                f"block sizes must be positive, got {self.params[0]}x{self.params[1]}"
            )
        if not 0.0 <= self.density <= 1.0:
            raise FormatError(f"density must lie in [0, 1], got {self.density}")

    def attr_text(self) -> str:
        """``#sparse_iter.sparsity<kind[params], density = d>`` as MLIR prints it."""
        density = f", density = {format_number(self.density)}" if self.density != 1.0 else ""
        return f"#sparse_iter.sparsity<{format_value(Indexed(self.kind, self.params))}{density}>"

    @classmethod
    def from_node(cls, node: AttrNode) -> Sparsity:
        if node.mnemonic != "sparsity" or not 1 <= len(node.args) <= 2:
            raise FormatError(
                f"expected #sparse_iter.sparsity<kind[params], density = d>, got "
                f"{format_value(node)}"
            )
        spec, *rest = node.args
        if isinstance(spec, Keyword):
            spec = Indexed(spec.name, ())
        density = 1.0
        if rest:
            _, named = node.fields("sparsity", 1, ("density",))
            density = named["density"]
        if not isinstance(spec, Indexed) or not all(isinstance(p, int) for p in spec.args):
            raise FormatError(
                f"a sparsity is a kind with integer params, e.g. nm[2, 4]; got {format_value(spec)}"
            )
        if not isinstance(density, int | float) or isinstance(density, bool):
            raise FormatError(f"density must be a number, got {format_value(density)}")
        return cls(spec.name, tuple(int(p) for p in spec.args), float(density))


@dataclass(frozen=True)
class IndexingMap:
    """An op's indexing map: the loop dimension of each tensor dimension (None: not one)."""

    n_loops: int
    results: tuple[int | None, ...]

    @classmethod
    def parse(cls, text: str) -> IndexingMap:
        body = text.strip().removeprefix("affine_map<").removesuffix(">")
        match = re.fullmatch(r"\(([^)]*)\)\s*(?:\[[^\]]*\])?\s*->\s*\((.*)\)", body.strip())
        if not match:
            raise FormatError(f"malformed indexing map '{text}'")
        names = [n.strip() for n in match.group(1).split(",") if n.strip()]
        exprs = split_top_level(match.group(2))
        return cls(len(names), tuple(names.index(e) if e in names else None for e in exprs))


@dataclass(frozen=True)
class Use:
    """How an op uses the tensor: op name, operand index, operand element types, maps."""

    op_name: str = ""
    operand_index: int = 0
    element_types: tuple[str, ...] = ()
    indexing_maps: tuple[IndexingMap, ...] = ()
    #: The maps as MLIR prints them (``affine_map<...>``), to print the encoding back.
    map_texts: tuple[str, ...] = field(default=(), compare=False)

    @property
    def operand_map(self) -> IndexingMap | None:
        maps, i = self.indexing_maps, self.operand_index
        return maps[i] if 0 <= i < len(maps) else None

    @property
    def element_type(self) -> str | None:
        types, i = self.element_types, self.operand_index
        return types[i] if 0 <= i < len(types) else None

    @property
    def transposed(self) -> bool:
        """The outer parallel loop indexes a later dimension than the first."""
        own = self.operand_map
        if own is None or not self.indexing_maps:
            return False
        outer = next((d for d in self.indexing_maps[-1].results if d is not None), None)
        return outer is not None and outer in own.results[1:]


@dataclass(frozen=True)
class Encoding:
    """Host twin of ``#sparse_iter.encoding`` (a bare sparsity is an encoding without use)."""

    sparsity: Sparsity
    use: Use = field(default_factory=Use)

    @classmethod
    def parse(cls, text: str) -> Encoding:
        """From ``#sparse_iter.sparsity<...>`` or ``#sparse_iter.encoding<...>`` text."""
        node = parse_attr(text)
        if node.mnemonic == "sparsity":
            return cls(Sparsity.from_node(node))
        if node.mnemonic != "encoding":
            raise FormatError(f"not a #sparse_iter.sparsity or .encoding: '{text}'")
        (sparsity,), named = node.fields("encoding", 1, _USE_KEYS)
        if not isinstance(sparsity, AttrNode):
            raise FormatError(f"an encoding starts with a #sparse_iter.sparsity, got '{text}'")
        op_name, index = named["op_name"], named["operand"]
        types, maps = named["element_types"], named["indexing_maps"]
        if not isinstance(op_name, str):
            raise FormatError(f"op_name must be a string, got {format_value(op_name)}")
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise FormatError(f"operand must be a non-negative integer, got {format_value(index)}")
        if not isinstance(types, list) or not all(isinstance(t, Keyword | Raw) for t in types):
            raise FormatError(f"element_types must be an array of types, got {format_value(types)}")
        if not isinstance(maps, list) or not all(
            isinstance(m, Raw) and m.text.startswith("affine_map<") for m in maps
        ):
            raise FormatError(
                f"indexing_maps must be an array of affine maps, got {format_value(maps)}"
            )
        if maps and index >= len(maps):
            raise FormatError(f"operand {index} is out of range for {len(maps)} indexing maps")
        use = Use(
            op_name,
            index,
            tuple(format_value(t) for t in types),
            tuple(IndexingMap.parse(m.text) for m in maps),
            tuple(m.text for m in maps),
        )
        return cls(Sparsity.from_node(sparsity), use)

    def attr_text(self) -> str:
        """``#sparse_iter.encoding<...>`` as MLIR prints it."""
        use = self.use
        fields = [
            Field("op_name", use.op_name),
            Field("operand", use.operand_index),
            Field("element_types", [Raw(t) for t in use.element_types]),
            Field("indexing_maps", [Raw(m) for m in use.map_texts]),
        ]
        body = ", ".join([self.sparsity.attr_text(), *(format_value(f) for f in fields)])
        return f"#sparse_iter.encoding<{body}>"


_USE_KEYS = ("op_name", "operand", "element_types", "indexing_maps")


Target = CpuTarget | CudaTarget


def select_target(
    option: str,
    function_target: str | None,
    module_targets: Mapping[str, Target],
    host: Callable[[], Target] = detect_host,
) -> Target:
    """The target a function compiles for.

    A non-empty ``option`` decides for every function: a name from the module's
    ``sparse_iter.targets``, else ``"host"`` for :func:`detect_host`. Without it,
    the function's ``sparse_iter.target``, else the module's only target, else
    the host when the module names none.
    """
    if option:
        if option in module_targets:
            return module_targets[option]
        if option == "host":
            return host()
        listed = ", ".join(sorted(module_targets)) or "none"
        raise TargetError(
            f"unknown target '{option}': expected 'host' or a name from the "
            f"module's sparse_iter.targets ({listed})"
        )
    if function_target is not None:
        return module_targets[function_target]
    if len(module_targets) == 1:
        return next(iter(module_targets.values()))
    if not module_targets:
        return host()
    raise TargetError(
        f"no sparse_iter.target on this function and the module has several targets "
        f"({', '.join(sorted(module_targets))}); name one on the function "
        '(attributes {sparse_iter.target = "NAME"}), or, in sparsecomp-opt, pass the '
        "option target=NAME of sparse-iter-specialize-encodings"
    )


def resolve(
    encoding: Encoding, shape: Sequence[int | None], target: Target, *, densify: bool = False
) -> Layout:
    """The layout of a tensor of ``shape`` (None: dynamic) with ``encoding`` on ``target``."""
    rank, use = len(shape), encoding.use
    if rank == 0:
        raise FormatError("a rank-0 tensor has no sparse layout; drop its encoding")
    own = use.operand_map
    if own is not None and len(own.results) != rank:
        raise FormatError(
            f"the indexing map of operand {use.operand_index} of '{use.op_name}' has "
            f"{len(own.results)} results but the tensor has rank {rank}"
        )
    layout = _choose(encoding, rank, target, densify)
    return _with_widths(layout, shape)


def resolve_text(
    text: str, shape: Sequence[int | None], target: Target, *, densify: bool = False
) -> Layout:
    """:func:`resolve` on the text of a sparsity or encoding attribute."""
    return resolve(Encoding.parse(text), shape, target, densify=densify)


def upstream_form(layout: Layout) -> Layout:
    """``layout`` as a function compiled by the upstream sparsifier holds it.

    The sparsifier takes ``#sparse_tensor`` encodings only, which have no ELL
    (``compressed_fixed``) or ragged prefix (``dense_varied``) level: those
    become ``compressed_varied`` with the same properties and widths (ragged
    sparsity resolves to CSR there instead of ELL). Other layouts are
    returned unchanged. The runtime converts a tensor packed in the original
    layout to this one at the call.
    """
    levels = tuple(
        replace(lv, kind="compressed", varied=True, width=None)
        if lv.name in ("compressed_fixed", "dense_varied")
        else lv
        for lv in layout.levels
    )
    return layout if levels == layout.levels else replace(layout, levels=levels)


def unblocked(layout: Layout) -> Layout:
    """``layout`` with one level per dimension: BSR and n:m become CSR.

    Each dimension keeps the place of its first level and becomes dense if
    all its levels are dense, else its first sparse level (a ``structured``
    group becomes ``compressed``). Widths narrower than 32 bits widen to
    32: positions then count entries rather than blocks, coordinates
    address elements rather than blocks. A layout without blocks is
    returned unchanged. Functions the upstream sparsifier compiles hold n:m
    tensors, and BSR ones of dynamic, empty or partial shapes, this way
    (:mod:`sparsecomp.ir.whole_blocks`).
    """
    results = layout.dim_to_lvl.results
    if all(r.op == "id" for r in results):
        return layout
    order: list[int] = []
    per_dim: dict[int, list[Level]] = {}
    for expr, level in zip(results, layout.levels, strict=True):
        if expr.dim not in per_dim:
            order.append(expr.dim)
        per_dim.setdefault(expr.dim, []).append(level)
    levels = []
    for dim in order:
        sparse = [lv for lv in per_dim[dim] if lv.kind != "dense"]
        if not sparse:
            levels.append(Level("dense"))
        elif sparse[0].kind == "structured":
            levels.append(Level("compressed", varied=True))
        else:
            levels.append(sparse[0])
    return replace(
        layout,
        levels=tuple(levels),
        dim_to_lvl=DimMap.permutation(order),
        pos_width=_at_least_32(layout.pos_width),
        crd_width=_at_least_32(layout.crd_width),
        nm_metadata="",
    )


def _at_least_32(width: int) -> int:
    return width if width == 0 else max(width, 32)


def _choose(encoding: Encoding, rank: int, target: Target, densify: bool) -> Layout:
    sparsity, use = encoding.sparsity, encoding.use
    kind, params = sparsity.kind, sparsity.params
    if densify and kind == "unstructured" and DENSE_DENSITY <= sparsity.density < 1.0:
        return _named("dense", rank)
    if kind in ("block", "ragged") and rank != 2:
        raise FormatError(f"'{kind}' sparsity needs a rank-2 tensor, got rank {rank}")
    if kind == "block" and tuple(params) == (1, 1):
        # a 1x1 block is an entry: CSR (BSR 1x1 stored a block row per row, and on a GPU
        # took neither the tensor cores nor CSR's schedule, unremarked)
        return _named("csr", rank)
    if kind == "block":
        return _named(f"bsr:{params[0]}x{params[1]}", rank)
    if kind == "ragged":
        return _named("ell", rank)
    if kind == "nm":
        return _nm(params[0], params[1], rank, use, target)
    if rank == 2 and isinstance(target, CpuTarget) and use.transposed:
        return _named("csc", rank)
    return _named("csr", rank)


def _named(name: str, rank: int) -> Layout:
    layout = standard_layout(name, rank)
    assert layout is not None, (name, rank)
    return layout


def _a_of_a_product(use: Use) -> bool:
    """Whether ``use`` is the ``A`` of ``C[m, n] += A[m, k] * B[k, n]``, which the 2:4
    tensor-core kernel computes (a matvec, ``A @ B^T`` or a row sum given its metadata
    words failed to compile: no other kernel reads them)."""
    maps = use.indexing_maps
    return (
        use.op_name in ("linalg.matmul", "linalg.generic")
        and use.operand_index == 0
        and len(maps) == 3
        and all(m.n_loops == 3 for m in maps)
        and [m.results for m in maps] == [(0, 2), (2, 1), (0, 1)]
    )


def _nm(n: int, m: int, rank: int, use: Use, target: Target) -> Layout:
    exprs = tuple(LevelExpr(d) for d in range(rank - 1))
    exprs += (LevelExpr(rank - 1, "floordiv", m), LevelExpr(rank - 1, "mod", m))
    levels = tuple(Level.parse("dense_fixed") for _ in range(rank))
    levels += (Level.parse(f"structured[{n},{m}]"),)
    metadata = ""
    if (
        isinstance(target, CudaTarget)
        and (n, m) == (2, 4)
        and _MMA_SP_SHAPE in target.sparse_mma_shapes
        and _a_of_a_product(use)
        and use.element_type in _MMA_SP_TYPES
    ):
        # the words the 2:4 tensor-core kernel reads; no other kernel reads metadata
        # words (a target listing m16n8k32 first gave its operands words that the
        # scalar schedule then read as coordinates, out of bounds)
        metadata = f"mma_sp_{_MMA_SP_SHAPE}"
    return Layout(levels, DimMap(rank, exprs), nm_metadata=metadata)


def _level_sizes(layout: Layout, shape: Sequence[int | None]) -> list[int | None]:
    sizes: list[int | None] = []
    for expr in layout.dim_to_lvl.results:
        size = shape[expr.dim]
        if expr.op == "mod":
            size = expr.const
        elif expr.op == "floordiv" and size is not None:
            size = -(-size // expr.const)
        sizes.append(size)
    return sizes


def _with_widths(layout: Layout, shape: Sequence[int | None]) -> Layout:
    sizes = _level_sizes(layout, shape)
    known = [s for s in sizes if s is not None]
    crd_sizes = [s for s, lv in zip(sizes, layout.levels, strict=True) if lv.has_coordinates]
    crd_wide = any(s is not None and s > INDEX32_MAX for s in crd_sizes)
    pos_wide = math.prod(known) > INDEX32_MAX
    return replace(layout, pos_width=64 if pos_wide else 32, crd_width=64 if crd_wide else 32)
