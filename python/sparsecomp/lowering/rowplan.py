"""The row-wise plan: kernels that build their output one row at a time in a workspace.

The nests of :mod:`.plan` follow one driving operand, so the output's
structure is the driver's. Two kinds of 2-D kernels need more, and are
lowered row by row instead (Gustavson's scheme, as in SparseTIR's and
TACO's workspaces):

* ``merge``: an elementwise op over several sparse operands with different
  structures (``A + B``, ``A * B``), all indexed ``(i, j)``. Each operand's
  row ``i`` is scattered into a dense row workspace; the output row holds
  the *union* of their columns, or the *intersection* when the body
  vanishes as soon as any one of them is zero (``A * B``).
* ``product``: ``C[i, j] = body(A[i, k], B[k, j], C[i, j])`` reducing over
  ``k`` (SpGEMM): for each stored ``A[i, k]`` the stored row ``k`` of ``B``
  is accumulated into the workspace. Exact when the body keeps the output
  unchanged wherever ``A`` or ``B`` is zero.

The output is dense, or sparse with a row layout (``dense_fixed`` then
``compressed_varied``) initialized by ``tensor.empty``: the kernel counts
each row's entries, sums the counts into positions, fills coordinates and
values, sorts each row's coordinates and returns them with
``sparse_iter.assemble``; a ``compressed_varied(nonordered)`` column level
skips the sort (as scipy's SpGEMM does). Sparse operands must store rows: a ``dense_fixed``
first level over the row's loop dimension and a second level (compressed,
loose, ELL or n:m) over its column.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mlir import ir

from sparsecomp.ir.linalg_ops import iterator_types
from sparsecomp.lowering.plan import Access, Unsupported, accesses
from sparsecomp.lowering.zeros import Zero, classify

_ROW_FORMATS = ("compressed_varied", "loose_compressed", "compressed_fixed", "structured")


@dataclass(frozen=True)
class RowOperand:
    """A sparse input read row by row: its row and column loop dimensions."""

    number: int
    row: int
    col: int


@dataclass(frozen=True)
class RowPlan:
    op: ir.Operation
    kind: Literal["merge", "product"]
    inputs: tuple[Access, ...]
    output: Access
    sparse: tuple[RowOperand, ...]
    row: int  # loop dimension of the output's rows
    col: int  # ... and columns
    intersect: bool  # merge: keep the columns every operand stores
    zero: Zero  # the body when every sparse operand is zero

    @property
    def sparse_output(self) -> bool:
        return self.output.layout is not None


def _row_operand(acc: Access) -> RowOperand:
    layout = acc.layout
    assert layout is not None
    levels = [lv.name for lv in layout.levels]
    exprs = layout.dim_to_lvl.results
    if (
        len(levels) != 2
        or levels[0] != "dense_fixed"
        or levels[1] not in _ROW_FORMATS
        or any(e.op != "id" for e in exprs)
        or None in acc.dims
    ):
        raise Unsupported(
            f"row-wise kernels read sparse operands row by row; {layout} does not store "
            "rows (a dense_fixed level, then a compressed, loose, ELL or n:m level)"
        )
    row, col = (acc.dims[e.dim] for e in exprs)
    assert row is not None
    assert col is not None
    return RowOperand(acc.number, row, col)


def _check_output(out: Access) -> tuple[int, int]:
    if len(out.dims) != 2 or None in out.dims:
        raise Unsupported("row-wise kernels write a 2-D output indexed by plain loop dimensions")
    if out.layout is not None:
        names = [lv.name for lv in out.layout.levels]
        exprs = out.layout.dim_to_lvl.results
        identity = [e.op == "id" and e.dim == k for k, e in enumerate(exprs)]
        unique = out.layout.levels[-1].is_unique
        if names != ["dense_fixed", "compressed_varied"] or not all(identity) or not unique:
            raise Unsupported(
                f"a computed sparse output must be stored by rows (CSR), not {out.layout}"
            )
        init = out.value.owner
        if isinstance(init, ir.Block) or init.name != "tensor.empty":
            raise Unsupported("a computed sparse output's init must be tensor.empty")
    row, col = out.dims
    assert row is not None
    assert col is not None
    return row, col


def make_row_plan(op: ir.Operation) -> RowPlan:
    """Analyse ``op`` for the row-wise lowering (raises :class:`Unsupported`)."""
    ins, outs = accesses(op)
    if len(outs) != 1:
        raise Unsupported(f"ops with {len(outs)} outputs are not supported (one output)")
    out = outs[0]
    row, col = _check_output(out)
    iterators = iterator_types(op)
    if iterators[row] != "parallel" or iterators[col] != "parallel":
        raise Unsupported("the output's rows and columns must be parallel loop dimensions")
    sparse = tuple(_row_operand(a) for a in ins if a.layout is not None)
    block = op.regions[0].blocks[0]
    numbers = [s.number for s in sparse]
    zero = classify(block, numbers, len(ins))
    if zero == Zero.OTHER:
        raise Unsupported(
            "the body does not vanish where the sparse operands are zero; the output is dense"
        )
    if len(iterators) == 2:
        if any((s.row, s.col) != (row, col) for s in sparse):
            raise Unsupported(
                "an elementwise kernel over differently structured operands reads each one "
                "row by row, in the output's (i, j) order (convert column-major operands to CSR)"
            )
        alone = [classify(block, [n], len(ins)) for n in numbers]
        intersect = len(sparse) > 1 and all(z == zero for z in alone)
        return RowPlan(op, "merge", tuple(ins), out, sparse, row, col, intersect, zero)
    return _product(op, ins, out, sparse, row, col, iterators)


def _product(
    op: ir.Operation,
    ins: list[Access],
    out: Access,
    sparse: tuple[RowOperand, ...],
    row: int,
    col: int,
    iterators: list[str],
) -> RowPlan:
    reductions = [d for d, t in enumerate(iterators) if d not in (row, col)]
    if len(reductions) != 1 or iterators[reductions[0]] != "reduction" or len(sparse) != 2:
        raise Unsupported(
            "a row-wise product reduces over one dimension k of two sparse operands "
            "A[i, k] and B[k, j]"
        )
    k = reductions[0]
    by_shape = {(s.row, s.col): s for s in sparse}
    a, b = by_shape.get((row, k)), by_shape.get((k, col))
    if a is None or b is None:
        raise Unsupported(
            "a row-wise product needs A[i, k] and B[k, j] stored by rows "
            "(a column-major operand must be converted to CSR first)"
        )
    block = op.regions[0].blocks[0]
    for s in (a, b):
        if classify(block, [s.number], len(ins)) != Zero.OUT:
            raise Unsupported(
                "a row-wise product's body must keep the output where either factor is zero "
                "(out + A * B)"
            )
    return RowPlan(op, "product", tuple(ins), out, (a, b), row, col, False, Zero.OUT)
