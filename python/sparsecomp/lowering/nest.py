"""Emit the loop nest of a :class:`~sparsecomp.lowering.plan.Plan` (stage II IR).

The nest is built recursively, step by step (see :mod:`.plan` for the order).
Each loop carries the output: the whole output tensor (dense outputs) or the
values tensor (sparse outputs) outside the hoist point, plus the hoisted
output element(s) inside it. Level loops follow the storage scheme of
:mod:`sparsecomp.formats.storage`; the driver is read through
``sparse_iter.positions``/``coordinates``/``values``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlir import ir
from mlir.dialects import arith, tensor, vector

from sparsecomp.dialects import sparse_iter
from sparsecomp.ir.destinations import is_destination
from sparsecomp.ir.linalg_ops import iterator_types, linalg_fill
from sparsecomp.lowering import body as bodies
from sparsecomp.lowering import epilogue
from sparsecomp.lowering.jam import Group, Jam, find_group, find_jam
from sparsecomp.lowering.levels import dense_loop, emit_level
from sparsecomp.lowering.loops import Carried, add, for_loop, if_else, index, mul
from sparsecomp.lowering.operands import OperandAccess, Vec, zero_of
from sparsecomp.lowering.pack import pack_columns, pack_rows, transpose_tile
from sparsecomp.lowering.plan import Access, Plan
from sparsecomp.lowering.reader import Reader, rank1
from sparsecomp.lowering.slices import (
    Cut,
    bytes_along,
    gathered_rows,
    row_cut,
    slice_count,
    sliced_level,
)
from sparsecomp.lowering.zeros import Zero, reads_output

si: Any = sparse_iter  # generated at run time from the .td; untyped


def _is_int(ty: ir.Type) -> bool:
    return isinstance(ty, ir.IntegerType | ir.IndexType)


def _yields_input(op: ir.Operation) -> bool:
    """Whether ``op`` is a ``linalg.generic`` of one input and one output whose
    body only yields the input's element (a fill or a broadcast)."""
    if op.name != "linalg.generic" or len(op.operands) != 2:
        return False
    block = op.regions[0].blocks[0]
    body = list(block.operations)
    return len(body) == 1 and body[0].operands[0] == block.arguments[0]


def _constant_fill(value: ir.Value) -> tuple[ir.Value, ir.Value] | None:
    """``(the filled tensor, the constant)`` if ``value`` fills a tensor with a constant.

    Either ``linalg.fill`` or its generalized form (a ``linalg.generic`` whose
    body yields its one scalar input), as ``linalg-generalize-named-ops``
    leaves it.
    """
    owner = value.owner
    if isinstance(owner, ir.Block) or len(owner.operands) != 2:
        return None
    if not _yields_input(owner) and owner.name != "linalg.fill":
        return None
    scalar = owner.operands[0]
    source = scalar.owner
    if isinstance(source, ir.Block) or source.name != "arith.constant":
        return None
    return owner.operands[1], scalar


@dataclass(frozen=True)
class Broadcast:
    """An output's initial value read from ``value`` (a dense tensor) at the
    output dimensions ``dims`` (``(i, j) -> (i)``: a bias per row)."""

    value: ir.Value
    dims: tuple[int, ...]


def _broadcast_fill(value: ir.Value) -> tuple[ir.Value, Broadcast] | None:
    """``(the filled tensor, the Broadcast)`` if ``value`` broadcasts a dense tensor.

    That is a ``linalg.generic`` with all dimensions parallel, an identity
    output map, one dense input read at some of the dimensions in order, and a
    body that yields the input's element (``linalg.broadcast`` generalized):
    ``C = bias[:, None]`` before ``C += A B``, a linear layer's bias.
    """
    owner = value.owner
    if isinstance(owner, ir.Block) or not _yields_input(owner):
        return None
    source = owner.operands[0]
    if not isinstance(source.type, ir.RankedTensorType) or source.type.encoding is not None:
        return None
    maps = [ir.AffineMapAttr(m).value for m in owner.attributes["indexing_maps"]]
    iterators = iterator_types(owner)
    if maps[1] != ir.AffineMap.get_identity(maps[1].n_dims):
        return None
    if any("parallel" not in t for t in iterators):
        return None
    if not all(isinstance(r, ir.AffineDimExpr) for r in maps[0].results):
        return None
    dims = tuple(ir.AffineDimExpr(r).position for r in maps[0].results)
    if list(dims) != sorted(set(dims)):
        return None
    return owner.operands[1], Broadcast(source, dims)


def _argument(value: ir.Value) -> bool:
    """Whether ``value`` is a function argument, perhaps through ``tensor.cast``s."""
    while not isinstance(value, ir.BlockArgument):
        owner = value.owner
        if owner.name != "tensor.cast":
            return False
        value = owner.operands[0]
    parent = value.owner.owner
    return getattr(parent, "operation", parent).name == "func.func"


def _empty_like(value: ir.Value) -> ir.Value:
    """A ``tensor.empty`` of ``value``'s type, its dynamic sizes read from ``value``."""
    ty = ir.RankedTensorType(value.type)
    sizes = [
        tensor.dim(value, index(d)) if ty.is_dynamic_dim(d) else ty.shape[d] for d in range(ty.rank)
    ]
    return tensor.empty(sizes, ty.element_type)


def _packable(acc: Access, dim: int) -> bool:
    """Whether ``acc`` is a matrix read at ``[row, dim]`` or ``[dim, row]``: a
    panel of it can be packed (:mod:`.pack`)."""
    return len(acc.dims) == 2 and None not in acc.dims and dim in acc.dims


def _flipped(acc: Access, dim: int) -> bool:
    """Whether ``acc`` is a matrix read along its first index ``dim`` (``X[j, k]``)."""
    return len(acc.dims) == 2 and acc.dims[0] == dim and acc.dims[1] != dim


def _no_lanes(mask_type: ir.Type) -> ir.Value:
    """An all-false mask: a row past the edge reads and writes nothing."""
    false = ir.DenseElementsAttr.get_splat(mask_type, ir.BoolAttr.get(False))
    return arith.constant(mask_type, false)


def _fast_addf(a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.addf(a, b, fastmath=ir.Attribute.parse(bodies.FASTMATH))


class NestEmitter(OperandAccess):
    """Emits the nest for one plan at the current insertion point."""

    plan: Plan

    def __init__(
        self,
        plan: Plan,
        lanes: int,
        unroll: int,
        panel_bytes: int = 0,
        slice_bytes: int = 0,
        registers: int = 32,
        epilogue: ir.Operation | None = None,
    ) -> None:
        """``registers``: the target's vector registers (sizes a jammed nest, :mod:`.jam`);
        ``epilogue``: an elementwise consumer of the result to apply as each
        output element is written (:mod:`.epilogue`), where :meth:`fusible`."""
        self.plan = plan
        self.block = plan.op.regions[0].blocks[0]
        self.layout = lay = plan.layout
        self.reader = reader = Reader(plan.driver_access.value, lay)
        self.pos, self.crd, self.dim_sizes = reader.pos, reader.crd, reader.dim_sizes
        self.values = {plan.driver: reader.values}
        for i in plan.shared:  # read at the driver's positions
            self.values[i] = si.values(rank1(reader.element), plan.inputs[i].value)
        self.idx: dict[int, ir.Value] = {}
        self.outer: dict[int, ir.Value] = {}  # floordiv coordinates awaiting their mod level
        self.jam: Jam | None = find_jam(plan, unroll, registers)
        self.group: Group | None = None if self.jam else find_group(plan, unroll, registers)
        if self.jam is not None:
            unroll = self.jam.unroll
        elif self.group is not None:
            unroll = self.group.unroll
        self.hoist = plan.hoist if self.jam is None else self.jam.step
        self.vec = Vec(plan.vector_dim, lanes, unroll) if plan.vector_dim >= 0 else None
        self.width: dict[int, ir.Value] = {}
        self.panel_bytes = panel_bytes
        self.slice_bytes = slice_bytes
        self.cut: Cut | None = None  # the coordinate range of the current slice
        self.rows: list[ir.Value] = []  # a jammed nest's rows (clamped to the edge)
        self.vec_bound: ir.Value | None = None  # where the vector loop (or its panel) ends
        self.parallel_panels = False  # the panels run in parallel (:meth:`_parallel_panels`)
        self.group_first: ir.Value | None = None  # the first row of the current group
        self.group_rows: ir.Value | None = None  # how many rows the groups cover
        self.epilogue = epilogue if epilogue is not None and self.fusible() else None

    # -- sizes -----------------------------------------------------------------
    def level_size(self, lv: int) -> ir.Value:
        return self.reader.level_size(lv)

    def level_bound(self, lv: int, size: ir.Value) -> ir.Value:
        """How many coordinates of a dense level exist: a ``mod`` level stops at the
        edge (one of size 1, as BSR ``R x 1``'s columns, never crosses it)."""
        expr = self.plan.layout.dim_to_lvl.results[lv]
        if expr.op != "mod" or expr.const == 1:
            return size
        start = mul(self.outer[self.plan.level_dim(lv)], size)
        return arith.minsi(size, arith.subi(self.dim_sizes[expr.dim], start))

    def loop_size(self, dim: int) -> ir.Value:
        for acc in [*self.plan.inputs, self.plan.output]:
            if acc.layout is None and dim in acc.dims:
                return tensor.dim(acc.value, index(acc.dims.index(dim)))
        raise AssertionError(f"no dense operand gives the size of loop dimension {dim}")

    # -- entry -------------------------------------------------------------------
    def emit(self) -> ir.Value:
        plan = self.plan
        out = plan.output.value
        elt = ir.RankedTensorType(out.type).element_type
        # the hoisted output's known initial value (a Broadcast: read per element)
        self.start: ir.Value | Broadcast | None = None
        self.source: ir.Value | None = None  # where the hoisted output is read, if not carried
        reads = reads_output(self.block, len(plan.inputs))
        if plan.sparse_output:
            init = self._sparse_init()
        elif self._covered():
            # Every output element is read and written exactly once: start
            # from the value it is known to hold instead of filling first.
            if plan.zero == Zero.ZERO and not reads:
                init, self.start = out, zero_of(elt)
            elif (fill := _constant_fill(out)) is not None:
                init, self.start = fill
            elif (cast := self._broadcast_start(out)) is not None:
                init, self.start = cast  # the broadcast is not materialized
            elif is_destination(out):
                init = out  # the caller's array receives the result: accumulate in it
            elif _argument(out) and ir.RankedTensorType(out.type).encoding is None:
                # An outs operand the caller passed (upstream syntax's ``outs(%C)``):
                # read each element from it and write a fresh tensor, instead of
                # a copy of it (which bufferization makes: arguments are read-only)
                # read and written again.
                init, self.source = _empty_like(out), out
            else:
                init = out
        elif plan.zero == Zero.ZERO:
            init = linalg_fill(zero_of(elt), outs=[out])
            if reads:  # the body reads the output's value from before the fill
                self.source = out
        else:
            init = out
        (result,) = self.sliced(init)
        if plan.sparse_output:
            return si.with_values(plan.driver_access.value.type, plan.driver_access.value, result)
        return result

    def gathered(self) -> list[Access]:
        """Dense inputs read along the vector dimension at rows the driver picks.

        ``B`` of SpMM ``C[i,j] += A[i,k] B[k,j]``: each stored ``A[i,k]`` reads
        a row chunk of ``B``, so all of ``B``'s rows are touched in turn.
        """
        plan, vec = self.plan, self.vec
        if vec is None or plan.vector_reduction:
            return []
        levels = {plan.level_dim(s.level) for s in plan.steps if s.kind == "level"}
        return [
            acc
            for i, acc in enumerate(plan.inputs)
            if i not in self.values
            and acc.layout is None
            and acc.uses(vec.dim)
            and any(d in levels for d in acc.dims if d is not None and d != vec.dim)
        ]

    def sliced(self, init: ir.Value) -> Carried:
        """The nest, run once per slice of the gathered rows where that pays
        (:mod:`sparsecomp.lowering.slices`), each run as :meth:`panels` runs it.

        The loop over slices runs once where one slice covers them all (no
        range searches then). The first slice starts the output
        elements as the unsliced nest does; the others read what the slices
        before wrote.
        """
        gathered = self.gathered()
        lv = self._slice_level()
        if lv is None:
            return self.panels(init)
        rows, per_row = gathered_rows(self.plan.level_dim(lv), gathered)
        count = slice_count(rows, per_row, self.pos[lv], self.crd[lv], self.slice_bytes)
        width = arith.ceildivui(rows, count)
        final = arith.subi(count, index(1))

        def body(s: ir.Value, values: Carried) -> Carried:
            lo = mul(s, width)
            first = arith.cmpi(arith.CmpIPredicate.eq, s, index(0))
            last = arith.cmpi(arith.CmpIPredicate.eq, s, final)
            self.cut = Cut(lv, lo, arith.minui(add(lo, width), rows), first, last)
            return self.panels(values[0])

        result = for_loop(index(0), count, index(1), [init], body)
        self.cut = None
        return result

    def _slice_level(self) -> int | None:
        """The level :meth:`sliced` slices, if it slices one."""
        # grouped rows run each row's entries whole (a slice's row ranges are per row)
        if self.slice_bytes <= 0 or self.group is not None:
            return None
        return sliced_level(self.plan, self.gathered())

    def panels(self, init: ir.Value) -> Carried:
        """The nest, run once per column panel of the gathered dense inputs.

        A gathered input (see :meth:`gathered`) is read at random rows. When
        all of it does not fit in ``panel_bytes`` (the cache the schedule
        may fill), the vector dimension is split into panels of whole vector
        chunks, each panel's columns of the gathered inputs fitting the
        budget; the whole nest, parallel loop included, runs per panel, so
        the rows it gathers stay in cache. The panel width is computed at run
        time from the operands' sizes: one panel when everything fits.

        Each panel of a row-major gathered input is first copied into a
        contiguous buffer (:meth:`pack`), as a BLAS packs ``B``: read in
        place, a panel's rows lie a whole row of ``B`` apart, so that they
        fall into few cache sets and each on its own page, and the panel does
        not stay in cache however small it is. On the 2-core AVX-512 Xeon of
        docs/benchmarks.md (3072x768 BSR 8x1 with 30% of its blocks kept,
        times a 768x1024 ``B``, f32), one thread took 17-21 ms in place and
        8-9 ms over packed panels of 48 columns.

        Off by default (``panel_bytes`` 0): each panel streams the sparse
        operand again and writes the output in pieces. Before packing, on the
        2-core EPYC (32 MiB L3) of docs/benchmarks.md, 8 MiB panels made SpMM
        K=128 1.3x slower on R-MAT and 3x slower on the banded FEM matrix, and
        K=512 on a uniform 0.1% 32768^2 matrix (a 64 MiB ``B`` without
        locality) 1.4x faster. :mod:`sparsecomp.torch` turns them on.
        """
        vec = self.vec
        gathered = self.gathered()
        flipped = vec is not None and any(_flipped(acc, vec.dim) for acc in gathered)
        if vec is None or not gathered or (self.panel_bytes <= 0 and not flipped):
            return self.step(0, index(0), [init])
        size = self.loop_size(vec.dim)
        chunk = index(vec.lanes * vec.unroll)
        if self.panel_bytes <= 0:  # a transposed input is read packed all the same: one panel
            width = arith.maxui(size, index(1))
        else:
            per_column = arith.maxui(bytes_along(gathered, vec.dim), index(1))
            chunks = arith.divui(arith.divui(index(self.panel_bytes), per_column), chunk)
            width = mul(arith.maxui(chunks, index(1)), chunk)
        self.parallel_panels = self._parallel_panels()
        if self.parallel_panels:  # one vector chunk each (see there)
            width = chunk

        def body(lo: ir.Value, values: Carried) -> Carried:
            hi = arith.minui(add(lo, width), size)
            vec.panel = (lo, hi)
            self.packed = {
                id(acc): (self.pack(acc, lo, hi), lo)
                for acc in gathered
                if _packable(acc, vec.dim) and (self.panel_bytes > 0 or _flipped(acc, vec.dim))
            }
            result = self.step(0, index(0), values)
            self.packed = {}
            return result

        result = for_loop(index(0), size, width, [init], body, parallel=self.parallel_panels)
        self.parallel_panels = False
        return result

    def _parallel_panels(self) -> bool:
        """Whether the panels run in parallel, the rows of the sparse operand in
        turn within each: where the output is transposed (``Y[j, i]`` for
        ``C[i, j]``, see :mod:`.pack`).

        Each element a row ``i`` (or a jammed block row) writes lies in its
        own row of ``Y``, a whole row of ``Y`` from the next; the next row
        ``i`` writes beside it. With the rows in parallel, each thread went
        on to its next row only after its whole panel, and the lines it had
        half written had left the cache: each line of ``Y`` was fetched
        twice, or more. With the panels in parallel, each thread owns its
        rows of ``Y`` (a panel of tokens, as a GEMM's threads own tiles of
        ``C``): the rows ``i`` in turn fill the lines of those rows in
        order, and each thread packs its own panel.

        Such a panel is one vector chunk wide (48 tokens at 16 lanes and 3 in
        flight), however much cache the budget allows: its packed copy is
        then one contiguous ``K x 48`` block, where a wider panel's rows lie
        a whole panel apart and each chunk's reads spread over more lines
        and pages, and the panels share out evenly among the threads. On a
        2-core Zen 4 EPYC (BERT's layers at 90%, 1024 tokens; panels of 144
        tokens before) the 3072x768 CSR weight went from 6.7-6.9 to 5.7-5.9
        ms, the 768x768 one 3-8% faster, ``bsr:8x1`` 4%; at 8192 tokens
        (336-token panels before) 1.25-1.3x faster for CSR, 1.07x ``bsr:8x1``;
        the 768x3072 weight (a 590 KiB chunk, in L2 either way) unchanged.
        """
        plan, vec = self.plan, self.vec
        if vec is None or not plan.parallel or self.cut is not None:
            return False
        dims = plan.output.dims
        return len(dims) == 2 and dims[0] == vec.dim and dims[1] != vec.dim

    def pack(self, acc: Access, lo: ir.Value, hi: ir.Value) -> ir.Value:
        """Columns ``[lo, hi)`` of the gathered matrix ``acc`` (vector dimension
        ``j``) as a new contiguous ``rows x (hi - lo)`` tensor: copied where
        ``acc`` is ``B[k, j]``, transposed where it is ``X[j, k]``
        (:mod:`.pack`)."""
        assert self.vec is not None
        lanes, parallel = self.vec.lanes, not self.parallel_panels
        if acc.dims[-1] == self.vec.dim:
            return pack_rows(acc.value, lo, hi, lanes, parallel)
        return pack_columns(acc.value, lo, hi, lanes, parallel)

    def _covered(self) -> bool:
        """Whether the loops outside the hoist point visit each output element once.

        True when they are dense loops (free dense dimensions and
        ``dense_fixed`` levels without a block edge) over exactly the
        output's dimensions, in a one-to-one map. A jammed nest's rows
        (:mod:`.jam`) count as a loop over their level, which with its
        ``dense`` ``floordiv`` level covers their dimension once.
        """
        plan, jam = self.plan, self.jam
        jammed = -1 if jam is None else plan.level_dim(jam.rows)
        dims = [] if jam is None else [jammed]
        for step in plan.steps[: self.hoist]:
            if step.kind == "level":
                dense = plan.layout.levels[step.level].name == "dense_fixed"
                op = plan.layout.dim_to_lvl.results[step.level].op
                block_row = op == "floordiv" and plan.level_dim(step.level) == jammed
                if not dense or (op != "id" and not block_row):
                    return False
                if not block_row:
                    dims.append(plan.level_dim(step.level))
            else:
                dims.append(step.dim)
        out_dims = [d for d in plan.output.dims if d is not None]
        return len(out_dims) == len(plan.output.dims) and sorted(dims) == sorted(out_dims)

    def fusible(self) -> bool:
        """Whether an epilogue (:mod:`.epilogue`) can be applied where the output is
        written: each dense output element is written once per run of the
        nest (:meth:`_covered`); where the nest runs once per slice of the
        reduction (:meth:`sliced`), the last slice's write is the final one."""
        return not self.plan.sparse_output and self._covered()

    def _finish(self, elems: list[ir.Value]) -> list[ir.Value]:
        """The output elements as they are written: with the epilogue applied (if
        any), in the last slice only where the reduction is sliced."""
        fused = self.epilogue
        if fused is None:
            return elems

        def applied() -> Carried:
            return [epilogue.apply(fused, e) for e in elems]

        if self.cut is None:
            return applied()
        return if_else(self.cut.last, [e.type for e in elems], applied, lambda: elems)

    def _sparse_init(self) -> ir.Value:
        """The values tensor a sparse output (the driver's structure) starts from.

        A ``tensor.empty`` output holds zeros. When the nest visits every stored
        slot once (no padding or gaps: dense, compressed and singleton levels),
        each slot starts from zero in a register and is written once, so the
        values need no fill pass and no read.
        """
        plan = self.plan
        vals = self.values[plan.driver]
        if plan.output.value == plan.driver_access.value:
            return vals
        elt = ir.RankedTensorType(vals.type).element_type
        empty = tensor.empty([tensor.dim(vals, index(0))], elt)
        owner = plan.output.value.owner
        fresh = not isinstance(owner, ir.Block) and owner.name == "tensor.empty"
        slots = {level.name for level in plan.layout.levels}
        if fresh and slots <= {"dense_fixed", "compressed_varied", "singleton"}:
            self.start = zero_of(elt)
            return empty
        return linalg_fill(zero_of(elt), outs=[empty])

    # -- steps -------------------------------------------------------------------
    def step(self, k: int, pos: ir.Value, carried: Carried) -> Carried:
        plan = self.plan
        if k == self.hoist and len(carried) == 1:
            if self.jam is not None:
                return self.jammed(pos, carried[0], self.jam)
            if self.group is not None:
                return self.grouped(k, carried[0], self.group)
            return self.hoisted(k, pos, carried[0])
        if k == len(plan.steps):
            return self.innermost(pos, carried)
        s = plan.steps[k]
        if s.kind == "dense":
            return self.dense_step(k, s.dim, pos, carried)
        return self.level_step(k, s.level, pos, carried)

    def dense_step(self, k: int, dim: int, pos: ir.Value, carried: Carried) -> Carried:
        size = self.loop_size(dim)
        vec = self.vec
        if vec is None or dim != vec.dim:

            def body(iv: ir.Value, values: Carried) -> Carried:
                self.idx[dim] = iv
                return self.step(k + 1, pos, values)

            return for_loop(index(0), size, index(1), carried, body)
        chunk = vec.lanes * vec.unroll
        lo = index(0)
        if vec.panel is not None:
            lo, size = vec.panel
        reduction = self.plan.vector_reduction
        if reduction:  # carry vector partial sums instead of the scalar output
            out, scalar = carried
            vt = ir.VectorType.get([vec.lanes], scalar.type)
            carried = [
                out,
                *(vector.broadcast(vt, zero_of(scalar.type)) for _ in range(vec.unroll)),
            ]

        self.vec_bound = size

        def vbody(iv: ir.Value, values: Carried) -> Carried:
            vec.bases = [add(iv, index(u * vec.lanes)) for u in range(vec.unroll)]
            mask_t = ir.VectorType.get([vec.lanes], ir.IntegerType.get_signless(1))
            vec.masks = [vector.create_mask(mask_t, [arith.subi(size, b)]) for b in vec.bases]
            return self.step(k + 1, pos, values)

        cut = self.cut
        steps = self.plan.steps
        after = steps[k + 1] if k + 1 < len(steps) else None
        if cut is not None and after is not None and after.kind == "level":
            if after.level == cut.level:  # the row's range in the slice, once for all chunks
                self.cut = row_cut(cut, self.pos[cut.level], self.crd[cut.level], pos)
        results = for_loop(lo, size, index(chunk), carried, vbody)
        self.cut = cut
        if not reduction:
            return results
        # Add the partial sums lane-wise first: one horizontal reduction per output.
        total = results[1]
        for acc in results[2:]:
            total = arith.addi(total, acc) if _is_int(scalar.type) else _fast_addf(total, acc)
        kind = ir.Attribute.parse("#vector.kind<add>")
        return [results[0], vector.reduction(scalar.type, kind, total, acc=scalar)]

    def level_step(self, k: int, lv: int, parent: ir.Value, carried: Carried) -> Carried:
        if k == 0 and self.group is not None:
            return self.row_groups(lv, carried, self.group)

        def inner(q: ir.Value, coord: ir.Value, values: Carried) -> Carried:
            self._bind_level(lv, coord)
            return self.step(k + 1, q, values)

        parallel = k == 0 and self.plan.parallel and not self.parallel_panels
        return emit_level(self, lv, parent, carried, inner, parallel)

    def _bind_level(self, lv: int, coord: ir.Value) -> None:
        expr = self.plan.layout.dim_to_lvl.results[lv]
        dim = self.plan.level_dim(lv)
        if expr.op == "floordiv":
            self.outer[dim] = coord
        elif expr.op == "mod":
            self.idx[dim] = add(mul(self.outer[dim], index(expr.const)), coord)
        else:
            self.idx[dim] = coord

    # -- the output element ------------------------------------------------------
    def _out_indices(self) -> list[ir.Value]:
        return self.indices(self.plan.output)

    def hoisted(self, k: int, pos: ir.Value, out: ir.Value) -> Carried:
        """Read the output element(s), run the inner steps on them, write them back."""
        plan = self.plan
        cut = self.cut
        if cut is None or (self.start is None and self.source is None):
            elems = self._initial(out, pos, self.start, self.source)
        else:  # a sliced nest: only the first slice starts them as the unsliced nest does
            start, source = self.start, self.source

            def first() -> Carried:
                return self._initial(out, pos, start, source)

            def later() -> Carried:
                return self._initial(out, pos, None, None)

            elems = if_else(cut.first, self._types(out), first, later)
        elems = self.step(k, pos, [out, *elems])[1:]
        if plan.sparse_output:
            return [tensor.insert(elems[0], out, [pos])]
        elems = self._finish(elems)
        if len(elems) > 1 or isinstance(elems[0].type, ir.VectorType):
            for u, e in enumerate(elems):
                out = self.write(e, out, u)
            return [out]
        return [tensor.insert(elems[0], out, self._out_indices())]

    def _broadcast_start(self, out: ir.Value) -> tuple[ir.Value, Broadcast] | None:
        """``out``'s :func:`_broadcast_fill`, where its source does not vary along
        the vectorized dimension (one scalar per hoisted output chunk)."""
        found = _broadcast_fill(out)
        if found is None:
            return None
        dims = [self.plan.output.dims[d] for d in found[1].dims]
        if None in dims or (self.vec is not None and self.vec.dim in dims):
            return None
        return found

    def _initial(
        self,
        out: ir.Value,
        pos: ir.Value,
        start: ir.Value | Broadcast | None,
        source: ir.Value | None,
    ) -> list[ir.Value]:
        """The output element(s) at the hoist point: ``start`` (a known value, or
        one read from a broadcast tensor), or read from ``source`` (the caller's
        outs operand), else from ``out``."""
        plan = self.plan
        if isinstance(start, Broadcast):
            loop_dims = [plan.output.dims[d] for d in start.dims]
            at = [self.idx[d] for d in loop_dims if d is not None]
            start = tensor.extract(start.value, at)
        assert not isinstance(start, Broadcast)
        vector_out = self.vec is not None and plan.output.uses(self.vec.dim)
        if plan.sparse_output:
            return [start if start is not None else tensor.extract(out, [pos])]
        if start is not None and vector_out:
            assert self.vec is not None
            vt = ir.VectorType.get([self.vec.lanes], start.type)
            return [vector.broadcast(vt, start) for _ in range(self.vec.unroll)]
        if start is not None:
            return [start]
        if vector_out:
            assert self.vec is not None
            return [self.read(plan.output, u, source or out) for u in range(self.vec.unroll)]
        return [tensor.extract(source or out, self._out_indices())]

    def _types(self, out: ir.Value) -> list[ir.Type]:
        """The types of :meth:`_initial`'s elements."""
        elt = ir.RankedTensorType(out.type).element_type
        if self.vec is not None and self.plan.output.uses(self.vec.dim):
            return [ir.VectorType.get([self.vec.lanes], elt)] * self.vec.unroll
        return [elt]

    # -- the jammed rows of a block (:mod:`.jam`) ----------------------------------
    def jammed(self, pos: ir.Value, out: ir.Value, jam: Jam) -> Carried:
        """Read the ``R x U`` output vectors of a block row, run the block loop on
        them (:meth:`jammed_levels`), write them back.

        A row past the edge of a partial block row is read and written at the
        last row that exists, through an all-false mask: nothing is read or
        written there, and its accumulators are dropped.
        """
        assert self.cut is None
        dim = self.plan.level_dim(jam.rows)
        first = mul(self.outer[dim], index(jam.size))
        count = self.level_bound(jam.rows, index(jam.size))
        last = add(first, arith.subi(count, index(1)))
        self.rows = [first, *(arith.minui(add(first, index(r)), last) for r in range(1, jam.size))]
        if self.vec is None:
            return self.jammed_scalars(pos, out, jam, count)
        vec = self.vec
        columns = vec.masks
        none = _no_lanes(columns[0].type)
        masks = [columns]
        for r in range(1, jam.size):
            inside = arith.cmpi(arith.CmpIPredicate.ult, index(r), count)
            masks.append([arith.select(inside, m, none) for m in columns])
        elems: list[ir.Value] = []
        for r, row in enumerate(self.rows):
            self.idx[dim], vec.masks = row, masks[r]
            elems += self._initial(out, pos, self.start, self.source)
        vec.masks = columns
        elems = self._finish(self.jammed_levels(pos, [out, *elems], jam)[1:])
        if self.plan.output.dims == (vec.dim, dim):
            return [self.write_transposed(out, elems, count, jam.size, self.rows[0])]
        for r, row in enumerate(self.rows):
            self.idx[dim], vec.masks = row, masks[r]
            for u in range(vec.unroll):
                out = self.write(elems[r * vec.unroll + u], out, u)
        vec.masks = columns
        return [out]

    def jammed_scalars(self, pos: ir.Value, out: ir.Value, jam: Jam, count: ir.Value) -> Carried:
        """:meth:`jammed` without vectors (SpMV over BSR): one scalar accumulator per
        row of the block row, kept over its blocks; a row past the edge is read at
        the last row and not written."""
        dim = self.plan.level_dim(jam.rows)
        elems: list[ir.Value] = []
        for row in self.rows:
            self.idx[dim] = row
            elems += self._initial(out, pos, self.start, self.source)
        elems = self._finish(self.jammed_levels(pos, [out, *elems], jam)[1:])
        for r, (row, elem) in enumerate(zip(self.rows, elems, strict=True)):
            self.idx[dim] = row
            at = self._out_indices()

            def write(
                into: ir.Value = out, elem: ir.Value = elem, at: list[ir.Value] = at
            ) -> Carried:
                return [tensor.insert(elem, into, at)]

            def keep(into: ir.Value = out) -> Carried:
                return [into]

            if r == 0:
                (out,) = write()
            else:
                inside = arith.cmpi(arith.CmpIPredicate.ult, index(r), count)
                (out,) = if_else(inside, [out.type], write, keep)
        return [out]

    def write_transposed(
        self, out: ir.Value, elems: list[ir.Value], count: ir.Value, rows: int, first: ir.Value
    ) -> ir.Value:
        """Write the ``rows x U`` accumulators of consecutive rows ``first ...``
        (a jammed block row, or a :class:`~.jam.Group`; ``count`` of them exist)
        into a transposed output ``Y[j, i]``: each ``rows x lanes`` tile is
        transposed in registers (:func:`.pack.transpose_tile`) into one vector
        of the ``count`` rows per column ``j``, stored contiguously in ``Y``'s
        row ``j``. A whole tile (all its lanes inside, ``count == rows``) is
        stored without masks."""
        assert self.vec is not None
        vec, size = self.vec, self.vec_bound
        assert size is not None
        last = arith.subi(size, index(1))
        mask_t = ir.VectorType.get([rows], ir.IntegerType.get_signless(1))
        perm = ir.AffineMap.get_minor_identity(2, 1)
        whole_rows = arith.cmpi(arith.CmpIPredicate.eq, count, index(rows))
        for u, base in enumerate(vec.bases):
            columns = transpose_tile([elems[r * vec.unroll + u] for r in range(rows)])
            inside = arith.cmpi(arith.CmpIPredicate.ule, add(base, index(vec.lanes)), size)
            whole = arith.andi(whole_rows, inside)

            def plain(into: ir.Value = out, base: ir.Value = base) -> Carried:
                for lane, column in enumerate(columns):
                    at = [add(base, index(lane)), first]
                    into = vector.transfer_write(into.type, column, into, at, perm, [True])
                return [into]

            def masked(into: ir.Value = out, base: ir.Value = base) -> Carried:
                for lane, column in enumerate(columns):
                    j = add(base, index(lane))
                    there = arith.cmpi(arith.CmpIPredicate.ult, j, size)
                    mask = vector.create_mask(mask_t, [arith.select(there, count, index(0))])
                    at = [arith.minui(j, last), first]
                    into = vector.transfer_write(into.type, column, into, at, perm, [False],
                                                 mask=mask)  # fmt: skip
                return [into]

            (out,) = if_else(whole, [out.type], plain, masked)
        return out

    # -- grouped rows (:class:`.jam.Group`) ------------------------------------------
    def row_groups(self, lv: int, carried: Carried, group: Group) -> Carried:
        """The rows (level ``lv``, ``dense``) by groups of ``group.size``; per group,
        the vector chunks, then :meth:`grouped`."""
        size = self.level_bound(lv, self.level_size(lv))
        self.group_rows = size
        parallel = self.plan.parallel and not self.parallel_panels

        def body(first: ir.Value, values: Carried) -> Carried:
            self.group_first = first
            return self.step(1, index(0), values)

        return for_loop(index(0), size, index(group.size), carried, body, parallel)

    def grouped(self, k: int, out: ir.Value, group: Group) -> Carried:
        """A group's rows, one after another, each running its entries (step
        ``k`` on) into its own accumulators; then the group's tiles are stored
        transposed (:meth:`write_transposed`). Rows past the last are run at
        the last row with all-false masks and no entries."""
        assert self.vec is not None
        assert self.group_first is not None
        assert self.group_rows is not None
        vec, plan = self.vec, self.plan
        dim = plan.level_dim(plan.steps[0].level)
        first = self.group_first
        count = arith.minui(index(group.size), arith.subi(self.group_rows, first))
        last = add(first, arith.subi(count, index(1)))
        columns = vec.masks
        none = _no_lanes(columns[0].type)
        elems: list[ir.Value] = []
        for r in range(group.size):
            row = first if r == 0 else arith.minui(add(first, index(r)), last)
            self.idx[dim] = row
            inside = arith.cmpi(arith.CmpIPredicate.ult, index(r), count)
            if r > 0:
                vec.masks = [arith.select(inside, m, none) for m in columns]
            start = self._initial(out, row, self.start, self.source)

            def run(row: ir.Value = row, start: list[ir.Value] = start) -> Carried:
                return self.step(k, row, [out, *start])[1:]

            def skip(start: list[ir.Value] = start) -> Carried:
                return start

            elems += run() if r == 0 else if_else(inside, [e.type for e in start], run, skip)
            vec.masks = columns
        # elems: row-major over (row, vector); write_transposed takes the same order
        return [self.write_transposed(out, self._finish(elems), count, group.size, first)]

    def jammed_levels(self, parent: ir.Value, carried: Carried, jam: Jam) -> Carried:
        """The block loop, then the levels below the rows (a block's columns); the
        rows themselves are no loop: each has its position, ``q * R + r``."""

        def inner(q: ir.Value, coord: ir.Value, values: Carried) -> Carried:
            self._bind_level(jam.block, coord)
            base = mul(q, index(jam.size))
            return self.jammed_rest(
                jam.step + 2, [add(base, index(r)) for r in range(jam.size)], values
            )

        return emit_level(self, jam.block, parent, carried, inner, False)

    def jammed_rest(self, k: int, poses: list[ir.Value], carried: Carried) -> Carried:
        """Steps ``k`` on (``dense`` levels), each row at its own position in ``poses``."""
        if k == len(self.plan.steps):
            return self.jammed_body(poses, carried)
        lv = self.plan.steps[k].level
        size = self.level_size(lv)

        def body(c: ir.Value, values: Carried) -> Carried:
            self._bind_level(lv, c)
            return self.jammed_rest(k + 1, [add(mul(p, size), c) for p in poses], values)

        return dense_loop(self, lv, size, carried, body)

    def jammed_body(self, poses: list[ir.Value], carried: Carried) -> Carried:
        """The body once per row and vector; an operand that does not vary along
        the rows (``B``) is read once for all of them."""
        assert self.jam is not None
        out, *elems = carried
        dim = self.plan.level_dim(self.jam.rows)
        once: dict[tuple[int, int], ir.Value] = {}
        news = []
        if self.vec is None:
            for r, (row, pos) in enumerate(zip(self.rows, poses, strict=True)):
                self.idx[dim] = row
                news.append(bodies.emit_scalar(self.block, self.args(pos, elems[r], 0, once),
                                               self.idx))  # fmt: skip
            return [out, *news]
        unroll = self.vec.unroll
        for r, (row, pos) in enumerate(zip(self.rows, poses, strict=True)):
            self.idx[dim] = row
            for u in range(unroll):
                args = self.args(pos, elems[r * unroll + u], u, once)
                news.append(bodies.emit_vector(self.block, args, self.vec.lanes))
        return [out, *news]

    # -- innermost ---------------------------------------------------------------
    def innermost(self, pos: ir.Value, carried: Carried) -> Carried:
        out, *elems = carried
        if self.vec is None:
            return [out, bodies.emit_scalar(self.block, self.args(pos, elems[0]), self.idx)]
        news = []
        for u, elem in enumerate(elems):
            res = bodies.emit_vector(self.block, self.args(pos, elem, u), self.vec.lanes)
            if self.plan.vector_reduction:
                res = arith.select(self.vec.masks[u], res, elem)
            news.append(res)
        return [out, *news]

    def args(
        self,
        pos: ir.Value,
        out_elem: ir.Value,
        u: int = 0,
        once: dict[tuple[int, int], ir.Value] | None = None,
    ) -> list[ir.Value]:
        """The body's arguments at driver position ``pos``, vector ``u``. With
        ``once`` (a jammed nest), dense operands that do not use the jammed
        rows' dimension are read once, kept there by ``(input, u)``."""
        plan = self.plan
        rows = -1 if self.jam is None else plan.level_dim(self.jam.rows)
        args = []
        for i, acc in enumerate(plan.inputs):
            if i in self.values:
                args.append(tensor.extract(self.values[i], [pos]))
                continue
            vector_read = self.vec is not None and acc.uses(self.vec.dim)
            key = (i, u if vector_read else -1)
            if once is not None and not acc.uses(rows) and key in once:
                args.append(once[key])
                continue
            args.append(self.read(acc, u) if vector_read else self.scalar(acc))
            if once is not None and not acc.uses(rows):
                once[key] = args[-1]
        return [*args, out_elem]
