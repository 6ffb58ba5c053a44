"""Pass ``sparse-iter-lower-atomics``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import arith, memref
from mlir.passmanager import ExternalPass

from sparsecomp.ir.walk import preorder
from sparsecomp.lowering import hints
from sparsecomp.transforms._lane_reduction import _adds_to, sums
from sparsecomp.transforms.base import SparsecompPass

#: ``arith::AtomicRMWKind::addf``.
_ADDF = 0
#: Ops that write memory; a loop with one the pass cannot make atomic is left alone.
_WRITES = ("memref.store", "memref.atomic_rmw", "memref.copy", "vector.store",
           "vector.maskedstore", "vector.scatter", "linalg.")  # fmt: skip


def _owner(value: ir.Value) -> ir.Operation | None:
    owner = getattr(value.owner, "operation", value.owner)
    return owner if isinstance(owner, ir.Operation) else None


def _accumulation(
    store: ir.Operation, inside: list[ir.Operation]
) -> tuple[ir.Operation, list[ir.Operation]] | None:
    """``(load, its users)`` when ``store`` writes ``load + x`` back where ``load`` read."""
    value, target, indices = store.operands[0], store.operands[1], list(store.operands[2:])
    if str(value.type) not in ("f32", "f64"):
        return None
    loads = [
        o
        for o in inside
        if o.name == "memref.load" and o.operands[0] == target and list(o.operands[1:]) == indices
    ]
    if len(loads) != 1:
        return None
    load = loads[0]
    producer = _owner(value)
    users: list[ir.Operation] = []
    if producer is not None and producer.name == "scf.for" and sums(producer):
        if producer.operands[3] != load.results[0]:
            return None
        users.append(producer)
    elif not _adds_to(value, load.results[0], users):
        return None
    if any(use.owner.operation not in users for use in load.results[0].uses):
        return None
    return load, users


@dataclasses.dataclass(frozen=True)
class LowerAtomicsPass(SparsecompPass):
    """Accumulations into rows that several parts share become atomic adds.

    The parts of an op over a composable layout with several column partitions
    (``hyb:2:8``) or block parts (``bsr+csr``) write the same output rows: one
    after the other that is a read, an add and a write per part; run together
    (``sparse-iter-horizontal-fusion``) the writes would race. In each row loop
    of such a group (``sparse_iter.parts_group`` without
    ``sparse_iter.disjoint_rows``), a store of ``load + x`` back where the load
    read (an f32/f64 sum loop started from the load, or an ``scf.if`` adding
    or keeping it) becomes ``memref.atomic_rmw addf x`` with the sum started
    from zero, and the loop is marked ``sparse_iter.atomic_writes`` (its parts
    may then share a launch). A loop with any other write is left as it is.
    Runs after ``sparse-iter-parallelize``, before ``sparse-iter-gpu-map-loops``.

    Before:

    ```mlir
    scf.parallel (%i) = (%c0) to (%m) step (%c1) {
      %y0 = memref.load %y[%i] : memref<?xf32>
      %s = scf.for %p = %lo to %hi step %c1 iter_args(%acc = %y0) -> (f32) { ... }
      memref.store %s, %y[%i] : memref<?xf32>
    } {sparse_iter.parts_group = 0 : i64}
    ```

    After:

    ```mlir
    scf.parallel (%i) = (%c0) to (%m) step (%c1) {
      %s = scf.for %p = %lo to %hi step %c1 iter_args(%acc = %zero) -> (f32) { ... }
      %old = memref.atomic_rmw addf %s, %y[%i] : (f32, memref<?xf32>) -> f32
    } {sparse_iter.atomic_writes, sparse_iter.parts_group = 0 : i64}
    ```
    """

    NAME = "sparse-iter-lower-atomics"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        # The loops first: rewriting one erases ops the walk listed after it.
        loops = [
            loop
            for loop in preorder(op)
            if loop.name == "scf.parallel"
            and hints.PARTS_GROUP in loop.attributes
            and hints.DISJOINT_ROWS not in loop.attributes
        ]
        for loop in loops:
            _lower(loop)


def _lower(loop: ir.Operation) -> None:
    inside = preorder(loop)[1:]
    writes = [o for o in inside if o.name.startswith(_WRITES)]
    found = [(w, _accumulation(w, inside) if w.name == "memref.store" else None) for w in writes]
    if not writes or any(match is None for _, match in found):
        return
    loads = [match[0] for _, match in found if match is not None]
    if any(a == b for i, a in enumerate(loads) for b in loads[i + 1 :]):
        return  # two writes of one accumulation: leave it
    for store, match in found:
        assert match is not None
        load, _users = match
        value = store.operands[0]
        with ir.InsertionPoint(load), load.location:
            zero = arith.constant(value.type, 0.0)
        load.results[0].replace_all_uses_with(zero)
        with ir.InsertionPoint(store), store.location:
            kind = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), _ADDF)
            memref.AtomicRMWOp(kind, value, store.operands[1], list(store.operands[2:]))
        store.erase()
        load.erase()
    loop.attributes[hints.ATOMIC_WRITES] = ir.UnitAttr.get()
