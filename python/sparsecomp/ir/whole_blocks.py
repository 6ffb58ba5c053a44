"""What the upstream sparsifier cannot hold blocked: partial blocks and n:m levels.

Upstream stores a blocked dimension (BSR's ``i floordiv b``/``i mod b``, an
n:m group ``j floordiv m``/``j mod m``) as whole blocks: a tensor's
dimension size is its level size times the block, so a 3x3 BSR 2x2 matrix
is 4x4 to the sparsifier (``tensor.dim`` answers 4, its loops read dense
operands out of bounds).

Its n:m (``structured[n, m]``) levels are worse: it inserts into one like a
compressed level, without the group's padding (an n:m value it builds comes
back malformed), reads groups along any dimension but the last wrongly, and
computes wrong sums when an n:m operand is co-iterated with another sparse
operand (``a - b`` with ``b`` 2:4) or read in an order other than its own
(``a * b`` with ``b`` stored column-major). No kernel that reaches it can
be trusted with one.

:func:`unblocked_types` finds the blocked tensor types a set of functions
compiled by the fallback cannot keep blocked: every n:m type, and BSR types
with a blocked dimension that is dynamic, empty or not a multiple of its
block, except (:func:`kept_blocked`) a BSR type of dynamic shape whose storage
a function reads (``sparse_tensor.positions``, ``print``, ...: upstream
answers those, and CSR storage would not be what the program declared).
``sparse-iter-check-whole-blocks`` checks at run time that such a tensor's
shape divides into whole blocks where it is built.
``sparse-iter-mark-upstream`` gives the others their unblocked form
(:func:`sparsecomp.targets.resolve.unblocked`: BSR and n:m become CSR),
which upstream computes exactly for any shape; the runtime converts
arguments to it at the call and results back to the declared layout (so an
n:m result that does not fit n:m is reported, not returned malformed).

sparse_iter's own lowering has none of these limits (a partial last block
is bounded by the dimension size; n:m groups are read with their padding).
"""

from __future__ import annotations

from collections.abc import Iterable

from mlir import ir

from sparsecomp.errors import FormatError
from sparsecomp.formats.layout import Layout
from sparsecomp.ir.attrs import layout_of
from sparsecomp.ir.upstream import is_sparse_tensor_encoding, layout_from_sparse_tensor
from sparsecomp.ir.walk import preorder

#: Ops that read a sparse tensor's storage (their first operand's), which an
#: unblocked type changes.
STORAGE_QUERIES = frozenset(
    f"sparse_tensor.{n}"
    for n in "positions coordinates coordinates_buffer values lvl number_of_entries print "
    "disassemble".split()
)


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


def _partial(ty: ir.RankedTensorType, lay: Layout) -> bool:
    """Whether some blocked dimension of ``ty`` is dynamic, empty or not a multiple of its block.

    (An empty one has no blocks at all: upstream's kernels over a 0x8 BSR
    operand co-iterated with a COO one segfaulted; fuzz case 3:4822.)
    """
    return any(
        block > 1 and (ty.is_dynamic_dim(dim) or ty.shape[dim] % block or not ty.shape[dim])
        for dim, block in enumerate(lay.dim_to_lvl.block_sizes())
    )


def _must_unblock(ty: ir.Type) -> bool:
    lay = layout(ty)
    return lay is not None and (lay.is_structured or _partial(ir.RankedTensorType(ty), lay))


def block_sizes(ty: ir.Type) -> tuple[int, ...]:
    """Per dimension of a blocked type (either syntax), its block (1 where not blocked)."""
    lay = layout(ty)
    return lay.dim_to_lvl.block_sizes() if lay is not None else ()


def dynamic_blocks(ty: ir.Type) -> list[tuple[int, int]]:
    """``(dimension, block)`` for each blocked dimension of dynamic size of a
    BSR-like (not n:m) type whose static blocked dimensions are whole, nonzero
    blocks; [] for any other type. Such a type can be held blocked upstream if
    its run-time shape divides into blocks."""
    lay = layout(ty)
    if lay is None or lay.is_structured:
        return []
    rt = ir.RankedTensorType(ty)
    blocked = [(d, b) for d, b in enumerate(lay.dim_to_lvl.block_sizes()) if b > 1]
    if any(not rt.is_dynamic_dim(d) and (rt.shape[d] % b or not rt.shape[d]) for d, b in blocked):
        return []
    return [(d, b) for d, b in blocked if rt.is_dynamic_dim(d)]


def kept_blocked(funcs: Iterable[ir.Operation]) -> set[str]:
    """The dynamic-shape BSR types (text) whose storage one of ``funcs`` reads."""
    return {
        str(op.operands[0].type)
        for func in funcs
        for op in preorder(func)
        if op.name in STORAGE_QUERIES and len(op.operands) and dynamic_blocks(op.operands[0].type)
    }


def _types(func: ir.Operation) -> Iterable[ir.Type]:
    """The type of every value ``func`` defines or declares."""
    fty = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    yield from [*fty.inputs, *fty.results]  # declarations have no values
    for op in preorder(func):
        if op.name != "func.func":
            yield from (result.type for result in op.results)
            for region in op.regions:
                for block in region.blocks:
                    yield from (arg.type for arg in block.arguments)


def unblocked_types(funcs: Iterable[ir.Operation]) -> set[str]:
    """The text of each blocked tensor type ``funcs`` cannot keep blocked upstream.

    Types in :func:`kept_blocked` are not among them, unless a ``tensor.cast``
    joins one with such a type: it joins its two types (a static and a dynamic
    shape of one encoding), and both are unblocked or neither.
    """
    funcs = list(funcs)
    kept = kept_blocked(funcs)
    found: set[str] = set()
    casts: list[tuple[str, str]] = []
    for func in funcs:
        casts += [
            (str(op.operands[0].type), str(op.results[0].type))
            for op in preorder(func)
            if op.name == "tensor.cast"
        ]
        found |= {str(ty) for ty in _types(func) if _must_unblock(ty) and str(ty) not in kept}
    grew = True
    while grew:
        grew = False
        for a, b in casts:
            if (a in found) != (b in found):
                found |= {a, b}
                grew = True
    return found
