"""Emit a :class:`~sparsecomp.lowering.rowplan.RowPlan` (stage II IR).

Rows are processed in :data:`BLOCKS` parallel blocks of consecutive rows;
each block allocates its own dense row workspaces of one entry per column,
so blocks never share one. Per row, a *stamp* (the row's place in its
block + 1, 32-bit: half an index-wide tag array's cache footprint, 1.03x
SpGEMM's speed geomean on the ten real matrices of ``benchmarks/cpu.py``, A/B
in one process on a 2-core Zen 4 EPYC, none slower) in a tag array tells which
columns the row has touched, so workspaces are never cleared between rows:

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

A sparse product whose ``B`` has positions is built in one pass instead
(Gustavson with upper-bound temporaries, as ESC and hash SpGEMMs size
theirs): each block's multiply-adds, read from ``B``'s row lengths, give
it a range of temporaries; the block builds its rows one after another at
a cursor in its range (the fill above, without the count), then the counts
are summed into positions and each block's rows copied to their place. The
count pass walked every product a second time. The kernel takes the three
passes at run time where the multiply-adds exceed :data:`ONE_PASS_ENTRIES`
(the temporaries would take more than 2 GiB), or :data:`OVERLAP` times the
entries the columns each row's ``B`` rows span allow (most of the
temporaries would stay untouched). The one pass records a column without
a branch (:meth:`RowEmitter._record`): on a 2-core Zen 4 EPYC, A/B in one
process, unordered rows 1.10x geomean (wiki-Vote 1.78x, email-Enron 1.30x,
ca-HepPh 1.22x; bcsstk13 0.93x, whose new columns come in predictable runs),
ordered rows 1.17x (with :func:`.sort.order_marked` marking a long row's
bits itself, where a branch-free scatter would have marked one per
multiply-add). In one process, calls interleaved, on the
ten real matrices of ``benchmarks/cpu.py`` (``A @ A``, rows unordered) the
one pass ran 1.12x the three passes' speed (geomean; 1.11-1.41x on graphs
and meshes, 0.84-0.86x on the circuit matrices memplus and rajat01, whose
outputs are about as large as their products and are written twice).
"""

from __future__ import annotations

from collections.abc import Callable

from mlir import ir
from mlir.dialects import arith, tensor

from sparsecomp.formats.layout import Layout
from sparsecomp.ir.linalg_ops import linalg_fill
from sparsecomp.lowering import body as bodies
from sparsecomp.lowering.assemble import assemble_csr, cast, check_widths, prefix_positions
from sparsecomp.lowering.levels import emit_level, position_range
from sparsecomp.lowering.loops import (
    State,
    add,
    for_state,
    if_else,
    if_state,
    index,
    load_coordinate,
    load_index,
    mul,
)
from sparsecomp.lowering.operands import OperandAccess, zero_of
from sparsecomp.lowering.reader import Reader, int_type, rank1
from sparsecomp.lowering.rowplan import RowOperand, RowPlan
from sparsecomp.lowering.sort import order_marked, summary_words
from sparsecomp.lowering.zeros import Zero, reads_output

#: How many blocks of rows run in parallel (each with its own workspaces).
BLOCKS = 64
#: A sparse product's entries (multiply-adds) at most for the one-pass build: its
#: temporary columns and values take this many slots (2 GiB of 8-byte entries).
ONE_PASS_ENTRIES = 1 << 28
#: ... and at most this many times the entries the rows' spans allow: where the rows
#: of ``B`` a row of ``A`` reads overlap much (FEM matrices squared: bcsstk16's
#: products hold 18 multiply-adds an entry, their spans 8), the temporaries are
#: mostly untouched and each block's huge pages are faulted in for a few entries.
OVERLAP = 4
#: The most rows a block holds: its rows' stamps (1 to this) are 32-bit.
BLOCK_ROWS = 1 << 30

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
        self.mode = "dense"  # or "count" / "fill" / "onepass" for a sparse output
        self.starts = self.stamp = self.lo = self.nrows  # per phase / row
        self.first = self.nrows  # the current block's first row
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
                out = linalg_fill(zero_of(self.elt), outs=[out])
            return self._blocks({"out": out})["out"]
        return self._sparse()

    def _sparse(self) -> ir.Value:
        layout = self.plan.output.layout
        assert layout is not None
        pos_t, crd_t = int_type(layout.pos_width), int_type(layout.crd_width)
        if not self._one_pass_applies():
            pos, crd, vals = self._two_pass(pos_t, crd_t)
        else:
            offsets, bound, spanned = self._block_bounds()
            fits = arith.andi(
                arith.cmpi(Pred.ule, bound, index(ONE_PASS_ENTRIES)),
                arith.cmpi(Pred.ule, bound, mul(spanned, index(OVERLAP))),
            )
            types = [rank1(pos_t), rank1(crd_t), rank1(self.elt)]
            pos, crd, vals = if_else(
                fits, types,
                lambda: list(self._one_pass(pos_t, crd_t, offsets, bound)),
                lambda: list(self._two_pass(pos_t, crd_t)),
            )  # fmt: skip
        # narrow widths: a result used in the program, not returned, is checked here
        total = tensor.dim(crd, index(0))
        check_widths(self.plan.op, layout, total, self.ncols, f"{self.plan.op.name}'s result")
        ty = self.plan.output.value.type
        return assemble_csr(ty, pos, crd, vals, self.nrows, self.ncols)

    def _two_pass(self, pos_t: ir.Type, crd_t: ir.Type) -> tuple[ir.Value, ir.Value, ir.Value]:
        """Count each row's columns, sum the counts into positions, then fill."""
        self.mode = "count"
        counts = tensor.empty([self.nrows], ir.IndexType.get())
        counts = self._blocks({"counts": counts})["counts"]
        positions, total, self.starts = prefix_positions(counts, self.nrows, pos_t)
        self.mode = "fill"
        filled = self._blocks({
            "crd": tensor.empty([total], crd_t),
            "vals": tensor.empty([total], self.elt),
        })  # fmt: skip
        return positions, filled["crd"], filled["vals"]

    # -- the one-pass build of a sparse product ------------------------------------
    def _one_pass_applies(self) -> bool:
        """Whether the product's rows can be bounded before they are built: ``B``'s
        rows have positions (their lengths are read, not counted)."""
        if self.plan.kind != "product":
            return False
        b = self.plan.sparse[1]
        return self.readers[b.number].layout.levels[1].name in (
            "compressed_varied", "loose_compressed",
        )  # fmt: skip

    def _block_bounds(self) -> tuple[ir.Value, ir.Value, ir.Value]:
        """``(offsets, total, spanned)``: per block of rows, where its slots start in
        the one-pass build's temporaries (``nblocks + 1`` entries), from the
        multiply-adds of its rows (``sum over A[i, k]`` of ``B``'s row ``k`` length),
        and the sum over rows of ``min(multiply-adds, the columns their rows of B
        span)``, a cheaper bound of the output's entries (the total where ``B``'s
        rows are not ordered)."""
        a, b = self.plan.sparse
        ordered = not self.readers[b.number].layout.levels[1].nonordered
        crd = self.readers[b.number].crd[1]
        nblocks, per = self._partition()
        idx_t = ir.IndexType.get()

        def block(blk: ir.Value, s: State) -> State:
            r0, r1 = self._rows_of(blk, per)

            def row(r: ir.Value, st: State) -> State:
                def entry(q: ir.Value, k: ir.Value, e: State) -> State:
                    lo, hi = position_range(self.readers[b.number], 1, k)
                    found = {**e, "n": add(e["n"], arith.subi(hi, lo))}
                    if ordered:  # the row's first and last columns
                        some = arith.cmpi(Pred.ult, lo, hi)
                        first = arith.select(some, load_index(crd, lo), self.ncols)
                        last = arith.select(some, load_index(crd, arith.subi(hi, index(1))),
                                            index(-1))  # fmt: skip
                        found["lo"] = arith.minsi(e["lo"], first)
                        found["hi"] = arith.maxsi(e["hi"], last)
                    return found

                start = {"n": index(0), "lo": self.ncols, "hi": index(-1)}
                got = self._walk(a, r, start, entry)
                span = arith.maxsi(add(arith.subi(got["hi"], got["lo"]), index(1)), index(0))
                spanned = arith.minsi(got["n"], span) if ordered else got["n"]
                return {"n": add(st["n"], got["n"]), "spanned": add(st["spanned"], spanned)}

            n = for_state(r0, r1, {"n": index(0), "spanned": index(0)}, row)
            return {
                "bounds": _put(s["bounds"], blk, n["n"]),
                "spanned": _put(s["spanned"], blk, n["spanned"]),
            }

        empty = tensor.empty([nblocks], idx_t)
        # distinct initial values: bufferization would give equal empties one buffer
        spans = linalg_fill(index(0), outs=[tensor.empty([nblocks], idx_t)])
        found = for_state(index(0), nblocks, {"bounds": empty, "spanned": spans}, block,
                          parallel=True)  # fmt: skip
        first = tensor.insert(index(0), tensor.empty([add(nblocks, index(1))], idx_t), [index(0)])

        def step(blk: ir.Value, s: State) -> State:
            total = add(s["total"], _get(found["bounds"], blk))
            return {
                "offsets": _put(s["offsets"], add(blk, index(1)), total),
                "total": total,
                "spanned": add(s["spanned"], _get(found["spanned"], blk)),
            }

        start = {"offsets": first, "total": index(0), "spanned": index(0)}
        done = for_state(index(0), nblocks, start, step)
        return done["offsets"], done["total"], done["spanned"]

    def _one_pass(
        self, pos_t: ir.Type, crd_t: ir.Type, offsets: ir.Value, bound: ir.Value
    ) -> tuple[ir.Value, ir.Value, ir.Value]:
        """Each block builds its rows, one after another, into temporaries at its
        offset (columns, ordered, and values), counting them; the counts summed into
        positions, each block's rows are copied to their place."""
        self.mode = "onepass"
        nblocks, per = self._partition()
        idx_t = ir.IndexType.get()
        built = self._blocks(
            {
                "counts": tensor.empty([self.nrows], idx_t),
                "crd": tensor.empty([bound], crd_t),
                "vals": tensor.empty([bound], self.elt),
            },
            lambda b: {"cursor": _get(offsets, b)},
        )
        positions, total, starts = prefix_positions(built["counts"], self.nrows, pos_t)

        def block(b: ir.Value, s: State) -> State:
            r0, r1 = self._rows_of(b, per)
            src = _get(offsets, b)
            dst = load_index(starts, arith.minsi(r0, r1))  # blocks past the last row: none
            length = arith.subi(load_index(starts, r1), dst)

            def copy(t: ir.Value, st: State) -> State:
                at, to = add(src, t), add(dst, t)
                return {
                    "crd": _put(st["crd"], to, _get(built["crd"], at)),
                    "vals": _put(st["vals"], to, _get(built["vals"], at)),
                }

            return for_state(index(0), length, s, copy)

        out = {"crd": tensor.empty([total], crd_t), "vals": tensor.empty([total], self.elt)}
        out = for_state(index(0), nblocks, out, block, parallel=True)
        return positions, out["crd"], out["vals"]

    # -- blocks of rows ------------------------------------------------------------
    def _partition(self) -> tuple[ir.Value, ir.Value]:
        """``(blocks, rows per block)``: :data:`BLOCKS` blocks of consecutive rows (fewer
        where there are fewer rows; more where a block would pass :data:`BLOCK_ROWS`
        rows, whose 32-bit stamps would wrap)."""
        wanted = arith.maxsi(index(BLOCKS), arith.ceildivsi(self.nrows, index(BLOCK_ROWS)))
        nblocks = arith.minsi(self.nrows, wanted)
        return nblocks, arith.ceildivsi(self.nrows, arith.maxsi(nblocks, index(1)))

    def _rows_of(self, b: ir.Value, per: ir.Value) -> tuple[ir.Value, ir.Value]:
        r0 = mul(b, per)
        return r0, arith.minsi(add(r0, per), self.nrows)

    def _blocks(self, outputs: State, start: Callable[[ir.Value], State] | None = None) -> State:
        """The rows, by blocks in parallel, each block with its own workspaces (and
        ``start(block)``'s values, carried over its rows)."""
        nblocks, per = self._partition()

        def block(b: ir.Value, s: State) -> State:
            r0, r1 = self._rows_of(b, per)
            self.first = r0
            state = {**s, **self._workspaces(), **(start(b) if start else {})}
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
            return linalg_fill(zero_of(element), outs=[tensor.empty([self.ncols], element)])

        idx_t = ir.IndexType.get()
        stamps = ir.IntegerType.get_signless(32)
        pair = self._paired()
        if pair is not None:  # one array: tag[j] at 2j, the value's bits at 2j + 1
            pairs = tensor.empty([mul(self.ncols, index(2))], pair)
            ws = {"tag": linalg_fill(zero_of(pair), outs=[pairs])}
        elif plan.intersect:
            ws = {f"tag{s.number}": array(stamps) for s in plan.sparse[:-1]}
        else:
            ws = {"tag": array(stamps)}
        if pair is None and self.mode != "count":
            if plan.kind == "product":
                ws["w"] = array(self.elt)
            else:
                ws |= {f"ws{s.number}": array(self._element(s)) for s in plan.sparse}
        if self.mode == "dense":
            ws["list"] = array(idx_t)
        if self.mode in ("fill", "onepass") and self._ordered():
            # one bit per column: orders a long row without sorting it (.sort.order_marked)
            words = arith.ceildivui(self.ncols, index(64))
            i64 = ir.IntegerType.get_signless(64)
            ws["bits"] = linalg_fill(zero_of(i64), outs=[tensor.empty([words], i64)])
            above = summary_words(self.ncols)
            ws["summary"] = linalg_fill(zero_of(i64), outs=[tensor.empty([above], i64)])
        return ws

    def _paired(self) -> ir.Type | None:
        """The integer type of a product's paired workspace, or None: in the one-pass
        build, each column's stamp and accumulated value side by side in one array
        (``2j``, ``2j + 1``), so that a multiply-add touches one cache line of
        workspace, not two; for values of 32 or 64 bits, whose integer of the same
        width holds a stamp. A/B in one process on a 2-core Zen 4 EPYC (``A @ A``,
        rows unordered): 1.03x geomean on the ten real matrices of
        ``benchmarks/cpu.py`` (4elt 1.14x, ca-HepPh 1.10x), ordered rows 1.01x;
        not in the fill pass, where bcsstk16's ordered product lost 8%."""
        if self.plan.kind != "product" or self.mode != "onepass":
            return None
        width = _bit_width(self.elt)
        return ir.IntegerType.get_signless(width) if width in (32, 64) else None

    def _tag_at(self, s: State, j: ir.Value) -> ir.Value:
        """Column ``j``'s stamp (32-bit)."""
        pair = self._paired()
        if pair is None:
            return _get(s["tag"], j)
        tag = _get(s["tag"], mul(j, index(2)))
        return tag if pair.width == 32 else arith.trunci(ir.IntegerType.get_signless(32), tag)

    def _stamped(self, s: State, j: ir.Value) -> State:
        pair = self._paired()
        if pair is None:
            return {**s, "tag": _put(s["tag"], j, self.stamp)}
        stamp = self.stamp if pair.width == 32 else arith.extui(pair, self.stamp)
        return {**s, "tag": _put(s["tag"], mul(j, index(2)), stamp)}

    def _value_at(self, s: State, j: ir.Value) -> ir.Value:
        if self._paired() is None:
            return _get(s["w"], j)
        return arith.bitcast(self.elt, _get(s["tag"], add(mul(j, index(2)), index(1))))

    def _with_value(self, s: State, j: ir.Value, value: ir.Value) -> State:
        pair = self._paired()
        if pair is None:
            return {**s, "w": _put(s["w"], j, value)}
        bits = arith.bitcast(pair, value)
        return {**s, "tag": _put(s["tag"], add(mul(j, index(2)), index(1)), bits)}

    def _ordered(self) -> bool:
        """Whether the sparse output's columns must be in order within a row."""
        layout = self.plan.output.layout
        return layout is not None and not layout.levels[1].nonordered

    def _element(self, s: RowOperand) -> ir.Type:
        return self.readers[s.number].element

    # -- one row -------------------------------------------------------------------
    def _row(self, r: ir.Value, s: State) -> State:
        self.idx = {self.plan.row: r}
        # 32-bit stamps, counted from the block's first row: the tags are half the size
        # of index-wide ones, and each block's own (see _partition)
        within = add(arith.subi(r, self.first), index(1))
        self.stamp = arith.index_cast(ir.IntegerType.get_signless(32), within)
        if self.mode == "fill":
            self.lo = load_index(self.starts, r)
        else:
            self.lo = s["cursor"] if self.mode == "onepass" else index(0)
        s = {**s, "n": index(0)}
        s = self._scatter_merge(r, s) if self.plan.kind == "merge" else self._scatter_product(r, s)
        n = s.pop("n")
        if self.mode == "count":
            return {**s, "counts": _put(s["counts"], r, n)}
        if self.mode in ("fill", "onepass"):
            hi = add(self.lo, n)
            if "bits" in s:  # an ordered level (a nonordered one keeps the order found)
                ordered = order_marked(s["crd"], self.lo, hi, s["bits"], s["summary"])
                s["crd"], s["bits"], s["summary"] = ordered
            s = for_state(self.lo, hi, s, lambda p, st: self._combine(_load_crd(st, p), p, st))
            if self.mode == "onepass":
                s = {**s, "counts": _put(s["counts"], r, n), "cursor": hi}
            return s

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

    def _record(self, j: ir.Value, s: State, grow: ir.Value | None = None) -> State:
        """Record column ``j`` at the row's next slot; the count grows by one, or by
        ``grow`` (an ``i1``: whether ``j`` is new), where the one-pass build records
        every column it meets without a branch. That slot is in the block's
        temporaries: a row's slots so far are fewer than its multiply-adds so far,
        which the temporaries hold; a slot written for a column seen before is the
        next new column's, or past the row's count. Whether a column is new is as
        good as random on graphs (a branch mispredicted at every other
        multiply-add); see the module."""
        n = s["n"]
        if self.mode in ("fill", "onepass"):
            crd_t = ir.RankedTensorType(s["crd"].type).element_type
            s = {**s, "crd": _put(s["crd"], add(self.lo, n), cast(j, crd_t))}
        elif self.mode == "dense":
            s = {**s, "list": _put(s["list"], n, j)}
        step = index(1) if grow is None else arith.index_castui(ir.IndexType.get(), grow)
        return {**s, "n": add(n, step)}

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
                fresh = arith.cmpi(Pred.ne, self._tag_at(st2, j), self.stamp)
                if self.mode == "onepass":  # no branch (see _record)
                    st2 = self._record(j, self._stamped(st2, j), fresh)
                else:
                    st2 = if_state(fresh, st2, lambda x: self._record(j, self._stamped(x, j)))
                if self.mode == "count":
                    return st2
                self.idx[self.plan.col] = j
                current = arith.select(fresh, self._initial(j, st2), self._value_at(st2, j))
                args = self._args({a.number: _get(a_vals, qa), b.number: _get(b_vals, qb)},
                                  current)  # fmt: skip
                new = bodies.emit_scalar(self.block, args, self.idx)
                return self._with_value(st2, j, new)

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
            value = self._value_at(s, j)
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


def _bit_width(element: ir.Type) -> int:
    if isinstance(element, ir.IntegerType):
        return int(ir.IntegerType(element).width)
    for kind, width in ((ir.F32Type, 32), (ir.F64Type, 64)):
        if isinstance(element, kind):
            return width
    return 0


def _single(layout: Layout | None) -> Layout:
    assert layout is not None  # the plan's sparse operands have a single layout
    return layout


def _get2(t: ir.Value, i: ir.Value, j: ir.Value) -> ir.Value:
    return tensor.extract(t, [i, j])


def _load_crd(s: State, p: ir.Value) -> ir.Value:
    """An output coordinate the row recorded, as an index (narrow ones unsigned: column
    129 of an 8-bit one, read as -127, addressed the workspaces before their start)."""
    return load_coordinate(s["crd"], p)


def emit_rows(plan: RowPlan) -> ir.Value:
    """The kernel's result (the new output tensor), emitted at the insertion point."""
    return RowEmitter(plan).emit()
