"""Lower ``sparse_iter.sparsify`` with a streaming sparsifier to a CSR result (stage II IR).

The streaming kinds decide each element on its own: ``keep_all`` keeps
``x != 0`` (NaN included), ``threshold [t]`` keeps ``|x| >= t`` compared in
f64 (NaN never). The result is built like every computed CSR output: a
parallel pass counts each row's kept elements, a prefix sum gives the
positions, and a parallel pass writes coordinates and values in column order;
``sparse_iter.assemble`` returns them.

*Fusion*: when the source is the only result of an elementwise
``linalg.generic`` (all loops parallel, dense inputs, identity output map,
the body not reading its output) that nothing else uses, its body is
evaluated inside both passes and the dense source is never built. Other
sources are read as they are. The other sparsifier kinds need the whole
tensor (ranking, blocks, groups): apply them with :func:`sparsecomp.sparsify`
on the host.
"""

from __future__ import annotations

from collections.abc import Callable

from mlir import ir
from mlir.dialects import arith, math, tensor

from sparsecomp.formats.layout import Layout
from sparsecomp.formats.sparsifiers import Sparsifier
from sparsecomp.ir.attrs import encoding_of, layout_of
from sparsecomp.ir.linalg_ops import iterator_types
from sparsecomp.lowering import body as bodies
from sparsecomp.lowering.assemble import assemble_csr, cast, prefix_positions
from sparsecomp.lowering.loops import State, add, for_state, if_state, index, to_index
from sparsecomp.lowering.operands import OperandAccess, zero_of
from sparsecomp.lowering.plan import Unsupported, accesses
from sparsecomp.lowering.reader import int_type

STREAMING = ("keep_all", "threshold")

Element = Callable[[ir.Value, ir.Value], ir.Value]


def _csr(ty: ir.Type) -> Layout:
    layout = layout_of(ty)
    if not isinstance(layout, Layout) or ir.RankedTensorType(ty).rank != 2:
        raise Unsupported(f"sparsify lowers to a 2-D CSR result, not {ty}")
    names = [lv.name for lv in layout.levels]
    identity = all(e.op == "id" and e.dim == k for k, e in enumerate(layout.dim_to_lvl.results))
    if names != ["dense_fixed", "compressed_varied"] or not identity:
        raise Unsupported(f"sparsify lowers to a CSR result (dense, compressed), not {layout}")
    if not layout.levels[1].is_unique:
        raise Unsupported("sparsify cannot produce a nonunique level")
    return layout


def _producer(source: ir.Value) -> ir.Operation | None:
    """The elementwise ``linalg.generic`` to fuse, if ``source`` is its only result and use."""
    op = source.owner
    if isinstance(op, ir.Block) or op.name != "linalg.generic" or len(op.results) != 1:
        return None
    if len(list(source.uses)) != 1:
        return None
    ins, outs = accesses(op)
    iterators = iterator_types(op)
    block = op.regions[0].blocks[0]
    if (
        any(t != "parallel" for t in iterators)
        or len(outs) != 1
        or outs[0].dims != (0, 1)
        or any(a.layout is not None or encoding_of(a.value.type) is not None for a in ins)
        or list(block.arguments[len(ins)].uses)
    ):
        return None
    return op


class _Fused(OperandAccess):
    """Evaluates a producer's body at one element."""

    def __init__(self, op: ir.Operation) -> None:
        ins, outs = accesses(op)
        self.op, self.inputs, self.output = op, ins, outs[0]
        self.plan = self  # OperandAccess reads plan.op / plan.output
        self.block = op.regions[0].blocks[0]
        self.vec = None
        self.idx: dict[int, ir.Value] = {}

    def __call__(self, i: ir.Value, j: ir.Value) -> ir.Value:
        self.idx = {0: i, 1: j}
        args = [self.scalar(a) for a in self.inputs]
        elt = ir.RankedTensorType(self.output.value.type).element_type
        return bodies.emit_scalar(self.block, [*args, zero_of(elt)], self.idx)


def _keep(sparsifier: Sparsifier, x: ir.Value) -> ir.Value:
    ty = x.type
    is_float = isinstance(ty, ir.FloatType)
    if sparsifier.kind == "keep_all":
        if is_float:
            return arith.cmpf(arith.CmpFPredicate.UNE, x, zero_of(ty))
        return arith.cmpi(arith.CmpIPredicate.ne, x, zero_of(ty))
    f64 = ir.F64Type.get()
    mag = math.absf(x) if is_float else math.absi(x)
    if is_float:
        wide = mag if ty == f64 else arith.extf(f64, mag)
    else:
        wide = arith.sitofp(f64, mag)  # |INT_MIN| wraps: compared as negative, never kept
    t = arith.constant(f64, sparsifier.params[0])
    return arith.cmpf(arith.CmpFPredicate.OGE, wide, t)


def lower_sparsify(op: ir.Operation) -> ir.Value:
    """The CSR result of ``op``, emitted before it; the fused producer (if any) is left unused."""
    sparsifier = Sparsifier.parse(str(op.attributes["sparsifier"]))
    if sparsifier.kind not in STREAMING:
        raise Unsupported(
            f"the '{sparsifier.kind}' sparsifier needs the whole tensor; only "
            f"{' and '.join(STREAMING)} are fused into a kernel "
            "(use sparsecomp.sparsify on the host)"
        )
    ty = op.results[0].type
    layout = _csr(ty)
    source = op.operands[0]
    if encoding_of(source.type) is not None:
        raise Unsupported(
            "sparsify of an encoded tensor is not supported; sparsify the dense value"
        )
    producer = _producer(source)
    shape_of = producer.operands[len(producer.operands) - 1] if producer else source
    rows, cols = (tensor.dim(shape_of, index(k)) for k in (0, 1))
    element: Element = (
        _Fused(producer) if producer else (lambda i, j: tensor.extract(source, [i, j]))
    )

    def count(r: ir.Value, s: State) -> State:
        def column(j: ir.Value, c: State) -> State:
            kept = arith.select(_keep(sparsifier, element(r, j)), index(1), index(0))
            return {"n": add(c["n"], kept)}

        n = for_state(index(0), cols, {"n": index(0)}, column)["n"]
        return {"counts": tensor.insert(n, s["counts"], [r])}

    counts = tensor.empty([rows], ir.IndexType.get())
    counts = for_state(index(0), rows, {"counts": counts}, count, parallel=True)["counts"]
    positions, total, starts = prefix_positions(counts, rows, int_type(layout.pos_width))
    crd_t = int_type(layout.crd_width)
    elt = ir.RankedTensorType(ty).element_type

    def fill(r: ir.Value, s: State) -> State:
        start = to_index(tensor.extract(starts, [r]))

        def column(j: ir.Value, c: State) -> State:
            x = element(r, j)

            def write(w: State) -> State:
                p = w["p"]
                return {
                    "crd": tensor.insert(cast(j, crd_t), w["crd"], [p]),
                    "vals": tensor.insert(x, w["vals"], [p]),
                    "p": add(p, index(1)),
                }

            return if_state(_keep(sparsifier, x), c, write)

        done = for_state(index(0), cols, {**s, "p": start}, column)
        return {"crd": done["crd"], "vals": done["vals"]}

    empty = {"crd": tensor.empty([total], crd_t), "vals": tensor.empty([total], elt)}
    filled = for_state(index(0), rows, empty, fill, parallel=True)
    return assemble_csr(ty, positions, filled["crd"], filled["vals"], rows, cols)


def fused_producer(op: ir.Operation) -> ir.Operation | None:
    """The producer :func:`lower_sparsify` fuses into ``op`` (to erase afterwards)."""
    return _producer(op.operands[0])
