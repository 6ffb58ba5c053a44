"""Order a segment of a rank-1 integer tensor in place, in stage II IR (scf on tensors).

Used for the coordinates of one row of a computed sparse output, which a
row workspace discovers out of order. A long row's columns are marked in a
two-level bitmap (:func:`mark`): one bit per column in ``bits`` (i64
words of 64 columns) and one bit per word of ``bits`` in ``summary`` (words
of 4096 columns). :func:`order_marked` orders a short segment (at most
:data:`INSERTION_MAX` entries, the common case for sparse rows) by
insertion sort; a longer one whose columns span at most
:data:`WORDS_PER_ENTRY` summary words per entry by walking the summary's
set bits to the words of ``bits`` that have any, and those words' set bits
(a count-trailing-zeros per word and per entry: its cost grows with the
entries and the span over 4096, not the span over 64); else, a row spread
thin over tens of millions of columns, by heapsort (``O(n log n)``, no
recursion or extra memory). It zeroes the words it set for the next row.
The entries are unsigned, as upstream reads narrow coordinates: an 8-bit one
holds columns 0 to 255 (signed, column 129 was -127, which the bitmap's words
were addressed with: a write before the bitmap, a segfault).
All are ``scf.while``/``scf.for`` loops carrying the tensors, which
bufferization turns into in-place updates of the buffers. On SpGEMM's long
rows the walk is much faster than heapsort: a circuit matrix's ``A @ A``
spent 275 of its 303 ms sorting. A one-level walk (every word of the span)
cost ``A @ A`` of the p2p-Gnutella31 graph 10 word loads per entry, most of
its time; the summary skips the empty words.
"""

from __future__ import annotations

from collections.abc import Callable

from mlir import ir
from mlir.dialects import arith, math, scf, tensor

from sparsecomp.lowering.loops import (
    Carried,
    add,
    for_loop,
    if_then,
    index,
    to_index,
    while_loop,
)

INSERTION_MAX = 32
#: A long segment whose columns span at most this many summary words (4096
#: columns each) per entry is ordered by walking the bitmap (well under 1 ns a
#: summary word, a few ns per entry) instead of by heapsort (about 5 ns per entry
#: and heap level).
WORDS_PER_ENTRY = 16
#: A long segment whose columns span at most this many words of ``bits`` per entry
#: walks every word of the span (no summary to build).
DENSE_WORDS = 4
#: Columns per word of ``bits``, and per word of ``summary``.
WORD, SUMMARY_WORD = 64, 64 * 64

Pred = arith.CmpIPredicate


def _get(t: ir.Value, i: ir.Value) -> ir.Value:
    return tensor.extract(t, [i])


def _put(t: ir.Value, i: ir.Value, v: ir.Value) -> ir.Value:
    return tensor.insert(v, t, [i])


def _insertion(t: ir.Value, lo: ir.Value, hi: ir.Value) -> ir.Value:
    def outer(p: ir.Value, vals: Carried) -> Carried:
        key = _get(vals[0], p)

        def cond(args: Carried) -> tuple[ir.Value, Carried]:
            q, cur = args
            prev = _get(cur, arith.maxsi(arith.subi(q, index(1)), lo))  # in bounds at q = lo
            keep = arith.andi(arith.cmpi(Pred.sgt, q, lo), arith.cmpi(Pred.ugt, prev, key))
            return keep, [q, cur]

        def shift(args: Carried) -> Carried:
            q, cur = args
            before = arith.subi(q, index(1))
            return [before, _put(cur, q, _get(cur, before))]

        q, cur = while_loop([p, vals[0]], cond, shift)
        return [_put(cur, q, key)]

    return for_loop(add(lo, index(1)), hi, index(1), [t], outer)[0]


def _sift_down(t: ir.Value, base: ir.Value, root: ir.Value, end: ir.Value) -> ir.Value:
    """Restore the max-heap below ``root`` in ``t[base : base + end]``."""

    def cond(args: Carried) -> tuple[ir.Value, Carried]:
        r, cur = args
        child = add(arith.muli(r, index(2)), index(1))
        return arith.cmpi(Pred.slt, child, end), [r, cur]

    def step(args: Carried) -> Carried:
        r, cur = args
        child = add(arith.muli(r, index(2)), index(1))
        right = add(child, index(1))
        right_ok = arith.cmpi(Pred.slt, right, end)
        c_val = _get(cur, add(base, child))
        r_val = _get(cur, add(base, arith.select(right_ok, right, child)))
        take_right = arith.andi(right_ok, arith.cmpi(Pred.ult, c_val, r_val))
        big = arith.select(take_right, right, child)
        big_val = arith.select(take_right, r_val, c_val)
        root_val = _get(cur, add(base, r))
        swap = arith.cmpi(Pred.ult, root_val, big_val)

        def do_swap(vals: Carried) -> Carried:
            moved = _put(vals[0], add(base, r), big_val)
            return [_put(moved, add(base, big), root_val), big]

        out, nxt = if_then(swap, [cur, end], do_swap)  # no swap: root := end stops
        return [nxt, out]

    return while_loop([root, t], cond, step)[1]


def _heapsort(t: ir.Value, lo: ir.Value, hi: ir.Value) -> ir.Value:
    n = arith.subi(hi, lo)
    half = arith.divui(n, index(2))

    def build(k: ir.Value, vals: Carried) -> Carried:
        root = arith.subi(arith.subi(half, k), index(1))
        return [_sift_down(vals[0], lo, root, n)]

    heap = for_loop(index(0), half, index(1), [t], build)[0]

    def extract(k: ir.Value, vals: Carried) -> Carried:
        end = arith.subi(arith.subi(n, k), index(1))
        cur = vals[0]
        top, last = _get(cur, lo), _get(cur, add(lo, end))
        cur = _put(_put(cur, lo, last), add(lo, end), top)
        return [_sift_down(cur, lo, index(0), end)]

    return for_loop(index(0), arith.subi(n, index(1)), index(1), [heap], extract)[0]


def _words(bits: ir.Value, j: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Column ``j``'s word in a bitmap of i64 words, and its bit in it."""
    i64 = ir.IntegerType.get_signless(64)
    word = arith.shrui(j, index(6))
    bit = arith.shli(arith.constant(i64, 1), arith.index_cast(i64, arith.andi(j, index(63))))
    return word, bit


def summary_words(columns: ir.Value) -> ir.Value:
    """How many words the summary of a bitmap over ``columns`` columns has."""
    return arith.ceildivui(columns, index(SUMMARY_WORD))


def mark(bits: ir.Value, j: ir.Value) -> ir.Value:
    """``bits`` with column ``j``'s bit set."""
    word, bit = _words(bits, j)
    return _put(bits, word, arith.ori(_get(bits, word), bit))


def _mark_each(bits: ir.Value, t: ir.Value, lo: ir.Value, hi: ir.Value) -> ir.Value:
    """``bits`` with the columns ``t[lo:hi]`` marked."""

    def body(p: ir.Value, vals: Carried) -> Carried:
        return [mark(vals[0], to_index(_get(t, p), unsigned=True))]

    return for_loop(lo, hi, index(1), [bits], body)[0]


def _summarize(summary: ir.Value, t: ir.Value, lo: ir.Value, hi: ir.Value) -> ir.Value:
    """``summary`` with the bit of each word of ``bits`` that the columns ``t[lo:hi]`` are in."""

    def body(p: ir.Value, vals: Carried) -> Carried:
        word = arith.shrui(to_index(_get(t, p), unsigned=True), index(6))
        above, flag = _words(vals[0], word)
        return [_put(vals[0], above, arith.ori(_get(vals[0], above), flag))]

    return for_loop(lo, hi, index(1), [summary], body)[0]


def _set_bits(
    word: ir.Value, carried: Carried, each: Callable[[ir.Value, Carried], Carried]
) -> Carried:
    """``each(bit, values)`` for every set bit of the i64 ``word``, lowest first."""
    i64 = ir.IntegerType.get_signless(64)
    zero = arith.constant(i64, 0)

    def cond(args: Carried) -> tuple[ir.Value, Carried]:
        return arith.cmpi(Pred.ne, args[0], zero), args

    def step(args: Carried) -> Carried:
        rest, *vals = args
        low = arith.index_cast(ir.IndexType.get(), math.cttz(rest))
        return [arith.andi(rest, arith.subi(rest, arith.constant(i64, 1))), *each(low, vals)]

    return while_loop([word, *carried], cond, step)[1:]


def _emit_word(w: ir.Value, vals: Carried) -> Carried:
    """``[t, at, bits]``: the columns of word ``w`` of ``bits`` written at ``t[at:]``,
    ascending, ``at`` moved past them, the word zeroed."""
    cur, at, bitmap = vals
    elt = ir.RankedTensorType(cur.type).element_type
    base = arith.muli(w, index(WORD))

    def column(bit: ir.Value, entry: Carried) -> Carried:
        cur, at = entry
        return [_put(cur, at, arith.index_cast(elt, add(base, bit))), add(at, index(1))]

    cur, at = _set_bits(_get(bitmap, w), [cur, at], column)
    return [cur, at, _put(bitmap, w, arith.constant(ir.IntegerType.get_signless(64), 0))]


def _walk_words(
    t: ir.Value, lo: ir.Value, first: ir.Value, last: ir.Value, bits: ir.Value
) -> Carried:
    """``t[lo:...]`` := the columns whose bits are set in words ``first..last``, ascending;
    those words are zeroed. Returns ``[t, bits]``."""
    cur, _, bitmap = for_loop(first, add(last, index(1)), index(1), [t, lo, bits], _emit_word)
    return [cur, bitmap]


def _walk_summary(
    t: ir.Value, lo: ir.Value, first: ir.Value, last: ir.Value, bits: ir.Value, summary: ir.Value
) -> Carried:
    """``t[lo:...]`` := the columns whose bits are set, ascending, found through summary
    words ``first..last``; the words visited are zeroed. Returns ``[t, bits, summary]``."""

    def summary_body(s: ir.Value, vals: Carried) -> Carried:
        cur, at, bitmap, top = vals
        words = arith.muli(s, index(64))

        def word_body(low: ir.Value, inner: Carried) -> Carried:
            return _emit_word(add(words, low), inner)

        cur, at, bitmap = _set_bits(_get(top, s), [cur, at, bitmap], word_body)
        zero = arith.constant(ir.IntegerType.get_signless(64), 0)
        return [cur, at, bitmap, _put(top, s, zero)]

    loop = for_loop(first, add(last, index(1)), index(1), [t, lo, bits, summary], summary_body)
    cur, _, bitmap, top = loop
    return [cur, bitmap, top]


def order_marked(
    t: ir.Value, lo: ir.Value, hi: ir.Value, bits: ir.Value, summary: ir.Value
) -> Carried:
    """``[t, bits, summary]``: ``t[lo:hi]`` (distinct columns) ascending; ``bits`` and
    ``summary`` are all zero before and after.
    Insertion sort when short; else a walk over every word of the span when it has
    at most :data:`DENSE_WORDS` per entry; else a walk over the words the summary
    says have bits, when the columns span at most :data:`WORDS_PER_ENTRY` summary
    words per entry; else heapsort. The walks first mark the entries' bits (and
    summary bits) from ``t[lo:hi]``: a row's scatter need not mark each column it
    finds, and a short row marks none."""
    n = arith.subi(hi, lo)
    short = arith.cmpi(Pred.sle, n, index(INSERTION_MAX))
    types = [t.type, bits.type, summary.type]
    op = scf.IfOp(short, types, has_else=True)
    with ir.InsertionPoint(op.then_block):
        ordered = _insertion(t, lo, hi)
        scf.YieldOp([ordered, bits, summary])
    with ir.InsertionPoint(op.else_block):
        head = _get(t, lo)

        def bounds(p: ir.Value, vals: Carried) -> Carried:
            x = _get(t, p)
            return [arith.minui(vals[0], x), arith.maxui(vals[1], x)]

        low, high = for_loop(add(lo, index(1)), hi, index(1), [head, head], bounds)
        low, high = (to_index(v, unsigned=True) for v in (low, high))
        first, last = arith.shrui(low, index(6)), arith.shrui(high, index(6))
        words = add(arith.subi(last, first), index(1))
        dense = arith.cmpi(Pred.sle, words, arith.muli(n, index(DENSE_WORDS)))
        walk = scf.IfOp(dense, types, has_else=True)
        with ir.InsertionPoint(walk.then_block):
            scf.YieldOp([*_walk_words(t, lo, first, last, _mark_each(bits, t, lo, hi)), summary])
        with ir.InsertionPoint(walk.else_block):
            top, end = arith.shrui(low, index(12)), arith.shrui(high, index(12))
            span = add(arith.subi(end, top), index(1))
            few = arith.cmpi(Pred.sle, span, arith.muli(n, index(WORDS_PER_ENTRY)))
            inner = scf.IfOp(few, types, has_else=True)
            with ir.InsertionPoint(inner.then_block):
                marked = _summarize(summary, t, lo, hi)
                scf.YieldOp(_walk_summary(t, lo, top, end, _mark_each(bits, t, lo, hi), marked))
            with ir.InsertionPoint(inner.else_block):
                scf.YieldOp([_heapsort(t, lo, hi), bits, summary])
            scf.YieldOp(list(inner.results))
        scf.YieldOp(list(walk.results))
    return list(op.results)
