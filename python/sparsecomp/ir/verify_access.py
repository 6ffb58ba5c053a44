"""Verification of the stage II access ops: ``positions``, ``coordinates``, ``values``...

Each reads one buffer of a tensor whose type carries a single
``#sparse_iter.layout``; the result is a rank-1 tensor whose element type is
the layout's position width, coordinate width (``i64`` for width 0) or the
tensor's element type. ``with_values`` keeps the tensor's type;
``assemble`` takes exactly the buffers and dimension sizes of its result.
"""

from __future__ import annotations

from collections.abc import Iterator

from mlir import ir

from sparsecomp.errors import SparsecompError
from sparsecomp.formats.layout import Layout
from sparsecomp.ir.attrs import layout_of

ACCESS_OPS = (
    "sparse_iter.positions",
    "sparse_iter.coordinates",
    "sparse_iter.values",
    "sparse_iter.with_values",
    "sparse_iter.assemble",
    "sparse_iter.get_part",
)


def _layout_of(ty: ir.Type) -> Layout | None:
    try:
        layout = layout_of(ty)
    except SparsecompError:  # reported by the attribute checks
        return None
    return layout if isinstance(layout, Layout) else None


def _int_type(width: int) -> str:
    return f"i{width or 64}"


def _expect_rank1(op: ir.Operation, ty: ir.Type, element: str, what: str) -> Iterator[str]:
    want = f"tensor<?x{element}>"
    if not isinstance(ty, ir.RankedTensorType) or ty.rank != 1 or str(ty.element_type) != element:
        yield f"{op.name} {what} must be a rank-1 tensor of {element} (e.g. {want}), got {ty}"
    elif ir.RankedTensorType(ty).encoding is not None:
        yield f"{op.name} {what} must not carry an encoding, got {ty}"


def assemble_types(result: ir.RankedTensorType, layout: Layout) -> list[ir.Type]:
    """Operand types of ``sparse_iter.assemble``: positions, coordinates, values, sizes."""
    dyn = ir.ShapedType.get_dynamic_size()
    pos = ir.RankedTensorType.get([dyn], ir.IntegerType.get_signless(layout.pos_width or 64))
    crd = ir.RankedTensorType.get([dyn], ir.IntegerType.get_signless(layout.crd_width or 64))
    return [
        *(pos for lv in layout.levels if lv.has_positions),
        *(crd for lv in layout.levels if lv.has_coordinates),
        ir.RankedTensorType.get([dyn], result.element_type),
        *([ir.IndexType.get()] * result.rank),
    ]


def _check_assemble(op: ir.Operation) -> Iterator[str]:
    result = op.results[0].type
    layout = _layout_of(result)
    if layout is None:
        yield f"{op.name} result needs a single #sparse_iter.layout, got {result}"
        return
    with op.location:
        want = assemble_types(ir.RankedTensorType(result), layout)
    got = [v.type for v in op.operands]
    if got != want:
        yield (
            f"{op.name} of {result} takes the positions, then the coordinates of its levels, "
            f"its values and one index per dimension ({', '.join(str(t) for t in want)}), "
            f"got ({', '.join(str(t) for t in got)})"
        )


def _check_part(op: ir.Operation) -> Iterator[str]:
    from sparsecomp.formats.composable import Composable

    source = op.operands[0].type
    try:
        layout = layout_of(source)
    except SparsecompError:  # reported by the attribute checks
        return
    if not isinstance(layout, Composable):
        yield f"{op.name} needs a tensor with a #sparse_iter.composable layout, got {source}"
        return
    index = ir.IntegerAttr(op.attributes["index"]).value
    if not 0 <= index < len(layout.parts):
        yield f"{op.name} index {index} is out of range for {len(layout.parts)} parts"
        return
    want = layout.parts[index].layout
    result = op.results[0].type
    src = ir.RankedTensorType(source)
    same = (
        isinstance(result, ir.RankedTensorType)
        and _layout_of(result) == want
        and ir.RankedTensorType(result).shape == src.shape
        and ir.RankedTensorType(result).element_type == src.element_type
    )
    if not same:
        yield (
            f"{op.name} result must be the tensor's shape and element type in part {index}'s "
            f"layout {want}, got {result}"
        )


def check_access_op(op: ir.Operation) -> Iterator[str]:
    """Problems with one access op; assumes the dialect's ODS checks passed."""
    if op.name.endswith(".assemble"):
        yield from _check_assemble(op)
        return
    if op.name.endswith(".get_part"):
        yield from _check_part(op)
        return
    source = op.operands[0].type
    layout = _layout_of(source)
    if layout is None:
        yield f"{op.name} needs a tensor with a single #sparse_iter.layout, got {source}"
        return
    element = str(ir.RankedTensorType(source).element_type)
    if op.name.endswith(".values"):
        yield from _expect_rank1(op, op.results[0].type, element, "result")
        return
    if op.name.endswith(".with_values"):
        yield from _expect_rank1(op, op.operands[1].type, element, "values operand")
        if op.results[0].type != source:
            yield f"{op.name} result must have the type of its tensor operand {source}"
        return
    level = ir.IntegerAttr(op.attributes["level"]).value
    if not 0 <= level < layout.n_levels:
        yield f"{op.name} level {level} is out of range for a layout of {layout.n_levels} levels"
        return
    lvl = layout.levels[level]
    positions = op.name.endswith(".positions")
    if positions and not lvl.has_positions:
        yield f"level {level} ({lvl}) stores no positions"
        return
    if not positions and not lvl.has_coordinates:
        yield f"level {level} ({lvl}) stores no coordinates"
        return
    width = layout.pos_width if positions else layout.crd_width
    yield from _expect_rank1(op, op.results[0].type, _int_type(width), "result")
