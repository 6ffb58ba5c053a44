"""Positions from row counts, a CSR tensor from its buffers, and the run-time check of
its narrow index buffers (stage II IR)."""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, tensor

from sparsecomp.formats.layout import Layout
from sparsecomp.formats.validate import index_max
from sparsecomp.ir import fatal
from sparsecomp.lowering.loops import State, add, for_state, index


def cast(value: ir.Value, ty: ir.Type) -> ir.Value:
    """``value`` (index or integer) as ``ty``, cast only if needed."""
    return value if value.type == ty else arith.index_cast(ty, value)


def prefix_positions(
    counts: ir.Value, rows: ir.Value, pos_t: ir.Type
) -> tuple[ir.Value, ir.Value, ir.Value]:
    """``(positions, total, starts)``: ``positions[r + 1] = sum(counts[:r + 1])``.

    ``counts`` is a rank-1 ``index`` tensor of ``rows`` entries; the
    positions are a new rank-1 tensor of ``pos_t`` (0 first); ``total`` is
    an index. ``starts`` holds the same sums as ``index`` values, for the
    kernel's own addressing: narrow positions may wrap (the runtime reports
    that after the call, :mod:`sparsecomp.runtime.overflow`), the kernel's
    writes must not. It is ``positions`` itself when ``pos_t`` has 64 bits.
    """
    wide = ir.IntegerType(pos_t).width >= 64 if isinstance(pos_t, ir.IntegerType) else True
    n = add(rows, index(1))
    state = {"pos": tensor.insert(cast(index(0), pos_t), tensor.empty([n], pos_t), [index(0)])}
    if not wide:
        idx_t = ir.IndexType.get()
        state["starts"] = tensor.insert(index(0), tensor.empty([n], idx_t), [index(0)])

    def step(r: ir.Value, s: State) -> State:
        total = add(s["total"], tensor.extract(counts, [r]))
        out = {**s, "total": total}
        out["pos"] = tensor.insert(cast(total, pos_t), s["pos"], [add(r, index(1))])
        if not wide:
            out["starts"] = tensor.insert(total, s["starts"], [add(r, index(1))])
        return out

    done = for_state(index(0), rows, {**state, "total": index(0)}, step)
    return done["pos"], done["total"], done.get("starts", done["pos"])


def assemble_csr(
    ty: ir.Type, pos: ir.Value, crd: ir.Value, vals: ir.Value, rows: ir.Value, cols: ir.Value
) -> ir.Value:
    """``sparse_iter.assemble`` of a CSR tensor of type ``ty``."""
    op = ir.Operation.create(
        "sparse_iter.assemble",
        results=[ty],
        operands=[pos, crd, vals, rows, cols],
        attributes={"operandSegmentSizes": ir.DenseI32ArrayAttr.get([1, 1, 1, 2])},
    )
    return op.results[0]


def check_widths(
    op: ir.Operation,
    target: Layout,
    total: ir.Value,
    inner: ir.Value,
    subject: str | None = None,
) -> None:
    """Exit at run time (with a message) where ``total`` entries or an inner dimension
    of ``inner`` do not fit the ``target`` layout's narrow positions or coordinates
    (:mod:`sparsecomp.ir.fatal`, as MLIR's own sparse runtime does: a wrapped position
    or coordinate would give a wrong result silently). Nothing where ``op``'s result
    is only returned by a public function: the runtime checks what reaches a Python
    caller (:mod:`sparsecomp.runtime.overflow`) and raises, where an exit would end
    the caller's process. ``subject`` names what is built (the conversion's, by
    default)."""
    if fatal.only_returned(op.results[0]):
        return
    place, module = fatal.where(op.location), _module(op)
    subject = subject or f"the conversion to {target}"
    # positions are read unsigned (loops.load_position), coordinates signed
    pos, crd = target.pos_width, target.crd_width
    checks = [
        (total, pos, (1 << pos) - 1, "{} entries", "positions", "posWidth"),
        (add(inner, index(-1)), crd, index_max(crd) if crd else 0, "coordinates up to {}",
         "coordinates", "crdWidth"),
    ]  # fmt: skip
    for value, width, limit, what, buffers, name in checks:
        if width in (0, 64):
            continue
        bad = arith.cmpi(arith.CmpIPredicate.sgt, value, index(limit))
        text = (
            f"{place}error: {subject} gives {what}, more than its "
            f"{width}-bit {buffers} hold (at most {limit}); declare a wider {name} (32 or 64)"
        )
        fatal.fail_if(bad, text, [value], module)


def _module(op: ir.Operation) -> ir.Operation:
    parent = op.parent
    while parent.name != "builtin.module":
        parent = parent.parent
    return parent.operation
