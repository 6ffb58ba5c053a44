"""Stage I -> II lowering: ``linalg.generic`` over encoded tensors to loops in position space.

:mod:`.plan` analyses one op (which operand drives the iteration, the loop
order, where the output is read and written, what the body does with zeros),
:mod:`.zeros` classifies the body, :mod:`.levels` emits one loop per storage
level, :mod:`.body` re-emits the op's body (scalar or vector), and
:mod:`.nest` builds the whole loop nest (jamming the rows of BSR blocks
into registers, :mod:`.jam`). Kernels whose output gets a new
structure, or that co-iterate differently structured operands, are planned
row by row instead (:mod:`.rowplan`, emitted by :mod:`.rowemit`).
``sparse-iter-lower-iterations`` is the pass that drives them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mlir import ir

    from sparsecomp.lowering.plan import Plan
    from sparsecomp.lowering.rowplan import RowPlan


def check_lowerable(op: ir.Operation, vectorize: bool, tensor_cores: bool = False) -> None:
    """Raise :class:`~sparsecomp.lowering.plan.Unsupported` if the lowering refuses ``op``.

    A dry run that changes no IR: an op over a composable operand must
    accumulate into its output (it is split per part, see :mod:`.parts`);
    any other op must have a plan (:func:`choose_plan`). ``tensor_cores``: the
    op's function is a GPU one, whose 2:4 products with ``mma.sp`` metadata the
    tensor-core kernels may take before the lowering sees them.
    """
    from sparsecomp.lowering.parts import check_split, composable_input

    number = composable_input(op)
    if number is not None:
        check_split(op, number)
    elif not tensor_cores or not _mma_metadata(op):
        choose_plan(op, vectorize)


def choose_plan(op: ir.Operation, vectorize: bool) -> Plan | RowPlan:
    """The plan of a ``linalg.generic`` over sparse operands: a nest, else row-wise.

    Raises :class:`~sparsecomp.lowering.plan.Unsupported` (the nest's reason,
    and the row-wise one where it differs) when neither lowering applies;
    callers route such ops to the upstream sparsifier or report it.
    """
    from sparsecomp.lowering.analyze import make_plan
    from sparsecomp.lowering.plan import Unsupported
    from sparsecomp.lowering.rowplan import make_row_plan

    if metadata := _mma_metadata(op):
        raise Unsupported(
            f"an operand's layout stores {metadata} metadata words, which only the 2:4 "
            "tensor-core kernel reads (mma.sp: f16 inputs, m16n8k16, a cuda or cuda-emu "
            "target of sm_80 or later); elsewhere declare the n:m layout without nmMetadata"
        )
    try:
        return make_plan(op, vectorize)
    except Unsupported as nest:
        try:
            return make_row_plan(op)
        except Unsupported as rows:
            if str(rows) == str(nest):
                raise
            raise Unsupported(f"{nest}; row by row: {rows}") from None


def _mma_metadata(op: ir.Operation) -> str:
    """The ``mma.sp`` metadata an operand's 2:4 layout stores (``""``: none): words only
    the 2:4 tensor-core kernel reads, not a coordinate per entry (a loop over them as
    coordinates read past their end, a segfault)."""
    from sparsecomp.ir.attrs import layout_of

    for operand in op.operands:
        metadata = getattr(layout_of(operand.type), "nm_metadata", "")
        if metadata.startswith("mma_sp"):
            return str(metadata)
    return ""
