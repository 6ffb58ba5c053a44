"""Layout conversions: ``set_encoding`` between layouts, ``unset_encoding`` (stage II IR).

``specialize-encodings`` inserts ``sparse_iter.set_encoding`` where a value
is used in two layouts (a CSR matrix that a transposed product reads as
CSC). Such a conversion is lowered here, as a walk over the source's stored
entries (any single layout, one loop per level as in :mod:`.levels`):

* to a dense tensor (``unset_encoding``): zeros, then each entry stored at
  its coordinates (added, for sources with duplicate coordinates);
* from a dense 2-D tensor (``set_encoding`` of a plain tensor): its nonzeros,
  walked in the target's order, to the layouts below;
* to a 2-D ``[dense_fixed, compressed_varied]`` layout, with either map
  (CSR, CSC): a counting sort by the target's outer dimension. One walk
  counts each target row's entries, a prefix sum gives the positions, a
  second walk stores coordinates and values at each row's cursor.
  ``sparse_iter.assemble`` returns the buffers.

The walks run in the source's storage order, so each target row receives
its entries in increasing inner coordinate whenever the source's levels of
that dimension are ordered (true of CSR <-> CSC, BSR, ELL, n:m and COO
sources); otherwise the conversion is refused unless the target's inner
level is ``nonordered``. Sources that may repeat coordinates (a nonunique
last level) are refused for sparse targets (duplicates would need summing). Padding is
skipped: ELL slots with coordinate -1, and entries of block (``mod``) and
n:m levels that lie outside the tensor or hold zero.

The walks are sequential: a conversion costs about one pass over the
entries plus the random writes of the scatter.

A target with narrow index buffers (``posWidth``/``crdWidth`` below 64) is
checked at run time before its buffers are filled: if the entries counted
are more than its positions address, or the inner dimension is longer than
its coordinates address, the program reports the count and the conversion's
location and exits with status 1 (:mod:`sparsecomp.ir.fatal`, as MLIR's own
sparse runtime does). A wrapped position would otherwise give a wrong result
silently. A result that a public function only returns is not checked here:
the runtime checks what reaches a Python caller (:mod:`sparsecomp.runtime.overflow`),
and raises where an exit would end the caller's process.
"""

from __future__ import annotations

from collections.abc import Callable

from mlir import ir
from mlir.dialects import arith, tensor

from sparsecomp.formats.layout import Layout
from sparsecomp.ir.attrs import encoding_of, layout_of
from sparsecomp.ir.linalg_ops import linalg_fill
from sparsecomp.lowering.assemble import assemble_csr, cast, check_widths, prefix_positions
from sparsecomp.lowering.levels import emit_level
from sparsecomp.lowering.loops import Carried, add, for_loop, if_then, index, load_index
from sparsecomp.lowering.operands import zero_of
from sparsecomp.lowering.plan import Unsupported
from sparsecomp.lowering.reader import Reader, int_type

CONVERSIONS = ("sparse_iter.set_encoding", "sparse_iter.unset_encoding")

#: ``visit(coordinates by dimension, value, carried) -> carried``.
Visit = Callable[[dict[int, ir.Value], ir.Value, Carried], Carried]


def _source_layout(op: ir.Operation) -> Layout | None:
    """The source's layout; None for a dense source."""
    ty = op.operands[0].type
    if encoding_of(ty) is None:
        return None
    layout = layout_of(ty)
    if layout is None:
        raise Unsupported(f"the source's encoding {encoding_of(ty)} is not a layout")
    if not isinstance(layout, Layout):
        raise Unsupported("converting a composable tensor is not supported; convert its parts")
    return layout


def _padded(layout: Layout) -> bool:
    """Whether some stored entries are padding: block edges and n:m slots."""
    return any(e.op == "mod" for e in layout.dim_to_lvl.results) or any(
        lv.kind == "structured" for lv in layout.levels
    )


def _ordered_along(layout: Layout, dim: int) -> bool:
    """Whether the walk meets ``dim``'s coordinates in increasing order, the others fixed."""
    return all(
        not layout.levels[lv].nonordered
        for lv, e in enumerate(layout.dim_to_lvl.results)
        if e.dim == dim
    )


def target_dims(ty: ir.Type) -> tuple[Layout, int, int]:
    """``(layout, outer dim, inner dim)`` of a CSR-like conversion target, or Unsupported."""
    layout = layout_of(ty)
    if not isinstance(layout, Layout) or ir.RankedTensorType(ty).rank != 2:
        raise Unsupported(f"conversions produce 2-D CSR or CSC layouts or dense tensors, not {ty}")
    results = layout.dim_to_lvl.results
    names = [lv.name for lv in layout.levels]
    if names != ["dense_fixed", "compressed_varied"] or any(e.op != "id" for e in results):
        raise Unsupported(
            "conversions produce [dense, compressed] layouts (CSR, CSC) "
            f"or dense tensors, not {layout}"
        )
    if not layout.levels[1].is_unique:
        raise Unsupported("a conversion cannot produce a nonunique level")
    return layout, results[0].dim, results[1].dim


def check_conversion(op: ir.Operation) -> None:
    """Raise :class:`~.plan.Unsupported` if :func:`lower_conversion` refuses ``op``."""
    source = _source_layout(op)
    result = op.results[0].type
    if encoding_of(result) is None:
        return
    target, _, inner = target_dims(result)
    if source is None:  # dense: walked in the target's order
        return
    if not source.levels[-1].is_unique:
        raise Unsupported(
            "converting a source that may repeat coordinates (its last level is nonunique) "
            "to a sparse layout is not supported"
        )
    if not target.levels[1].nonordered and not _ordered_along(source, inner):
        raise Unsupported(
            f"the source {source} does not give each row of the target its coordinates in "
            "order (give the target's inner level 'nonordered')"
        )


def _walk(reader: Reader, carried: Carried, visit: Visit) -> Carried:
    """Run ``visit`` on every stored entry of ``reader``'s tensor (padding skipped)."""
    layout = reader.layout
    results = layout.dim_to_lvl.results
    padded = _padded(layout)

    def level(lv: int, p: ir.Value, vals: Carried, idx: dict[int, ir.Value]) -> Carried:
        if lv == len(layout.levels):
            return _entry(p, vals, idx)

        def inner(q: ir.Value, coord: ir.Value, inner_vals: Carried) -> Carried:
            e = results[lv]
            here = dict(idx)
            if e.op == "floordiv":
                here[-1 - e.dim] = coord  # the block coordinate, until its mod level
            elif e.op == "mod":
                here[e.dim] = add(arith.muli(idx[-1 - e.dim], index(e.const)), coord)
            else:
                here[e.dim] = coord
            return level(lv + 1, q, inner_vals, here)

        return emit_level(reader, lv, p, vals, inner, parallel=False)

    def _entry(q: ir.Value, vals: Carried, idx: dict[int, ir.Value]) -> Carried:
        coords = {d: idx[d] for d in range(layout.rank)}
        value = tensor.extract(reader.values, [q])
        if not padded:
            return visit(coords, value, vals)
        keep = _nonzero(value)
        for e in results:
            if e.op == "mod":
                inside = arith.cmpi(arith.CmpIPredicate.ult, coords[e.dim], reader.dim_sizes[e.dim])
                keep = arith.andi(keep, inside)
        return if_then(keep, vals, lambda v: visit(coords, value, v))

    return level(0, index(0), carried, {})


def _nonzero(value: ir.Value) -> ir.Value:
    zero = zero_of(value.type)
    if isinstance(value.type, ir.FloatType):
        return arith.cmpf(arith.CmpFPredicate.UNE, value, zero)
    return arith.cmpi(arith.CmpIPredicate.ne, value, zero)


def _walk_dense(
    source: ir.Value, order: tuple[int, int], carried: Carried, visit: Visit
) -> Carried:
    """Run ``visit`` on every nonzero of a dense 2-D tensor, dimension ``order[0]`` outermost."""
    sizes = [tensor.dim(source, index(d)) for d in range(2)]

    def outer(a: ir.Value, vals: Carried) -> Carried:
        def inner(b: ir.Value, inner_vals: Carried) -> Carried:
            coords = {order[0]: a, order[1]: b}
            value = tensor.extract(source, [coords[0], coords[1]])
            return if_then(_nonzero(value), inner_vals, lambda v: visit(coords, value, v))

        return for_loop(index(0), sizes[order[1]], index(1), vals, inner)

    return for_loop(index(0), sizes[order[0]], index(1), carried, outer)


def _to_dense(reader: Reader, ty: ir.RankedTensorType) -> ir.Value:
    """Zeros, then every stored entry of ``reader``'s tensor at its coordinates."""
    elt = ty.element_type
    empty = tensor.empty(reader.dim_sizes, elt)
    out = linalg_fill(zero_of(elt), outs=[empty])
    duplicates = not reader.layout.levels[-1].is_unique  # the same coordinates again

    def visit(coords: dict[int, ir.Value], value: ir.Value, vals: Carried) -> Carried:
        at = [coords[d] for d in range(ty.rank)]
        if duplicates:
            old = tensor.extract(vals[0], at)
            value = (
                arith.addf(old, value) if isinstance(elt, ir.FloatType) else arith.addi(old, value)
            )
        return [tensor.insert(value, vals[0], at)]

    return _walk(reader, [out], visit)[0]


def _to_csr(
    op: ir.Operation, source: ir.Value, layout: Layout | None, ty: ir.RankedTensorType
) -> ir.Value:
    """A counting sort of the source's entries by the target's outer dimension."""
    target, outer, inner = target_dims(ty)
    if layout is None:
        dims = [tensor.dim(source, index(d)) for d in range(2)]
        element = ty.element_type

        def walk(carried: Carried, visit: Visit) -> Carried:
            return _walk_dense(source, (outer, inner), carried, visit)
    else:
        reader = Reader(source, layout)
        dims, element = reader.dim_sizes, reader.element

        def walk(carried: Carried, visit: Visit) -> Carried:
            return _walk(reader, carried, visit)

    rows = dims[outer]
    counts = linalg_fill(index(0), outs=[tensor.empty([rows], ir.IndexType.get())])

    def count(coords: dict[int, ir.Value], value: ir.Value, vals: Carried) -> Carried:
        r = coords[outer]
        return [tensor.insert(add(tensor.extract(vals[0], [r]), index(1)), vals[0], [r])]

    (counts,) = walk([counts], count)
    pos_t, crd_t = int_type(target.pos_width), int_type(target.crd_width)
    pos, total, starts = prefix_positions(counts, rows, pos_t)
    check_widths(op, target, total, dims[inner])
    # Each row's cursor starts at its position (counts is reused: it is dead now).
    (cursor,) = for_loop(
        index(0), rows, index(1), [counts],
        lambda r, v: [tensor.insert(load_index(starts, r), v[0], [r])],
    )  # fmt: skip
    crd = tensor.empty([total], crd_t)
    values = tensor.empty([total], element)

    def fill(coords: dict[int, ir.Value], value: ir.Value, vals: Carried) -> Carried:
        cur, crd_v, val_v = vals
        r = coords[outer]
        slot = tensor.extract(cur, [r])
        crd_v = tensor.insert(cast(coords[inner], crd_t), crd_v, [slot])
        val_v = tensor.insert(value, val_v, [slot])
        return [tensor.insert(add(slot, index(1)), cur, [r]), crd_v, val_v]

    _, crd, values = walk([cursor, crd, values], fill)
    return assemble_csr(ty, pos, crd, values, dims[0], dims[1])


def lower_conversion(op: ir.Operation) -> ir.Value:
    """The converted tensor, built at the insertion point (see the module docstring)."""
    check_conversion(op)
    source, layout = op.operands[0], _source_layout(op)
    ty = ir.RankedTensorType(op.results[0].type)
    if encoding_of(ty) is None:
        assert layout is not None  # verified: unset_encoding has an encoded source
        return _to_dense(Reader(source, layout), ty)
    return _to_csr(op, source, layout, ty)
