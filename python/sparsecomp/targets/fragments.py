"""Where each lane of a warp holds each element of an ``mma.sync`` operand.

The PTX ISA defines, for every ``mma`` shape and element type, which
matrix element each register of each lane holds ("Matrix Fragments for
mma.m16n8k8" and friends). This module is that table, in the form both the
tensorizer (what a lane loads) and the emulator (how a warp's registers
make a matrix) read it: element ``i`` of a lane's fragment, with
``group = lane >> 2`` and ``thread = lane % 4`` ("groupID" and
"threadID_in_group" in the ISA), lies at::

    row = group * rg + thread * rt + sum of the terms of i
    col = group * cg + thread * ct + sum of the terms of i

where each term adds ``row_step`` / ``col_step`` when bit ``bit`` of ``i``
is set. Element ``i`` of a fragment ``vector<RxExT>`` is register
``i // E``, element ``i % E``.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Fragment:
    """One operand's layout: ``count`` elements per lane, in ``registers`` x ``per_register``."""

    registers: int
    per_register: int
    group: tuple[int, int]  # (row, col) per group id
    thread: tuple[int, int]  # (row, col) per thread id in group
    bits: tuple[tuple[int, int, int], ...]  # (bit of i, row step, col step)

    @property
    def count(self) -> int:
        return self.registers * self.per_register

    def position(self, lane: int, i: int) -> tuple[int, int]:
        """``(row, col)`` of element ``i`` of ``lane``'s fragment."""
        group, thread = lane >> 2, lane % 4
        row = group * self.group[0] + thread * self.thread[0]
        col = group * self.group[1] + thread * self.thread[1]
        for bit, row_step, col_step in self.bits:
            if (i >> bit) & 1:
                row, col = row + row_step, col + col_step
        return row, col


@dataclasses.dataclass(frozen=True)
class MmaShape:
    """An ``mma.sync`` shape for one input element type: its A, B and C/D fragments."""

    m: int
    n: int
    k: int
    element: str  # "tf32" or "f16"
    a: Fragment
    b: Fragment
    c: Fragment


#: The accumulator (C and D) of every m16n8 shape with f32 accumulation:
#: c0, c1 on row ``group`` (columns 2t, 2t+1), c2, c3 eight rows below.
_C_M16N8 = Fragment(2, 2, (1, 0), (0, 2), ((0, 0, 1), (1, 8, 0)))

#: m16n8k8 with tf32 inputs: a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4);
#: b0 (k=t, n=g), b1 (k=t+4, n=g).
M16N8K8_TF32 = MmaShape(
    16, 8, 8, "tf32",
    a=Fragment(4, 1, (1, 0), (0, 1), ((0, 8, 0), (1, 0, 4))),
    b=Fragment(2, 1, (0, 1), (1, 0), ((0, 4, 0),)),
    c=_C_M16N8,
)  # fmt: skip

#: m16n8k16 with f16 inputs: a0,a1 (g, 2t..2t+1), a2,a3 (g+8, ...), a4..a7 the
#: same eight columns right; b0,b1 (k=2t..2t+1, n=g), b2,b3 (k+8).
M16N8K16_F16 = MmaShape(
    16, 8, 16, "f16",
    a=Fragment(4, 2, (1, 0), (0, 2), ((0, 0, 1), (1, 8, 0), (2, 0, 8))),
    b=Fragment(2, 2, (0, 1), (2, 0), ((0, 1, 0), (1, 8, 0))),
    c=_C_M16N8,
)  # fmt: skip

SHAPES = {(s.m, s.n, s.k, s.element): s for s in (M16N8K8_TF32, M16N8K16_F16)}


def for_inputs(element: str) -> MmaShape:
    """The dense MMA shape a kernel with ``element`` inputs issues: tf32 ``m16n8k8`` for
    f32, ``m16n8k16`` for f16."""
    return M16N8K8_TF32 if element == "f32" else M16N8K16_F16
