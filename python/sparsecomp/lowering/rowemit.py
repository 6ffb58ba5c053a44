"""Emit a :class:`~sparsecomp.lowering.rowplan.RowPlan` (stage II IR).

Rows are processed in :data:`BLOCKS` parallel blocks of consecutive rows;
each block allocates its own dense row workspaces of one entry per column,
so blocks never share one. Per row, a *stamp* (row + 1) in a tag array
tells which columns the row has touched, so workspaces are never cleared
between rows:

* ``tag[j] == stamp``: column ``j`` is already recorded in this row;
* merge: ``ws_s[j]`` holds operand ``s``'s value (union: zeroed again after
  the row; intersection: per-operand tags say which are current);
* product: ``ws[j]`` accumulates the body, starting from the output's
  initial value at the first touch.

A dense output is updated in place at the recorded columns. A sparse
output takes three passes over the rows: count each row's columns, a
prefix sum into positions, then fill: record the columns at the row's
positions (and set their bits in a bitmap), order them (:mod:`.sort`:
short rows sorted, long ones read back from the bitmap), and compute the
values.
"""

from __future__ import annotations

from collections.abc import Callable

from mlir import ir
from mlir.dialects import arith, linalg, tensor

from sparsecomp.formats.layout import Layout
from sparsecomp.lowering import body as bodies
from sparsecomp.lowering.assemble import assemble_csr, cast, prefix_positions
from sparsecomp.lowering.levels import emit_level
from sparsecomp.lowering.loops import State, add, for_state, if_state, index, load_index, mul
from sparsecomp.lowering.operands import OperandAccess, zero_of
from sparsecomp.lowering.reader import Reader, int_type
from sparsecomp.lowering.rowplan import RowOperand, RowPlan
from sparsecomp.lowering.sort import mark, order_marked, summary_words
from sparsecomp.lowering.zeros import Zero, reads_output

#: How many blocks of rows run in parallel (each with its own workspaces).
BLOCKS = 64

Pred = arith.CmpIPredicate


def _get(t: ir.Value, i: ir.Value) -> ir.Value:
    return tensor.extract(t, [i])


def _put(t: ir.Value, i: ir.Value, v: ir.Value) -> ir.Value:
    return tensor.insert(v, t, [i])


class RowEmitter(OperandAccess):
    """Emits one row-wise kernel at the current insertion point."""

    plan: RowPlan

    def __init__(self, plan: RowPlan) -> None:
        self.plan = plan
        self.block = plan.op.regions[0].blocks[0]
        self.readers = {
            s.number: Reader(plan.inputs[s.number].value, _single(plan.inputs[s.number].layout))
            for s in plan.sparse
        }
        self.idx: dict[int, ir.Value] = {}
        self.vec = None
        self.nrows = self._size(plan.row)
        self.ncols = self._size(plan.col)
        self.elt = ir.RankedTensorType(plan.output.value.type).element_type
        self.mode = "dense"  # or "count" / "fill" for a sparse output
        self.positions = self.starts = self.stamp = self.lo = self.nrows  # per phase / row
        self.source: ir.Value | None = None  # where the body reads the output, if not carried

    def _size(self, dim: int) -> ir.Value:
        for acc in [*self.plan.inputs, self.plan.output]:
            if isinstance(acc.value.type, ir.RankedTensorType) and dim in acc.dims:
                return tensor.dim(acc.value, index(acc.dims.index(dim)))
        raise AssertionError(f"no operand gives the size of loop dimension {dim}")

    # -- entry ---------------------------------------------------------------------
    def emit(self) -> ir.Value:
        if not self.plan.sparse_output:
            out = self.plan.output.value
            if self.plan.zero == Zero.ZERO:
                if reads_output(self.block, len(self.plan.inputs)):
                    self.source = out  # the body reads the output's value from before the fill
                out = linalg.fill(zero_of(self.elt), outs=[out])
            return self._blocks({"out": out})["out"]
        return self._sparse()

    def _sparse(self) -> ir.Value:
        layout = self.plan.output.layout
        assert layout is not None
        pos_t, crd_t = int_type(layout.pos_width), int_type(layout.crd_width)
        self.mode = "count"
        counts = tensor.empty([self.nrows], ir.IndexType.get())
        counts = self._blocks({"counts": counts})["counts"]
        positions, total, self.starts = prefix_positions(counts, self.nrows, pos_t)
        self.positions = positions
        self.mode = "fill"
        filled = self._blocks({
            "crd": tensor.empty([total], crd_t),
            "vals": tensor.empty([total], self.elt),
        })  # fmt: skip
        ty = self.plan.output.value.type
        crd, vals = filled["crd"], filled["vals"]
        return assemble_csr(ty, self.positions, crd, vals, self.nrows, self.ncols)

    # -- blocks of rows ------------------------------------------------------------
    def _blocks(self, outputs: State) -> State:
        nblocks = arith.minsi(self.nrows, index(BLOCKS))
        per = arith.ceildivsi(self.nrows, arith.maxsi(nblocks, index(1)))

        def block(b: ir.Value, s: State) -> State:
            r0 = mul(b, per)
            r1 = arith.minsi(add(r0, per), self.nrows)
            state = {**s, **self._workspaces()}
            state = for_state(r0, r1, state, self._row)
            return {k: state[k] for k in s}

        return for_state(index(0), nblocks, outputs, block, parallel=True)

    def _workspaces(self) -> State:
        plan = self.plan

        def array(element: ir.Type) -> ir.Value:
            # Every workspace starts zeroed: the union's value workspaces are
            # cleared again after each row, and distinct initial values keep
            # bufferization from giving two workspaces one buffer (CSE merges
            # equal tensor.empty ops, whose contents bufferization ignores).
            return linalg.fill(zero_of(element), outs=[tensor.empty([self.ncols], element)])

        idx_t = ir.IndexType.get()
        if plan.intersect:
            ws = {f"tag{s.number}": array(idx_t) for s in plan.sparse[:-1]}
        else:
            ws = {"tag": array(idx_t)}
        if self.mode != "count":
            if plan.kind == "product":
                ws["w"] = array(self.elt)
            else:
                ws |= {f"ws{s.number}": array(self._element(s)) for s in plan.sparse}
        if self.mode == "dense":
            ws["list"] = array(idx_t)
        if self.mode == "fill" and self._ordered():
            # one bit per column: orders a long row without sorting it (.sort.order_marked)
            words = arith.ceildivui(self.ncols, index(64))
            i64 = ir.IntegerType.get_signless(64)
            ws["bits"] = linalg.fill(zero_of(i64), outs=[tensor.empty([words], i64)])
            above = summary_words(self.ncols)
            ws["summary"] = linalg.fill(zero_of(i64), outs=[tensor.empty([above], i64)])
        return ws

    def _ordered(self) -> bool:
        """Whether the sparse output's columns must be in order within a row."""
        layout = self.plan.output.layout
        return layout is not None and not layout.levels[1].nonordered

    def _element(self, s: RowOperand) -> ir.Type:
        return self.readers[s.number].element

    # -- one row -------------------------------------------------------------------
    def _row(self, r: ir.Value, s: State) -> State:
        self.idx = {self.plan.row: r}
        self.stamp = add(r, index(1))
        self.lo = load_index(self.starts, r) if self.mode == "fill" else index(0)
        s = {**s, "n": index(0)}
        s = self._scatter_merge(r, s) if self.plan.kind == "merge" else self._scatter_product(r, s)
        n = s.pop("n")
        if self.mode == "count":
            return {**s, "counts": _put(s["counts"], r, n)}
        if self.mode == "fill":
            hi = add(self.lo, n)
            if "bits" in s:  # an ordered level (a nonordered one keeps the order found)
                ordered = order_marked(s["crd"], self.lo, hi, s["bits"], s["summary"])
                s["crd"], s["bits"], s["summary"] = ordered
            return for_state(self.lo, hi, s, lambda p, st: self._combine(_load_crd(st, p), p, st))

        def listed(t: ir.Value, st: State) -> State:
            return self._combine(load_index(st["list"], t), t, st)

        return for_state(index(0), n, s, listed)

    def _walk(self, op: RowOperand, parent: ir.Value, s: State,
              inner: Callable[[ir.Value, ir.Value, State], State]) -> State:  # fmt: skip
        keys = list(s)

        def body(q: ir.Value, coord: ir.Value, values: list[ir.Value]) -> list[ir.Value]:
            out = inner(q, coord, dict(zip(keys, values, strict=True)))
            return [out[k] for k in keys]

        results = emit_level(self.readers[op.number], 1, parent, [s[k] for k in keys], body, False)
        return dict(zip(keys, results, strict=True))

    def _record(self, j: ir.Value, s: State) -> State:
        n = s["n"]
        if self.mode == "fill":
            crd_t = ir.RankedTensorType(s["crd"].type).element_type
            s = {**s, "crd": _put(s["crd"], add(self.lo, n), cast(j, crd_t))}
            if "bits" in s:
                s = {**s, "bits": mark(s["bits"], j)}
        elif self.mode == "dense":
            s = {**s, "list": _put(s["list"], n, j)}
        return {**s, "n": add(n, index(1))}

    def _first_touch(self, tag: str, j: ir.Value, s: State,
                     then: Callable[[State], State]) -> State:  # fmt: skip
        fresh = arith.cmpi(Pred.ne, _get(s[tag], j), self.stamp)
        return if_state(fresh, s, lambda st: then({**st, tag: _put(st[tag], j, self.stamp)}))

    def _scatter_merge(self, r: ir.Value, s: State) -> State:
        plan = self.plan
        last = len(plan.sparse) - 1
        for n, op in enumerate(plan.sparse):
            values = self.readers[op.number].values

            def visit(q: ir.Value, j: ir.Value, st: State, op: RowOperand = op,
                      n: int = n, values: ir.Value = values) -> State:  # fmt: skip
                if self.mode != "count":
                    st = {**st, f"ws{op.number}": _put(st[f"ws{op.number}"], j, _get(values, q))}
                if not plan.intersect:
                    return self._first_touch("tag", j, st, lambda x: self._record(j, x))
                if n < last:
                    return {**st, f"tag{op.number}": _put(st[f"tag{op.number}"], j, self.stamp)}
                every = [arith.cmpi(Pred.eq, _get(st[f"tag{o.number}"], j), self.stamp)
                         for o in plan.sparse[:-1]]  # fmt: skip
                cond = every[0]
                for c in every[1:]:
                    cond = arith.andi(cond, c)
                return if_state(cond, st, lambda x: self._record(j, x))

            s = self._walk(op, r, s, visit)
        return s

    def _scatter_product(self, r: ir.Value, s: State) -> State:
        a, b = self.plan.sparse
        a_vals, b_vals = self.readers[a.number].values, self.readers[b.number].values
        k_dim = a.col

        def over_a(qa: ir.Value, k: ir.Value, st: State) -> State:
            self.idx[k_dim] = k

            def over_b(qb: ir.Value, j: ir.Value, st2: State) -> State:
                fresh = arith.cmpi(Pred.ne, _get(st2["tag"], j), self.stamp)
                st2 = if_state(fresh, st2, lambda x: self._record(
                    j, {**x, "tag": _put(x["tag"], j, self.stamp)}))  # fmt: skip
                if self.mode == "count":
                    return st2
                self.idx[self.plan.col] = j
                current = arith.select(fresh, self._initial(j, st2), _get(st2["w"], j))
                args = self._args({a.number: _get(a_vals, qa), b.number: _get(b_vals, qb)},
                                  current)  # fmt: skip
                new = bodies.emit_scalar(self.block, args, self.idx)
                return {**st2, "w": _put(st2["w"], j, new)}

            return self._walk(b, k, st, over_b)

        return self._walk(a, r, s, over_a)

    def _initial(self, j: ir.Value, s: State) -> ir.Value:
        if self.plan.sparse_output:
            return zero_of(self.elt)
        return _get2(s["out"], self.idx[self.plan.row], j)

    def _args(self, sparse: dict[int, ir.Value], out_elem: ir.Value) -> list[ir.Value]:
        inputs = enumerate(self.plan.inputs)
        args = [sparse[i] if i in sparse else self.scalar(acc) for i, acc in inputs]
        return [*args, out_elem]

    # -- the output at one recorded column ------------------------------------------
    def _combine(self, j: ir.Value, at: ir.Value, s: State) -> State:
        plan = self.plan
        self.idx[plan.col] = j
        row = self.idx[plan.row]
        if plan.kind == "product":
            value = _get(s["w"], j)
        else:
            current = (
                zero_of(self.elt) if plan.sparse_output else _get2(self.source or s["out"], row, j)
            )
            sparse = {op.number: _get(s[f"ws{op.number}"], j) for op in plan.sparse}
            value = bodies.emit_scalar(self.block, self._args(sparse, current), self.idx)
            if not plan.intersect:  # union workspaces start every row at zero
                for op in plan.sparse:
                    key = f"ws{op.number}"
                    s = {**s, key: _put(s[key], j, zero_of(self._element(op)))}
        if plan.sparse_output:
            return {**s, "vals": _put(s["vals"], at, value)}
        return {**s, "out": tensor.insert(value, s["out"], [row, j])}


def _single(layout: Layout | None) -> Layout:
    assert layout is not None  # the plan's sparse operands have a single layout
    return layout


def _get2(t: ir.Value, i: ir.Value, j: ir.Value) -> ir.Value:
    return tensor.extract(t, [i, j])


def _load_crd(s: State, p: ir.Value) -> ir.Value:
    return load_index(s["crd"], p)


def emit_rows(plan: RowPlan) -> ir.Value:
    """The kernel's result (the new output tensor), emitted at the insertion point."""
    return RowEmitter(plan).emit()
