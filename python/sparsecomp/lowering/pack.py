"""Packed copies of a dense matrix's column panel, and register-tile transposes.

A gathered input of an SpMM nest (``B`` in ``C[i, j] += A[i, k] B[k, j]``)
is read a vector along ``j`` at rows ``k`` the sparse operand picks. The nest
reads it from a contiguous copy of the current panel of columns ``[lo, hi)``
(see ``NestEmitter.panels``):

* :func:`pack_rows`: ``B`` row-major (``B[k, j]``): each row's piece is
  copied a vector at a time, rows in parallel;
* :func:`pack_columns`: ``B`` given transposed, as the caller holds it
  (``X[j, k]``, a linear layer's input, ``Y = X W^T``): square tiles of
  ``lanes x lanes`` elements are read a row of ``X`` at a time, transposed
  in registers (:func:`transpose_tile`) and written as rows of the copy,
  tiles of ``k`` in parallel. The copy is ``B``'s panel, row-major, so the
  nest reads it as it reads a packed ``B``; the transpose costs no pass of
  its own.

:func:`transpose_tile` also stores a jammed block row's (or a group of
rows', :mod:`.jam`) accumulators into a transposed output (``Y[j, i]``:
``R`` rows of ``i`` by a vector of ``j`` become a vector of ``R``
consecutive elements of each ``Y`` row). It emits ``vector.shuffle``
ops (see there).
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, tensor, vector

from sparsecomp.lowering.loops import Carried, add, for_loop, if_else, index
from sparsecomp.lowering.operands import zero_of


def _row_map() -> ir.AffineMap:
    return ir.AffineMap.get_minor_identity(2, 1)


def _mask_type(lanes: int) -> ir.VectorType:
    return ir.VectorType.get([lanes], ir.IntegerType.get_signless(1))


def pack_rows(
    source: ir.Value, lo: ir.Value, hi: ir.Value, lanes: int, parallel: bool = True
) -> ir.Value:
    """Columns ``[lo, hi)`` of the row-major matrix ``source`` as a new contiguous
    ``rows x (hi - lo)`` tensor, copied a vector at a time, rows in parallel
    (unless inside a parallel loop already)."""
    ty = ir.RankedTensorType(source.type)
    rows, width = tensor.dim(source, index(0)), arith.subi(hi, lo)
    vt = ir.VectorType.get([lanes], ty.element_type)
    fill = zero_of(ty.element_type)

    def row(r: ir.Value, values: Carried) -> Carried:
        def column(c: ir.Value, inner: Carried) -> Carried:
            mask = vector.create_mask(_mask_type(lanes), [arith.subi(width, c)])
            v = vector.transfer_read(vt, source, [r, add(lo, c)], _row_map(), fill, [False],
                                     mask=mask)  # fmt: skip
            into = inner[0]
            return [vector.transfer_write(into.type, v, into, [r, c], _row_map(), [False],
                                          mask=mask)]  # fmt: skip

        return for_loop(index(0), width, index(lanes), values, column)

    empty = tensor.empty([rows, width], ty.element_type)
    return for_loop(index(0), rows, index(1), [empty], row, parallel=parallel)[0]


def transpose_tile(rows: list[ir.Value]) -> list[ir.Value]:
    """``len(rows)`` vectors of ``L`` lanes as ``L`` vectors of ``len(rows)``
    lanes: element ``r`` of result ``l`` is element ``l`` of input ``r``.

    Four or eight rows of a multiple of four lanes take :func:`_in_lanes`;
    other tiles :func:`_by_rounds`.
    """
    lanes = ir.VectorType(rows[0].type).shape[0]
    if len(rows) in (4, 8) and lanes % 4 == 0:
        return _in_lanes(rows, lanes)
    return _by_rounds(rows, lanes)


def _in_lanes(rows: list[ir.Value], lanes: int) -> list[ir.Value]:
    """The x86 transpose: 4 x 4 blocks within each group of four lanes (a
    128-bit lane of ``f32``), by two rounds of interleaves (``unpcklps``,
    ``unpckhps``, then ``shufps``), then (eight rows) one 2-operand shuffle
    per result joining the halves. An ``8 x 16`` ``f32`` tile: 24 shuffles."""
    n, groups = lanes, range(lanes // 4)

    def shuffle(x: ir.Value, y: ir.Value, picks: tuple[int, int, int, int]) -> ir.Value:
        # picks index the four lanes of a group: 0-3 in x, 4-7 in y
        mask = [4 * g + p if p < 4 else n + 4 * g + p - 4 for g in groups for p in picks]
        return vector.shuffle(x, y, mask)

    quads = []
    for q in range(0, len(rows), 4):
        a, b, c, d = rows[q : q + 4]
        ab_lo, ab_hi = shuffle(a, b, (0, 4, 1, 5)), shuffle(a, b, (2, 6, 3, 7))
        cd_lo, cd_hi = shuffle(c, d, (0, 4, 1, 5)), shuffle(c, d, (2, 6, 3, 7))
        # column 4g + e of the four rows, in group g of quad[e]
        quads.append([
            shuffle(ab_lo, cd_lo, (0, 1, 4, 5)), shuffle(ab_lo, cd_lo, (2, 3, 6, 7)),
            shuffle(ab_hi, cd_hi, (0, 1, 4, 5)), shuffle(ab_hi, cd_hi, (2, 3, 6, 7)),
        ])  # fmt: skip
    out = []
    for lane in range(lanes):
        g, e = divmod(lane, 4)
        first = quads[0][e]
        if len(quads) == 1:
            out.append(vector.shuffle(first, first, [4 * g + i for i in range(4)]))
        else:
            picks = [4 * g + i for i in range(4)] + [n + 4 * g + i for i in range(4)]
            out.append(vector.shuffle(first, quads[1][e], picks))
    return out


def _by_rounds(rows: list[ir.Value], lanes: int) -> list[ir.Value]:
    """:func:`transpose_tile` for any tile.

    By ``log2 P`` rounds of interleaving shuffles (``P``: the rows rounded up
    to a power of two, the missing ones zero): round ``s`` merges pairs of
    vectors a chunk of ``2**s`` elements at a time, so that the last vector
    holds the result's vectors one after another, each taken by a final
    shuffle. Two-operand shuffles of whole vectors are what x86 has
    instructions for (``vpermt2ps``); ``vector.transpose`` between
    ``vector.insert`` and ``vector.extract`` was folded by the canonicalizer
    into element-by-element ``from_elements``, 1400 scalar moves per
    ``8 x 16`` tile.
    """
    count, padded = len(rows), 1
    while padded < count:
        padded *= 2
    if padded > count:
        vt = ir.VectorType(rows[0].type)
        zero = arith.constant(vt, ir.DenseElementsAttr.get_splat(vt, _zero_attr(vt.element_type)))
        rows = [*rows, *([zero] * (padded - count))]
    group = 1
    while len(rows) > 1:
        size = lanes * group  # elements of each operand
        mask = [
            part * size + chunk * group + e
            for chunk in range(lanes)
            for part in (0, 1)
            for e in range(group)
        ]
        rows = [vector.shuffle(rows[i], rows[i + 1], mask) for i in range(0, len(rows), 2)]
        group *= 2
    (whole,) = rows
    return [
        vector.shuffle(whole, whole, list(range(lane * padded, lane * padded + count)))
        for lane in range(lanes)
    ]


def _zero_attr(elt: ir.Type) -> ir.Attribute:
    if isinstance(elt, ir.FloatType):
        return ir.FloatAttr.get(elt, 0.0)
    return ir.IntegerAttr.get(elt, 0)


def pack_columns(
    source: ir.Value, lo: ir.Value, hi: ir.Value, lanes: int, parallel: bool = True
) -> ir.Value:
    """Rows ``[lo, hi)`` of the row-major matrix ``source`` (``n x K``),
    transposed: a new contiguous ``K x (hi - lo)`` tensor, ``out[k, c] =
    source[lo + c, k]``, by ``lanes x lanes`` tiles transposed in registers,
    tiles of ``k`` in parallel (unless inside a parallel loop already: then
    a stripe of ``lanes`` rows at a time, all of its ``k`` tiles, so that the
    reads stream along ``lanes`` rows of ``source``, not along every row of
    the panel; BERT's 768x3072 FFN-out weight in ``bsr:8x1`` at 90%, 1024
    tokens, on a 2-core Zen 4 EPYC: 4.2-5.0 ms -> 3.7-3.9, the other layers
    1-4% faster).

    A whole tile is read and written with plain vector loads and stores; a
    tile at an edge is masked, its rows and columns past the edges read and
    written at the last one that exists through all-false masks. (Whole
    tiles unmasked took BERT's linear kernels 0-15% faster on the 2-core
    AVX-512 Xeon, in an in-process A/B: the pack is mostly bound by reading
    ``X``.)"""
    ty = ir.RankedTensorType(source.type)
    elt = ty.element_type
    depth, width = tensor.dim(source, index(1)), arith.subi(hi, lo)
    vt = ir.VectorType.get([lanes], elt)
    fill = zero_of(elt)
    last_k, last_c = arith.subi(depth, index(1)), arith.subi(width, index(1))

    def one_tile(kt: ir.Value, ct: ir.Value, into: ir.Value) -> ir.Value:
        k_left, c_left = arith.subi(depth, kt), arith.subi(width, ct)
        whole = arith.andi(
            arith.cmpi(arith.CmpIPredicate.uge, k_left, index(lanes)),
            arith.cmpi(arith.CmpIPredicate.uge, c_left, index(lanes)),
        )
        return if_else(
            whole,
            [into.type],
            lambda: [whole_tile(kt, ct, into)],
            lambda: [edge_tile(kt, ct, k_left, c_left, into)],
        )[0]

    def whole_tile(kt: ir.Value, ct: ir.Value, into: ir.Value) -> ir.Value:
        rows = [
            vector.transfer_read(
                vt, source, [add(lo, add(ct, index(a))), kt], _row_map(), fill, [True]
            )
            for a in range(lanes)
        ]
        for b, column in enumerate(transpose_tile(rows)):
            into = vector.transfer_write(into.type, column, into, [add(kt, index(b)), ct],
                                         _row_map(), [True])  # fmt: skip
        return into

    def edge_tile(
        kt: ir.Value, ct: ir.Value, k_left: ir.Value, c_left: ir.Value, into: ir.Value
    ) -> ir.Value:
        rows = []
        for a in range(lanes):
            inside = arith.cmpi(arith.CmpIPredicate.ult, index(a), c_left)
            mask = vector.create_mask(_mask_type(lanes), [arith.select(inside, k_left, index(0))])
            at = add(lo, arith.minui(add(ct, index(a)), last_c))
            rows.append(vector.transfer_read(vt, source, [at, kt], _row_map(), fill, [False],
                                             mask=mask))  # fmt: skip
        for b, column in enumerate(transpose_tile(rows)):
            inside = arith.cmpi(arith.CmpIPredicate.ult, index(b), k_left)
            mask = vector.create_mask(_mask_type(lanes), [arith.select(inside, c_left, index(0))])
            k = arith.minui(add(kt, index(b)), last_k)
            into = vector.transfer_write(into.type, column, into, [k, ct], _row_map(),
                                         [False], mask=mask)  # fmt: skip
        return into

    empty = tensor.empty([depth, width], elt)
    # in parallel: tiles of k outer (one per thread); else stripes of lanes rows outer
    outer, inner = (depth, width) if parallel else (width, depth)

    def stripe(a: ir.Value, values: Carried) -> Carried:
        def tile(b: ir.Value, tiles: Carried) -> Carried:
            kt, ct = (a, b) if parallel else (b, a)
            return [one_tile(kt, ct, tiles[0])]

        return for_loop(index(0), inner, index(lanes), values, tile)

    return for_loop(index(0), outer, index(lanes), [empty], stripe, parallel=parallel)[0]
