"""What the upstream sparsifier cannot represent: partial blocks and built n:m values.

Upstream stores a blocked dimension (BSR's ``i floordiv b``/``i mod b``, an
n:m group ``j floordiv m``/``j mod m``) as whole blocks: a tensor's
dimension size is its level size times the block, so a 3x3 BSR 2x2 matrix
is 4x4 to the sparsifier (``tensor.dim`` answers 4, its loops read dense
operands out of bounds). A function compiled by the fallback is therefore
exact only when every blocked value's blocked dimensions are multiples of
their block. :func:`problems` finds the values where that cannot be shown
before a call (a static size that is not a multiple, a dynamic size that
comes from no argument dimension) and the n:m values the function builds
(upstream inserts into an n:m level like a compressed one, without the
group's padding, so the storage comes back malformed). :func:`argument_multiples`
lists the argument dimensions the runtime must check (the ABI's
``multiple_of``), to which every dynamic blocked size was traced.

sparse_iter's own lowering has none of these limits (a partial last block
is bounded by the dimension size).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from mlir import ir

from sparsecomp.errors import FormatError
from sparsecomp.formats.layout import Layout
from sparsecomp.ir.attrs import layout_of
from sparsecomp.ir.upstream import is_sparse_tensor_encoding, layout_from_sparse_tensor
from sparsecomp.ir.walk import preorder

#: Ops whose results take the dimension sizes of an operand (source, init).
_SAME_SIZES = ("sparse_tensor.convert", "sparse_iter.set_encoding", "sparse_iter.unset_encoding")
#: Ops that pass an n:m value on without building its storage.
_PASS_NM = ("func.call", "sparse_tensor.assemble", "sparse_iter.get_part")

ArgDim = tuple[int, int]


def _layout(ty: ir.Type) -> Layout | None:
    if not isinstance(ty, ir.RankedTensorType):
        return None
    try:
        if is_sparse_tensor_encoding(ty.encoding):
            return layout_from_sparse_tensor(ty.encoding)
        layout = layout_of(ty)
    except FormatError:
        return None
    return layout if isinstance(layout, Layout) else None


def block_sizes(layout: Layout) -> tuple[int, ...]:
    """Per dimension, the block its ``mod`` levels cut it into (1: not blocked)."""
    sizes = [1] * layout.dim_to_lvl.n_dims
    for expr in layout.dim_to_lvl.results:
        if expr.op == "mod":
            sizes[expr.dim] = math.lcm(sizes[expr.dim], expr.const)
    return tuple(sizes)


def _is_nm(layout: Layout) -> bool:
    return any(level.kind == "structured" for level in layout.levels)


def _constant(value: ir.Value) -> int | None:
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.name != "arith.constant":
        return None
    return int(ir.IntegerAttr(owner.attributes["value"]).value)


def _size_source(size: ir.Value, entry: ir.Block) -> ArgDim | int | None:
    """Where a dynamic ``index`` size comes from: an argument dimension, a constant, or None."""
    if (const := _constant(size)) is not None:
        return const
    owner = size.owner
    if isinstance(owner, ir.Block) or owner.name != "tensor.dim":
        return None
    dim = _constant(owner.operands[1])
    return None if dim is None else dim_source(owner.operands[0], dim, entry)


def dim_source(value: ir.Value, dim: int, entry: ir.Block) -> ArgDim | int | None:
    """Where dimension ``dim`` of tensor ``value`` comes from (see :func:`_size_source`)."""
    ty = ir.RankedTensorType(value.type)
    if not ty.is_dynamic_dim(dim):
        return int(ty.shape[dim])
    owner = value.owner
    if isinstance(owner, ir.Block):
        arg = ir.BlockArgument(value)
        return (arg.arg_number, dim) if arg.owner == entry else None
    if owner.name.startswith("linalg."):  # destination style: result n is init n
        inits = len(owner.operands) - len(owner.results)
        return dim_source(owner.operands[inits + ir.OpResult(value).result_number], dim, entry)
    if owner.name in _SAME_SIZES:
        return dim_source(owner.operands[0], dim, entry)
    if owner.name in ("tensor.empty", "bufferization.alloc_tensor"):
        dynamic = [d for d in range(ty.rank) if ty.is_dynamic_dim(d)]
        return _size_source(owner.operands[dynamic.index(dim)], entry)
    return None


def _values(func: ir.Operation) -> Iterator[tuple[ir.Value, ir.Operation | None]]:
    """Every tensor value the function defines, with its defining op (None: an argument)."""
    for arg in func.regions[0].blocks[0].arguments:
        yield arg, None
    for op in preorder(func):
        if op.name != "func.func":
            for result in op.results:
                yield result, op


def _padded(op: ir.Operation, layout: Layout) -> bool:
    """A conversion to n:m that ``sparse-iter-pad-nm-converts`` builds with padded groups."""
    if op.name not in _SAME_SIZES[:2] or not op.operands:
        return False
    src, dst = _layout(op.operands[0].type), ir.RankedTensorType(op.results[0].type)
    return (
        (src is None or not _is_nm(src))
        and dst.has_static_shape
        and isinstance(dst.element_type, ir.FloatType | ir.IntegerType)
        and all(lv.name == "dense_fixed" for lv in layout.levels[:-1])
    )


def _check(
    value: ir.Value, op: ir.Operation | None, entry: ir.Block, needs: dict[ArgDim, int] | None
) -> str | None:
    """Why ``value`` (defined by ``op``) is out of upstream's reach, or None.

    ``needs`` collects the argument dimensions to check at a call; None
    for a private function, which the runtime never calls.
    """
    layout = _layout(value.type)
    if layout is None:
        return None
    if (
        _is_nm(layout)
        and op is not None
        and not op.name.startswith(("linalg.", *_PASS_NM))
        and not _padded(op, layout)
    ):
        return (
            f"'{op.name}' builds an n:m ({layout.levels[-1]}) value, which the upstream "
            "sparsifier stores without the group's padding (malformed); build it densely or "
            "in CSR, or compute it with sparse_iter (same structure as an n:m input)"
        )
    ty = ir.RankedTensorType(value.type)
    for dim, block in enumerate(block_sizes(layout)):
        if block == 1:
            continue
        source = dim_source(value, dim, entry)
        if isinstance(source, int) and source % block:
            return (
                f"dimension {dim} of {ty} has size {source}, not a multiple of its block "
                f"{block}: the upstream sparsifier stores whole blocks only"
            )
        if source is None or (isinstance(source, tuple) and needs is None):
            return (
                f"dimension {dim} of {ty} has a size that is neither static nor a public "
                "function argument's dimension, so it cannot be checked to be a multiple of "
                f"its block {block} (the upstream sparsifier stores whole blocks only)"
            )
        if isinstance(source, tuple) and needs is not None:
            needs[source] = math.lcm(needs.get(source, 1), block)
    return None


def _public(func: ir.Operation) -> bool:
    vis = func.attributes["sym_visibility"] if "sym_visibility" in func.attributes else None
    return vis is None or ir.StringAttr(vis).value == "public"


def problems(func: ir.Operation) -> Iterator[tuple[ir.Operation, str]]:
    """``(op, why)`` for each value the fallback could not compute exactly (see module doc)."""
    if not func.regions[0].blocks:  # a declaration
        return
    entry = func.regions[0].blocks[0]
    needs: dict[ArgDim, int] | None = {} if _public(func) else None
    for value, op in _values(func):
        why = _check(value, op, entry, needs)
        if why is not None:
            yield (op or func), why


def argument_multiples(func: ir.Operation) -> dict[ArgDim, int]:
    """``(argument, dimension) -> m``: sizes that must be multiples of ``m`` at a call."""
    if not func.regions[0].blocks:  # a declaration
        return {}
    entry = func.regions[0].blocks[0]
    needs: dict[ArgDim, int] = {}
    for value, op in _values(func):
        _check(value, op, entry, needs)
    return needs
