"""What the upstream sparsifier cannot hold blocked: partial blocks and built n:m values.

Upstream stores a blocked dimension (BSR's ``i floordiv b``/``i mod b``, an
n:m group ``j floordiv m``/``j mod m``) as whole blocks: a tensor's
dimension size is its level size times the block, so a 3x3 BSR 2x2 matrix
is 4x4 to the sparsifier (``tensor.dim`` answers 4, its loops read dense
operands out of bounds), and it inserts into an n:m level like a
compressed one, without the group's padding, so an n:m value it builds
comes back malformed.

:func:`unblocked_types` finds the blocked tensor types a set of functions
compiled by the fallback cannot keep blocked: those with a blocked
dimension that is dynamic or not a multiple of its block, n:m types whose
groups run along another dimension than the last, and n:m types of values
the functions build (other than the padded conversions of
``sparse-iter-pad-nm-converts``). ``sparse-iter-mark-upstream`` gives those
their unblocked form (:func:`sparsecomp.targets.resolve.unblocked`: BSR
and n:m become CSR), which upstream computes exactly for any shape; the
runtime converts arguments to it at the call and results back to the
declared layout.

sparse_iter's own lowering has none of these limits (a partial last block
is bounded by the dimension size).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from mlir import ir

from sparsecomp.errors import FormatError
from sparsecomp.formats.dimmap import LevelExpr
from sparsecomp.formats.layout import Layout
from sparsecomp.ir.attrs import layout_of
from sparsecomp.ir.upstream import is_sparse_tensor_encoding, layout_from_sparse_tensor
from sparsecomp.ir.walk import preorder

#: Ops whose results take the dimension sizes and storage of an operand.
_SAME_SIZES = ("sparse_tensor.convert", "sparse_iter.set_encoding")
#: Ops that pass an n:m value on, or fill one a linalg op's init made, without building it.
_PASS_NM = ("linalg.", "func.call", "sparse_tensor.assemble", "sparse_iter.get_part")


def layout(ty: ir.Type) -> Layout | None:
    """The single layout of a sparse tensor type (either syntax), else None."""
    if not isinstance(ty, ir.RankedTensorType):
        return None
    try:
        if is_sparse_tensor_encoding(ty.encoding):
            return layout_from_sparse_tensor(ty.encoding)
        found = layout_of(ty)
    except FormatError:
        return None
    return found if isinstance(found, Layout) else None


def _plain_nm(lay: Layout) -> bool:
    """n:m over the last dimension with the others in order, the one form upstream reads right.

    (Groups along another dimension, ``(i, j) -> (j, i floordiv 4, i mod 4)``,
    come back wrong from its kernels and conversions.)
    """
    rank = lay.dim_to_lvl.n_dims
    return lay.dim_to_lvl.results == (
        *(LevelExpr(d) for d in range(rank - 1)),
        *(LevelExpr(rank - 1, op, lay.levels[-1].m) for op in ("floordiv", "mod")),
    )


def _partial(ty: ir.RankedTensorType, lay: Layout) -> bool:
    """Whether some blocked dimension of ``ty`` is dynamic or not a multiple of its block."""
    return any(
        block > 1 and (ty.is_dynamic_dim(dim) or ty.shape[dim] % block)
        for dim, block in enumerate(lay.dim_to_lvl.block_sizes())
    )


def _padded(op: ir.Operation, lay: Layout) -> bool:
    """A conversion to n:m that ``sparse-iter-pad-nm-converts`` builds with padded groups."""
    if op.name not in _SAME_SIZES or not op.operands:
        return False
    src, dst = layout(op.operands[0].type), ir.RankedTensorType(op.results[0].type)
    return (
        (src is None or not src.is_structured)
        and dst.has_static_shape
        and isinstance(dst.element_type, ir.FloatType | ir.IntegerType)
        and all(lv.name == "dense_fixed" for lv in lay.levels[:-1])
    )


def _values(func: ir.Operation) -> Iterator[tuple[ir.Value, ir.Operation | None]]:
    """Every value the function defines, with its defining op (None: an argument)."""
    if not func.regions[0].blocks:  # a declaration
        return
    for arg in func.regions[0].blocks[0].arguments:
        yield arg, None
    for op in preorder(func):
        if op.name != "func.func":
            for result in op.results:
                yield result, op


def _must_unblock(ty: ir.Type, op: ir.Operation | None) -> bool:
    lay = layout(ty)
    if lay is None:
        return False
    if _partial(ir.RankedTensorType(ty), lay) or (lay.is_structured and not _plain_nm(lay)):
        return True
    builds = op is not None and not op.name.startswith(_PASS_NM) and not _padded(op, lay)
    return lay.is_structured and builds


def unblocked_types(funcs: Iterable[ir.Operation]) -> set[str]:
    """The text of each blocked tensor type ``funcs`` cannot keep blocked upstream.

    A ``tensor.cast`` joins its two types (a static and a dynamic shape of
    one encoding): both are unblocked or neither.
    """
    found: set[str] = set()
    casts: list[tuple[str, str]] = []
    for func in funcs:
        casts += [
            (str(op.operands[0].type), str(op.results[0].type))
            for op in preorder(func)
            if op.name == "tensor.cast"
        ]
        fty = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        for ty in [*fty.inputs, *fty.results]:  # declarations have no values
            if _must_unblock(ty, None):
                found.add(str(ty))
        for value, op in _values(func):
            if _must_unblock(value.type, op):
                found.add(str(value.type))
    grew = True
    while grew:
        grew = False
        for a, b in casts:
            if (a in found) != (b in found):
                found |= {a, b}
                grew = True
    return found
