"""Pass ``sparse-iter-horizontal-fusion``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import arith, scf
from mlir.passmanager import ExternalPass

from sparsecomp.lowering import hints
from sparsecomp.transforms.base import SparsecompPass

#: Host ops that may sit between two launches of a group (their grid sizes):
#: they touch no memory, so they can move above the first launch.
_PURE_PREFIXES = ("arith.", "index.", "affine.apply")
_PURE_OPS = {"memref.dim"}


def _ops(block: ir.Block) -> list[ir.Operation]:
    return [o.operation for o in block.operations]


def _const(value: int) -> ir.Value:
    return arith.constant(ir.IndexType.get(), value)


def _processors(op: ir.Operation) -> list[str]:
    if "mapping" not in op.attributes:
        return []
    return [
        str(m).split("processor = ")[1].split(",")[0]
        for m in ir.ArrayAttr(op.attributes["mapping"])
    ]


def _kernel(op: ir.Operation) -> tuple[ir.Operation, list[ir.Value], list[int]] | None:
    """``(threads loop, grid sizes, block sizes)`` of a mapped launch nest, else None."""
    if op.name != "scf.parallel" or not _processors(op)[0:1] == ["block_x"]:
        return None
    body = _ops(op.regions[0].blocks[0])
    if body[-2].name != "scf.parallel" or not all(_pure(o) for o in body[:-2]):
        return None
    inner = body[-2]
    if not _processors(inner) or _processors(inner)[0] != "thread_x":
        return None
    n = len(op.regions[0].blocks[0].arguments)
    grid = list(op.operands[n : 2 * n])  # lower bounds 0, upper bounds, steps 1
    threads = []
    m = len(inner.regions[0].blocks[0].arguments)
    for value in list(inner.operands[m : 2 * m]):
        owner = getattr(value.owner, "operation", value.owner)
        if not (isinstance(owner, ir.Operation) and owner.name == "arith.constant"):
            return None
        threads.append(ir.IntegerAttr(owner.attributes["value"]).value)
    return inner, grid, threads


def _group(op: ir.Operation) -> tuple[int, str] | None:
    """The launch's group and why its parts may run together (disjoint rows, atomic
    writes); launches fuse only with the same of both."""
    if hints.PARTS_GROUP not in op.attributes:
        return None
    group = int(ir.IntegerAttr(op.attributes[hints.PARTS_GROUP]).value)
    for why in (hints.DISJOINT_ROWS, hints.ATOMIC_WRITES):
        if why in op.attributes:
            return group, why
    return None


def _pure(op: ir.Operation) -> bool:
    """No memory effects, or a load of an argument the function never writes (a part's
    row count from its positions): the same value above the launches."""
    if op.name.startswith(_PURE_PREFIXES) or op.name in _PURE_OPS:
        return True
    return op.name == "memref.load" and _never_written(op.operands[0])


def _never_written(value: ir.Value) -> bool:
    if not isinstance(value, ir.BlockArgument):
        return False
    parent = ir.BlockArgument(value).owner.owner  # the block's op
    if parent is None or parent.operation.name != "func.func":
        return False
    for use in value.uses:
        user = use.owner.operation
        reads = user.name in ("memref.load", "memref.dim") or (
            user.name == "memref.copy" and use.operand_number == 0
        )
        if not reads:
            return False
    return True


@dataclasses.dataclass(frozen=True)
class HorizontalFusionPass(SparsecompPass):
    """Put the launches of one composable op's parts into one launch (block-index ranges).

    An op over a composable layout runs once per part (``lowering/parts.py``),
    and the CUDA schedule gives each part its own launch: an ELL bucket per
    row-length class and the rest, seven launches for ``hyb``. Where no
    output row is written by two parts (``sparse_iter.disjoint_rows``: one
    column partition), the launches of one group (``sparse_iter.parts_group``,
    kept by ``sparse-iter-gpu-map-loops`` on each mapped block loop) run in
    one: its grid is the parts' grids end to end, a block runs the part whose
    range holds its index (the block's own index within the part rebuilt,
    two-dimensional grids included), and threads are numbered the way each
    part's ``(thread_x, thread_y)`` block numbers them, so warps stay the
    same. The host ops between the launches (their grid sizes: arithmetic,
    ``memref.dim``, loads of arguments the function never writes) move
    above. Runs after ``sparse-iter-gpu-map-loops``, before
    ``convert-parallel-loops-to-gpu``. Parts that share rows fuse where
    ``sparse-iter-lower-atomics`` made their writes atomic
    (``sparse_iter.atomic_writes``); otherwise they keep a launch each.

    Before (mapping attributes abbreviated):

    ```mlir
    scf.parallel (%b) = (%c0) to (%n0) step (%c1) {
      scf.parallel (%t) = (%c0) to (%c128) step (%c1) { A(%b, %t) } {mapping = [thread_x]}
    } {mapping = [block_x], sparse_iter.parts_group = 0, sparse_iter.disjoint_rows}
    scf.parallel (%b) = (%c0) to (%n1) step (%c1) {
      scf.parallel (%l, %r) = ... to (%c32, %c4) { B(%b, %l, %r) } {mapping = [thread_x, thread_y]}
    } {mapping = [block_x], sparse_iter.parts_group = 0, sparse_iter.disjoint_rows}
    ```

    After:

    ```mlir
    scf.parallel (%b) = (%c0) to (%n0 + %n1) step (%c1) {
      scf.parallel (%t) = (%c0) to (%c128) step (%c1) {
        scf.if (%b < %n0) { A(%b, %t) }
        scf.if (%b >= %n0 and %b < %n0 + %n1) { B(%b - %n0, %t mod 32, %t div 32) }
      } {mapping = [thread_x]}
    } {mapping = [block_x]}
    ```
    """

    NAME = "sparse-iter-horizontal-fusion"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        blocks: list[ir.Block] = []

        def visit(o: ir.Operation) -> ir.WalkResult:
            if o.name == "func.func":
                blocks.extend(b for r in o.regions for b in r.blocks)
            return ir.WalkResult.ADVANCE

        op.walk(visit, ir.WalkOrder.PRE_ORDER)
        for block in blocks:
            for run in _runs(block):
                _hoist_between(block, run)
                _fuse(run)


def _runs(block: ir.Block) -> list[list[ir.Operation]]:
    """Runs of 2+ launches of one group, with only pure host ops between them."""
    found: list[list[ir.Operation]] = []
    current: list[ir.Operation] = []
    group = None
    for op in _ops(block):
        g = _group(op) if _kernel(op) is not None else None
        if g is not None and g == group:
            current.append(op)
            continue
        if g is None and _pure(op) and current:
            continue  # may move above the run
        if len(current) > 1:
            found.append(current)
        current, group = ([op], g) if g is not None else ([], None)
    if len(current) > 1:
        found.append(current)
    return found


def _fuse(run: list[ir.Operation]) -> None:
    """Replace the launches of ``run`` by one (see the pass)."""
    first = run[0]
    kernels = [_kernel(op) for op in run]
    assert all(k is not None for k in kernels)
    threads = max(_product(k[2]) for k in kernels)  # type: ignore[index]
    from sparsecomp.transforms.gpu_map_loops import _parallel

    with ir.InsertionPoint(first), first.location:
        counts = []
        for _, grid, _ in kernels:  # type: ignore[misc]
            count = grid[0]
            for g in grid[1:]:
                count = arith.muli(count, g)
            counts.append(count)
        starts = [_const(0)]
        for count in counts:
            starts.append(arith.addi(starts[-1], count))
        outer, (block_id,) = _parallel([starts[-1]], ("block_x",))
    with ir.InsertionPoint.at_block_terminator(outer.regions[0].blocks[0]), first.location:
        inner, (thread,) = _parallel([_const(threads)], ("thread_x",))
    end = _ops(inner.regions[0].blocks[0])[-1]
    for k, (op, (kernel_threads, grid, sizes)) in enumerate(zip(run, kernels, strict=True)):  # type: ignore[misc]
        with ir.InsertionPoint(end), op.location:
            lo, hi = starts[k], starts[k + 1]
            ge = arith.cmpi(arith.CmpIPredicate.sge, block_id, lo)
            lt = arith.cmpi(arith.CmpIPredicate.slt, block_id, hi)
            cond = arith.andi(ge, lt)
            if _product(sizes) < threads:
                busy = arith.cmpi(arith.CmpIPredicate.slt, thread, _const(_product(sizes)))
                cond = arith.andi(cond, busy)
            guard = scf.IfOp(cond)
            with ir.InsertionPoint(guard.then_block):
                done = scf.YieldOp([])
        with ir.InsertionPoint(done), op.location:
            local = arith.subi(block_id, lo)
            block_ids = []
            for g in grid[:-1]:
                block_ids.append(arith.remsi(local, g))
                local = arith.divsi(local, g)
            block_ids.append(local)
            thread_ids = []
            rest = thread
            for size in sizes[:-1]:
                thread_ids.append(arith.remsi(rest, _const(size)))
                rest = arith.divsi(rest, _const(size))
            thread_ids.append(rest)
        for arg, value in zip(op.regions[0].blocks[0].arguments, block_ids, strict=True):
            arg.replace_all_uses_with(value)
        for arg, value in zip(
            kernel_threads.regions[0].blocks[0].arguments, thread_ids, strict=True
        ):
            arg.replace_all_uses_with(value)
        for body_op in _ops(op.regions[0].blocks[0])[:-2]:  # constants of the block loop
            body_op.move_before(done)
        for body_op in _ops(kernel_threads.regions[0].blocks[0])[:-1]:  # not scf.reduce
            body_op.move_before(done)
        op.erase()


def _hoist_between(block: ir.Block, run: list[ir.Operation]) -> None:
    """Move the host ops between the run's launches (pure, by :func:`_runs`) above its first."""
    ops = _ops(block)
    start, stop = ops.index(run[0]), ops.index(run[-1])
    for op in ops[start + 1 : stop]:
        if op not in run:
            op.move_before(run[0])


def _product(sizes: list[int]) -> int:
    out = 1
    for s in sizes:
        out *= s
    return out
