"""Pass ``sparse-iter-forward-returned-arguments``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.passmanager import ExternalPass

from sparsecomp.transforms.base import SparsecompPass

#: Ops that only read the buffer operand they are given.
_READS = frozenset({
    "memref.load", "memref.dim", "vector.load", "vector.maskedload", "vector.gather",
    "vector.transfer_read", "memref.extract_strided_metadata",
    "memref.extract_aligned_pointer_as_index", "func.return",
})  # fmt: skip
#: Ops whose result is a view of their first operand (its uses count as the buffer's).
_VIEWS = frozenset({
    "memref.cast", "memref.subview", "memref.reinterpret_cast", "memref.collapse_shape",
    "memref.expand_shape",
})  # fmt: skip


def read_only(value: ir.Value) -> bool:
    """Whether every use of the buffer ``value`` (through views) provably only reads it."""
    for use in value.uses:
        op = use.owner
        name = op.name
        if name in _VIEWS and use.operand_number == 0:
            if not all(read_only(r) for r in op.results):
                return False
        elif name == "memref.copy":
            if use.operand_number != 0:
                return False
        elif name not in _READS:
            return False
    return True


def _fresh_copy(value: ir.Value, entry: ir.Block) -> ir.Value | None:
    """The argument ``value`` is a fresh copy of, if it is one and nothing else touches it:
    ``value = memref.alloc``, written only by ``memref.copy %arg, value``, else only
    returned."""
    if isinstance(value, ir.BlockArgument) or value.owner.name != "memref.alloc":
        return None
    copies = []
    for use in value.uses:
        op = use.owner
        if op.name == "memref.copy" and use.operand_number == 1:
            copies.append(op)
        elif op.name != "func.return":
            return None
    if len(copies) != 1:
        return None
    source = copies[0].operands[0]
    if not isinstance(source, ir.BlockArgument) or source.owner != entry:
        return None
    return source if source.type == value.type else None


@dataclasses.dataclass(frozen=True)
class ForwardReturnedArgumentsPass(SparsecompPass):
    """Return a read-only argument instead of a fresh copy of it (GPU host code).

    Bufferization clones a returned argument so that a result never aliases
    the caller's array: SDDMM returns its sampling matrix's positions and
    coordinates as the result's (the values are new), and each clone becomes
    an allocation and a ``cuMemcpy`` per call, which waits for the device
    (two of SDDMM's three synchronizations a call). On a GPU the arguments
    are the runtime's own copies or ``DeviceTensor`` buffers, which nothing
    writes, so a result may share them: the runtime keeps the argument alive
    as the result's owner (:mod:`sparsecomp.runtime.cuda`). A returned
    ``memref.alloc`` is replaced by the argument where its only other use is
    one ``memref.copy`` from that argument (same type), and every use of the
    argument (through views) only reads it. Runs in ``cuda:`` builds only:
    CPU and emulated results keep their own memory.

    Before:

    ```mlir
    func.func @f(%pos: memref<?xi32>, ...) -> (memref<?xi32>, ...) {
      %d = memref.dim %pos, %c0 : memref<?xi32>
      %copy = memref.alloc(%d) : memref<?xi32>
      memref.copy %pos, %copy : memref<?xi32> to memref<?xi32>
      return %copy, ...
    }
    ```

    After: ``return %pos, ...`` (the allocation and the copy are gone).
    """

    NAME = "sparse-iter-forward-returned-arguments"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        for function in [o.operation for o in op.regions[0].blocks[0].operations]:
            if function.name != "func.func" or not len(function.regions[0].blocks):
                continue
            entry = function.regions[0].blocks[0]
            returns: list[ir.Operation] = []

            def visit(inner: ir.Operation) -> ir.WalkResult:
                if inner.name == "func.return" and inner.parent.name == "func.func":
                    returns.append(inner)
                return ir.WalkResult.ADVANCE

            function.walk(visit)
            for ret in returns:
                for number, value in enumerate(ret.operands):
                    source = _fresh_copy(value, entry)
                    if source is None or not read_only(source):
                        continue
                    _forward(ret, number, value, source)


def _forward(ret: ir.Operation, number: int, copy: ir.Value, source: ir.Value) -> None:
    """Return ``source`` for ``copy`` at operand ``number``; drop the copy once unused."""
    ret.operands[number] = source
    if any(u.owner.name == "func.return" for u in copy.uses):
        return  # another return still hands out the copy
    for use in list(copy.uses):
        use.owner.erase()  # the memref.copy into it
    copy.owner.erase()
