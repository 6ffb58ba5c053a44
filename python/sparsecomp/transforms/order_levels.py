"""Pass ``sparse-iter-order-levels``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.passmanager import ExternalPass

from sparsecomp.formats.layout import Layout
from sparsecomp.transforms.base import SparsecompPass
from sparsecomp.transforms.soa_coo import Retyper


def ordered(layout: Layout) -> Layout:
    """``layout`` with every level ordered (``nonordered`` dropped)."""
    levels = tuple(dataclasses.replace(lv, nonordered=False) for lv in layout.levels)
    return dataclasses.replace(layout, levels=levels)


@dataclasses.dataclass(frozen=True)
class OrderLevelsPass(SparsecompPass):
    """Store the levels of upstream sparse tensors ordered (drop ``nonordered``).

    ``nonordered`` only allows a storage order; ordered storage holds the
    same values. The upstream sparsifier, however, co-iterates and merges
    coordinates as if every level were ordered, and its conversions into a
    ``nonordered`` level do not terminate: with a ``nonordered`` operand it
    computes wrong results or hangs. So every ``#sparse_tensor`` type in
    the fallback's module loses ``nonordered`` on its levels (signature,
    ``sparse_iter.tensor_signature``, block arguments, op results); the
    runtime sorts an argument passed in the nonordered layout at the call
    (the recorded ABI says ordered). A function that uses an op whose
    types spell out the storage (``sparse_tensor.assemble``,
    ``disassemble``, ``coordinates``, ``coordinates_buffer``) or a sparse
    ``arith.constant`` keeps its types, and so do its callers and callees.
    Runs on the fallback's module before the sparsifier.

    Before:

    ```mlir
    #CSC = #sparse_tensor.encoding<{ map = (i, j) -> (j : dense, i : compressed(nonordered)) }>
    func.func @k(%a: tensor<?x?xf32, #CSC>, %o: tensor<?xf32>) -> tensor<?xf32>
    ```

    After:

    ```mlir
    #CSC = #sparse_tensor.encoding<{ map = (d0, d1) -> (d1 : dense, d0 : compressed) }>
    func.func @k(%a: tensor<?x?xf32, #CSC>, %o: tensor<?xf32>) -> tensor<?xf32>
    ```
    """

    NAME = "sparse-iter-order-levels"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        Retyper(ordered).run(op)
