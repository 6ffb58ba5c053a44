"""Pass ``sparse-iter-gpu-host-alloc``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from mlir import ir
from mlir.dialects import gpu
from mlir.passmanager import ExternalPass

from sparsecomp.ir.walk import preorder
from sparsecomp.transforms.base import SparsecompPass

#: Ops whose bodies run on the GPU: allocations inside them stay as they are.
_DEVICE_OPS = ("gpu.launch", "gpu.module", "gpu.func")


def _on_host(op: ir.Operation) -> bool:
    parent = op.parent
    while parent is not None:
        if parent.name in _DEVICE_OPS:
            return False
        parent = parent.parent
    return True


@dataclasses.dataclass(frozen=True)
class GpuHostAllocPass(SparsecompPass):
    """Host allocations become GPU-visible memory: ``gpu.alloc host_shared``.

    After the CUDA schedule, a function's host code still allocates its
    results and scratch buffers with ``memref.alloc`` (``malloc``), and its
    ``gpu.launch`` bodies write them: on a GPU that is a write to host memory
    the device cannot reach. This pass turns every ``memref.alloc`` outside a
    ``gpu.launch`` / ``gpu.module`` into ``gpu.alloc host_shared`` (memory
    both the host code and the kernels use; the CUDA runtime backs it with
    ``cuMemAllocManaged``) and every ``memref.dealloc`` of such a buffer into
    ``gpu.dealloc``, waited for where it stands. Host code that reads or
    writes the buffer (sizes of sparse results, a host loop the schedule
    left) stays correct. A host ``memref.copy`` (an outs operand copied into
    the result) becomes ``gpu.memcpy``, waited for: its source may be a
    caller's GPU array (CuPy, torch), which host code cannot read.

    Buffers cross function boundaries: a tensor-core kernel is a private
    function with the ``gpu.launch``, called by the public function that
    allocated its output. So the functions rewritten are those with a
    ``gpu.launch`` and every function joined to one by calls, in either
    direction (callers that pass it buffers, callees that allocate what it
    gets). Functions with no such link are left alone. ``memref.alloca``
    stays: stack scratch is host-only.

    Before:

    ```mlir
    %C = memref.alloc(%m, %n) {alignment = 64 : i64} : memref<?x?xf32>
    gpu.launch blocks(...) threads(...) { memref.store %v, %C[%i, %j] ... }
    ```

    After:

    ```mlir
    %C = gpu.alloc host_shared (%m, %n) : memref<?x?xf32>
    gpu.launch blocks(...) threads(...) { memref.store %v, %C[%i, %j] ... }
    ```
    """

    NAME = "sparse-iter-gpu-host-alloc"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        funcs = {
            ir.StringAttr(f.operation.attributes["sym_name"]).value: f.operation
            for f in op.regions[0].blocks[0].operations
            if f.operation.name == "func.func"
        }
        for name in _linked_to_launches(funcs):
            func = funcs[name]
            ops = list(preorder(func))
            for alloc in ops:
                if alloc.name == "memref.alloc" and _on_host(alloc):
                    _replace_alloc(alloc)
            for o in list(preorder(func)):
                if o.name == "memref.dealloc" and _is_shared(o.operands[0]):
                    _replace_dealloc(o)
                elif o.name == "memref.copy" and _on_host(o) and _contiguous(o):
                    _replace_copy(o)


def _linked_to_launches(funcs: dict[str, ir.Operation]) -> list[str]:
    """The functions with a ``gpu.launch`` and those joined to one by calls (either way)."""
    edges: dict[str, set[str]] = {name: set() for name in funcs}
    todo = []
    for name, func in funcs.items():
        for o in preorder(func):
            if o.name == "gpu.launch":
                todo.append(name)
            elif o.name == "func.call":
                callee = ir.FlatSymbolRefAttr(o.attributes["callee"]).value
                if callee in edges:
                    edges[name].add(callee)
                    edges[callee].add(name)
    linked: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in linked:
            linked.add(name)
            todo.extend(edges[name] - linked)
    return [name for name in funcs if name in linked]


def _replace_alloc(alloc: ir.Operation) -> None:
    dynamic = list(alloc.operands)
    symbols = []
    if "operandSegmentSizes" in alloc.attributes:
        sizes = ir.DenseI32ArrayAttr(alloc.attributes["operandSegmentSizes"])
        dynamic, symbols = dynamic[: sizes[0]], dynamic[sizes[0] :]
    with ir.InsertionPoint(alloc), alloc.location:
        shared = gpu.AllocOp(alloc.results[0].type, None, [], dynamic, symbols, hostShared=True)
    alloc.results[0].replace_all_uses_with(shared.results[0])
    alloc.erase()


def _replace_dealloc(dealloc: ir.Operation) -> None:
    """``gpu.dealloc`` in the asynchronous form MLIR's runtime lowering takes (one
    dependency), waited for at once: a function without launches has no async region
    to put a plain ``gpu.dealloc`` in."""
    _waited(dealloc, lambda token, start: gpu.DeallocOp(token, [start], dealloc.operands[0]))


def _replace_copy(copy: ir.Operation) -> None:
    """``gpu.memcpy`` (the driver's ``cuMemcpy``, any memory to any memory), waited for."""
    target, source = copy.operands[1], copy.operands[0]
    _waited(copy, lambda token, start: gpu.MemcpyOp(token, [start], target, source))


def _waited(op: ir.Operation, build: Callable[[ir.Type, ir.Value], ir.OpView]) -> None:
    """Replace ``op`` by ``gpu.wait async``, ``build(token type, that token)`` (an async
    gpu op) and a ``gpu.wait`` on it."""
    with ir.InsertionPoint(op), op.location:
        token = ir.Type.parse("!gpu.async.token")
        start = gpu.WaitOp(token, []).results[0]
        gpu.WaitOp(None, [build(token, start).results[0]])
    op.erase()


def _contiguous(copy: ir.Operation) -> bool:
    """Both sides of a ``memref.copy`` ranked and in identity layout (what ``gpu.memcpy``
    takes)."""
    if not all(isinstance(v.type, ir.MemRefType) for v in copy.operands):
        return False  # unranked
    layouts = [ir.MemRefType(v.type).layout for v in copy.operands]
    return all(
        isinstance(a, ir.AffineMapAttr) and a.value == ir.AffineMap.get_identity(a.value.n_dims)
        for a in layouts
    )


def _is_shared(value: ir.Value) -> bool:
    owner = getattr(value.owner, "operation", value.owner)  # a Block for block arguments
    return isinstance(owner, ir.Operation) and owner.name == "gpu.alloc"
