"""One loop (or none) per storage level, following :mod:`sparsecomp.formats.storage`.

Given the parent position ``p`` of a level, each format yields its child
positions ``q`` and their level coordinates:

=================== ============================================ ==================
level               positions ``q``                              coordinate
=================== ============================================ ==================
dense_fixed         ``p * size + c`` for ``c < size``            ``c``
dense_varied        ``pos[p] .. pos[p+1] - 1``                   ``q - pos[p]``
compressed_varied   ``pos[p] .. pos[p+1] - 1``                   ``crd[q]``
loose_compressed    ``pos[2p] .. pos[2p+1] - 1``                 ``crd[q]``
compressed_fixed    ``p * W + s`` for ``s < W``, skipping pads   ``crd[q]``
singleton           ``p`` (no loop)                              ``crd[p]``
structured[n,m]     ``p * n + s`` for ``s < n``                  ``crd[q]``
=================== ============================================ ==================

ELL padding (coordinate ``-1``) is skipped with an ``scf.if``; n:m padding
holds zero values at coordinates inside the group, which need no test
except in a partial last group (the dimension is not a multiple of ``m``):
there a slot whose column lies past the edge is skipped (its coordinate is
compared with the storage's ``level_bound``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from mlir import ir
from mlir.dialects import arith, tensor

from sparsecomp.lowering.loops import (
    Carried,
    add,
    for_loop,
    if_else,
    if_then,
    index,
    load_coordinate,
    load_index,
    load_position,
    mul,
)
from sparsecomp.lowering.slices import cut_range

if TYPE_CHECKING:
    from sparsecomp.formats.layout import Layout


class Storage(Protocol):
    """What a level loop reads: the layout, its buffers and its level sizes."""

    layout: Layout
    pos: dict[int, ir.Value]
    crd: dict[int, ir.Value]

    def level_size(self, lv: int) -> ir.Value: ...

    def level_bound(self, lv: int, size: ir.Value) -> ir.Value: ...


Inner = Callable[[ir.Value, ir.Value, Carried], Carried]


def _constant(value: ir.Value) -> int | None:
    """``value``'s integer if an ``arith.constant`` defines it."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.name != "arith.constant":
        return None
    return ir.IntegerAttr(owner.attributes["value"]).value


def _width(em: Storage, lv: int, parents: ir.Value) -> ir.Value:
    level = em.layout.levels[lv]
    if level.kind == "structured":
        return index(level.n)
    if level.width is not None:
        return index(level.width)
    crd = em.crd[lv]
    return arith.divui(tensor.dim(crd, index(0)), parents)


def _parents(em: Storage, lv: int) -> ir.Value:
    """How many parent positions level ``lv`` has (levels above it are fixed-size)."""
    count = index(1)
    for above in range(lv):
        count = mul(count, em.level_size(above))
    return count


def dense_loop(
    em: Storage,
    lv: int,
    size: ir.Value,
    carried: Carried,
    body: Callable[[ir.Value, Carried], Carried],
    parallel: bool = False,
) -> Carried:
    """The loop over the coordinates of ``dense`` level ``lv`` (``size`` of them, fewer
    at the matrix's edge: :meth:`Storage.level_bound`); ``body(c, carried)``.

    A block level (``d mod R``) clamped at the edge runs whole blocks (all but
    the last row or column of blocks) with a loop of constant trips, which LLVM
    unrolls, and only the edge's blocks with the clamped one: BSR 3x3's SpMV
    took 0.11-0.13 ms instead of 0.21-0.22 on bcsstk16 (4884 rows).
    """
    bound = em.level_bound(lv, size)
    if bound == size or _constant(size) is None or parallel:
        return for_loop(index(0), bound, index(1), carried, body, parallel)
    whole = arith.cmpi(arith.CmpIPredicate.eq, bound, size)
    types = [v.type for v in carried]

    def loop(upper: ir.Value) -> Callable[[], Carried]:
        return lambda: for_loop(index(0), upper, index(1), carried, body)

    return if_else(whole, types, loop(size), loop(bound))


def position_range(em: Storage, lv: int, p: ir.Value) -> tuple[ir.Value, ir.Value]:
    """``(lo, hi)``: the positions of level ``lv`` (one with positions: compressed,
    dense_varied, loose) below parent position ``p``."""
    pos = em.pos[lv]
    if em.layout.levels[lv].name == "loose_compressed":
        at = mul(p, index(2))
        return load_position(pos, at), load_position(pos, add(at, index(1)))
    return load_position(pos, p), load_position(pos, add(p, index(1)))


def emit_level(
    em: Storage, lv: int, p: ir.Value, carried: Carried, inner: Inner, parallel: bool
) -> Carried:
    """The loop over level ``lv`` below parent position ``p``; ``inner(q, coord, carried)``."""
    level = em.layout.levels[lv]
    name = level.name
    if name == "dense_fixed":
        size = em.level_size(lv)
        base = mul(p, size)
        return dense_loop(
            em, lv, size, carried, lambda c, vals: inner(add(base, c), c, vals), parallel
        )
    if name == "singleton":
        return inner(p, load_coordinate(em.crd[lv], p), carried)
    if name in ("compressed_varied", "dense_varied", "loose_compressed"):
        lo, hi = position_range(em, lv, p)
        cut = getattr(em, "cut", None)  # a Cut (slices.py), set by a sliced nest
        if cut is not None and cut.level == lv:  # one slice of the row's sorted coordinates
            lo, hi = cut.bounds or cut_range(em.crd[lv], lo, hi, cut)

        def varied(q: ir.Value, vals: Carried) -> Carried:
            coord = arith.subi(q, lo) if name == "dense_varied" else load_coordinate(em.crd[lv], q)
            return inner(q, coord, vals)

        return for_loop(lo, hi, index(1), carried, varied, parallel)
    # compressed_fixed (ELL) and structured[n, m]: fixed slots per parent
    width = _width(em, lv, _parents(em, lv))
    base = mul(p, width)
    edge = None  # n:m groups: a partial last group's padding lies past the edge
    if name == "structured" and em.layout.dim_to_lvl.results[lv].op == "mod":
        edge = em.level_bound(lv, index(level.m))

    def slot(s: ir.Value, vals: Carried) -> Carried:
        q = add(base, s)
        coord = load_index(em.crd[lv], q)
        if name == "structured" and edge is None:
            return inner(q, coord, vals)
        if edge is not None:
            valid = arith.cmpi(arith.CmpIPredicate.slt, coord, edge)
        else:
            valid = arith.cmpi(arith.CmpIPredicate.sge, coord, index(0))
        return if_then(valid, vals, lambda v: inner(q, coord, v))

    return for_loop(index(0), width, index(1), carried, slot, parallel)
