"""Pass ``sparse-iter-pad-nm-converts``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import arith, scf, tensor
from mlir.dialects import sparse_tensor as st
from mlir.passmanager import ExternalPass

from sparsecomp.errors import FormatError
from sparsecomp.formats.layout import Layout
from sparsecomp.ir.upstream import is_sparse_tensor_encoding, layout_from_sparse_tensor
from sparsecomp.ir.walk import preorder
from sparsecomp.lowering.loops import State, for_state, if_state, index
from sparsecomp.transforms.base import SparsecompPass


def _layout(ty: ir.Type) -> Layout | None:
    if not isinstance(ty, ir.RankedTensorType) or not is_sparse_tensor_encoding(ty.encoding):
        return None
    try:
        return layout_from_sparse_tensor(ty.encoding)
    except FormatError:
        return None


def _is_nm(layout: Layout | None) -> bool:
    return layout is not None and any(lv.kind == "structured" for lv in layout.levels)


def rewritable(op: ir.Operation) -> bool:
    """Whether ``op`` is a ``sparse_tensor.convert`` this pass replaces (see the pass doc)."""
    if op.name != "sparse_tensor.convert":
        return False
    dst, src = ir.RankedTensorType(op.results[0].type), op.operands[0].type
    layout = _layout(dst)
    if not _is_nm(layout) or _is_nm(_layout(src)) or not dst.has_static_shape:
        return False
    assert layout is not None
    elem = dst.element_type
    return (
        isinstance(elem, ir.FloatType | ir.IntegerType)
        and layout.levels[-1].kind == "structured"
        and all(lv.name == "dense_fixed" for lv in layout.levels[:-1])
    )


def _is_nonzero(v: ir.Value) -> ir.Value:
    ty = v.type
    if isinstance(ty, ir.FloatType):
        zero = arith.constant(ty, ir.FloatAttr.get(ty, 0.0))
        return arith.cmpf(arith.CmpFPredicate.UNE, v, zero)
    return arith.cmpi(arith.CmpIPredicate.ne, v, arith.constant(ty, 0))


class _Block:
    """Reads the m entries of one n:m group of a dense tensor (zero past its end)."""

    def __init__(self, dense: ir.Value, layout: Layout, shape: list[int]) -> None:
        self.dense, self.layout, self.shape = dense, layout, shape
        self.coords: list[ir.Value] = []

    def read(self, slot: ir.Value) -> ir.Value:
        """The entry at level coordinates ``self.coords + [slot]``."""
        lvl = [*self.coords, slot]
        dims: list[ir.Value | None] = [None] * len(self.shape)
        for c, e in zip(lvl, self.layout.dim_to_lvl.results, strict=True):
            term = arith.muli(c, index(e.const)) if e.op == "floordiv" else c
            prev = dims[e.dim]
            dims[e.dim] = term if prev is None else arith.addi(prev, term)
        coords = [d if d is not None else index(0) for d in dims]
        inside = [
            arith.cmpi(arith.CmpIPredicate.ult, d, index(n))
            for d, n in zip(coords, self.shape, strict=True)
        ]
        cond = inside[0]
        for more in inside[1:]:
            cond = arith.andi(cond, more)
        elem = ir.RankedTensorType(self.dense.type).element_type
        op = scf.IfOp(cond, [elem], has_else=True)
        with ir.InsertionPoint(op.then_block):
            scf.YieldOp([tensor.extract(self.dense, coords)])
        with ir.InsertionPoint(op.else_block):
            zero = (
                ir.FloatAttr.get(elem, 0.0)
                if isinstance(elem, ir.FloatType)
                else ir.IntegerAttr.get(elem, 0)
            )
            scf.YieldOp([arith.constant(elem, zero)])
        return op.results[0]


def _fill_group(block: _Block, n: int, m: int, base: ir.Value, state: State) -> State:
    """Write one group's n slots: its nonzeros, padded with its first zeros (ascending)."""

    def count(slot: ir.Value, s: State) -> State:
        one = arith.select(_is_nonzero(block.read(slot)), index(1), index(0))
        return {"k": arith.addi(s["k"], one)}

    k = for_state(index(0), index(m), {"k": index(0)}, count)["k"]
    crd_ty = ir.RankedTensorType(state["crd"].type).element_type

    def place(p: ir.Value, s: State) -> State:
        v = block.read(p)
        nz = _is_nonzero(v)
        room = arith.cmpi(arith.CmpIPredicate.slt, s["used"], index(n))
        pad = arith.cmpi(arith.CmpIPredicate.sgt, s["pad"], index(0))
        take = arith.andi(room, arith.select(nz, nz, pad))

        def insert(t: State) -> State:
            at = arith.addi(base, t["used"])
            c = p if isinstance(crd_ty, ir.IndexType) else arith.index_cast(crd_ty, p)
            return {
                **t,
                "crd": tensor.insert(c, t["crd"], [at]),
                "val": tensor.insert(v, t["val"], [at]),
            }

        s = if_state(
            take, {"crd": s["crd"], "val": s["val"], "used": s["used"], "pad": s["pad"]}, insert
        )
        used = arith.select(take, arith.addi(s["used"], index(1)), s["used"])
        padded = arith.andi(take, arith.xori(nz, arith.constant(nz.type, 1)))
        return {
            **s,
            "used": used,
            "pad": arith.select(padded, arith.subi(s["pad"], index(1)), s["pad"]),
        }

    start = {**state, "used": index(0), "pad": arith.subi(index(n), k)}
    out = for_state(index(0), index(m), start, place)
    return {"crd": out["crd"], "val": out["val"]}


def _pad_convert(op: ir.Operation) -> None:
    dst = ir.RankedTensorType(op.results[0].type)
    layout = _layout(dst)
    assert layout is not None
    level = layout.levels[-1]
    src = op.operands[0]
    shape = list(dst.shape)
    with ir.InsertionPoint(op), op.location:
        dense = src
        if (
            isinstance(src.type, ir.RankedTensorType)
            and ir.RankedTensorType(src.type).encoding is not None
        ):
            dense_ty = ir.RankedTensorType.get(shape, dst.element_type)
            dense = st.ConvertOp(dense_ty, src).result
        lvl_shape = layout.dim_to_lvl.level_shape(tuple(shape))
        groups = 1
        for size in lvl_shape[:-1]:
            groups *= size
        crd_ty = (
            ir.IndexType.get()
            if layout.crd_width == 0
            else ir.IntegerType.get_signless(layout.crd_width)
        )
        total = groups * level.n
        state = {
            "crd": tensor.empty([total], crd_ty),
            "val": tensor.empty([total], dst.element_type),
        }
        block = _Block(dense, layout, shape)

        def group(g: ir.Value, s: State) -> State:
            rest, coords = g, []
            for size in reversed(lvl_shape[:-1]):
                coords.append(arith.remui(rest, index(size)))
                rest = arith.divui(rest, index(size))
            block.coords = coords[::-1]
            return _fill_group(block, level.n, level.m, arith.muli(g, index(level.n)), s)

        out = for_state(index(0), index(groups), state, group)
        built = st.AssembleOp(dst, [out["crd"]], out["val"]).result
    op.results[0].replace_all_uses_with(built)
    op.erase()


@dataclasses.dataclass(frozen=True)
class PadNmConvertsPass(SparsecompPass):
    """Build n:m tensors converted from other layouts with every group padded to n entries.

    MLIR's n:m (``structured[n, m]``) level has no positions: its readers
    take exactly n stored entries per group of m. ``sparse_tensor.convert``
    to such an encoding inserts only the nonzeros, like for a compressed
    level, so a group with fewer than n nonzeros (an all-zero row, a
    half-empty 2:4 group) leaves the storage short, and every later group
    is read at the wrong place or past the buffer's end (garbage, SIGSEGV
    or SIGBUS). Each ``sparse_tensor.convert`` from a tensor without an n:m
    level to a static-shaped n:m encoding whose other levels are dense
    (what upstream allows) becomes a loop over the groups that writes each
    group's nonzeros and pads the free slots with its smallest unused
    coordinates and value 0 (sparsecomp's own n:m packing), then a
    ``sparse_tensor.assemble`` of the coordinates and values. A sparse
    source is converted to dense first. Coordinates past the end of a
    partial last group read as zero. A group with more than n nonzeros is
    not n:m data: its first n nonzeros are kept (upstream's result is
    undefined there). Other converts are left alone.

    Runs on the fallback's module before the sparsifier.

    Before:

    ```mlir
    %A = sparse_tensor.convert %d : tensor<2x8xf32> to tensor<2x8xf32, #NM24>
    ```

    After:

    ```mlir
    %0:2 = scf.for %g = %c0 to %c4 step %c1 iter_args(%crd = %e0, %val = %e1) -> (...) {
      // count the group's nonzeros, then write n slots: nonzeros and first zeros
    }
    %A = sparse_tensor.assemble (%0#0), %0#1 : (tensor<8xindex>), tensor<8xf32>
        to tensor<2x8xf32, #NM24>
    ```
    """

    NAME = "sparse-iter-pad-nm-converts"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        for o in preorder(op):
            if rewritable(o):
                _pad_convert(o)
