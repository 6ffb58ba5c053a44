"""A function whose ops run on two devices, cut into one function per run of ops.

Used by :mod:`.parts`. In a module with a CPU and a CUDA target, a public
function may mark some of its ops for the other device
(``linalg.matmul {sparse_iter.target = "gpu"}``). Where every such op sits
at the top level of the function's body (not inside a loop or branch), the
body is cut where the device changes: each run of ops becomes a public
function of its own, ``<name>__part<k>``, for the device of its ops, whose
arguments are what the run reads from before it (the function's arguments,
results of earlier runs) and whose results are what later runs and the
return read. Ops that compute nothing worth moving (constants,
``tensor.empty``, ``tensor.dim``, scalar arithmetic) are copied into each
run that reads them. The function itself becomes a *chain*: calling it
calls the runs in order, each on its device, and the data that crosses from
one run to the next crosses between the devices there (to the GPU at the
call of a GPU run, back with its results). Each run's layouts are resolved
for its own device, so an operand that the CPU reads as CSC and the GPU as
CSR is converted at the call that needs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mlir import ir
from mlir.dialects import func

from sparsecomp.errors import CompileError
from sparsecomp.ir.parsing import location_text
from sparsecomp.ir.verify import TARGET_ATTR
from sparsecomp.ir.walk import preorder

#: Ops copied into every run that reads them.
_FREE = frozenset({"arith.constant", "tensor.empty", "tensor.dim", "memref.dim"})


@dataclass
class Chain:
    """One cut function: its runs (``steps``: function name, its device's key and where
    each argument comes from: ``["arg", i]`` or ``["value", step, result]``) and where
    its results come from."""

    name: str
    steps: list[dict[str, Any]] = field(default_factory=list)
    results: list[list[Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"steps": self.steps, "results": self.results}


def _free(op: ir.Operation) -> bool:
    if len(op.regions) or TARGET_ATTR in op.attributes:
        return False
    if op.name in _FREE:
        return True
    scalar = all(not isinstance(r.type, ir.ShapedType) for r in op.results)
    return op.name.startswith("arith.") and scalar


def cut(
    function: ir.Operation,
    own: str,
    device: Any,
    target_of: dict[str, str],
    filename: str,
) -> Chain | None:
    """Cut ``function`` (public, on the device of key ``own``) into runs, or None where
    none of its top-level ops is marked for another device. ``device(op)``: the key of
    the device an op is marked for (None: unmarked); ``target_of``: a device key -> the
    target name its runs carry."""
    block = function.regions[0].blocks[0]
    body = [o.operation for o in block.operations]
    top, ret = body[:-1], body[-1]
    keys = [device(op) or own for op in top]
    if all(k == own for k in keys):
        return None
    for op in top:  # a mark nested in a loop or branch: left to the caller's refusal
        if any(device(inner) not in (None, keys[top.index(op)]) for inner in preorder(op)[1:]):
            return None
    runs: list[tuple[str, list[ir.Operation]]] = []
    for op, key in zip(top, keys, strict=True):
        if _free(op):
            continue
        if not runs or runs[-1][0] != key:
            runs.append((key, []))
        runs[-1][1].append(op)
    home: dict[ir.Value, tuple[int, int]] = {}  # value -> (run, result index in the run)
    outputs: list[list[ir.Value]] = [[] for _ in runs]
    for k, (_, ops) in enumerate(runs):
        for op in ops:
            for result in op.results:
                home[result] = (k, -1)
    free_ops = [op for op in top if _free(op)]
    needs = [_reads(ops, free_ops) for _, ops in runs]
    for k, (read, _) in enumerate(needs):
        for value in read:
            if value in home and home[value][0] != k and value not in outputs[home[value][0]]:
                outputs[home[value][0]].append(value)
    for value in ret.operands:
        if value in home and value not in outputs[home[value][0]]:
            outputs[home[value][0]].append(value)
    for k, values in enumerate(outputs):
        for j, value in enumerate(values):
            home[value] = (k, j)
    name = ir.StringAttr(function.attributes["sym_name"]).value
    chain = Chain(name)
    args = list(block.arguments)
    for k, (key, ops) in enumerate(runs):
        read, copied = needs[k]
        inputs = read
        sources = [["arg", args.index(v)] if v in args else ["value", *home[v]] for v in inputs]
        part = f"{name}__part{k}"
        _build(function, part, target_of[key], inputs, copied, ops, outputs[k])
        chain.steps.append({"function": part, "device": key, "args": sources})
    for value in ret.operands:
        if value in args:
            chain.results.append(["arg", args.index(value)])
        elif value in home and home[value][1] >= 0:
            chain.results.append(["value", *home[value]])
        else:
            where = location_text(ret.location, filename)
            raise CompileError(
                f"{where}: '{name}' runs on two devices and returns a value no part of it "
                "computes (a constant): return it from an op of one of its parts"
            )
    function.erase()
    return chain


def _reads(
    ops: list[ir.Operation], free_ops: list[ir.Operation]
) -> tuple[list[ir.Value], list[ir.Operation]]:
    """What a run reads from outside itself (in first-use order), and the free ops it
    copies (in program order)."""
    read: list[ir.Value] = []
    copied: list[ir.Operation] = []
    free_of = {r: op for op in free_ops for r in op.results}

    def inside(value: ir.Value) -> bool:
        """Defined by a run op, in one of its regions, or as an argument of their blocks."""
        owner = value.owner
        at: Any = owner.owner if isinstance(owner, ir.Block) else owner
        while at is not None:
            at = getattr(at, "operation", at)
            if any(at == op for op in ops):
                return True
            at = at.parent
        return False

    def take(value: ir.Value) -> None:
        if inside(value):
            return
        if value in free_of:
            op = free_of[value]
            if not any(op == c for c in copied):
                copied.append(op)
                for operand in op.operands:
                    take(operand)
            return
        if value not in read:
            read.append(value)

    for op in ops:
        for inner in preorder(op):
            for operand in inner.operands:
                take(operand)
    return read, [op for op in free_ops if any(op == c for c in copied)]


def _build(
    function: ir.Operation,
    name: str,
    target: str,
    inputs: list[ir.Value],
    copied: list[ir.Operation],
    ops: list[ir.Operation],
    outputs: list[ir.Value],
) -> None:
    """The run's public function before ``function``: ``inputs`` as arguments, the free
    ops copied, the run's ops moved, ``outputs`` returned."""
    with ir.InsertionPoint(function), function.location:
        kind = ir.FunctionType.get([v.type for v in inputs], [v.type for v in outputs])
        new = func.FuncOp(name, kind)
        new.operation.attributes[TARGET_ATTR] = ir.StringAttr.get(target)
        entry = new.add_entry_block()
    mapping: dict[ir.Value, ir.Value] = dict(zip(inputs, entry.arguments, strict=True))
    with ir.InsertionPoint(entry), function.location:
        for op in copied:
            clone = op.clone()
            for i, operand in enumerate(op.operands):
                if operand in mapping:
                    clone.operands[i] = mapping[operand]
            for old, fresh in zip(op.results, clone.results, strict=True):
                mapping[old] = fresh
        done = func.ReturnOp(outputs)
    for op in ops:
        op.move_before(done.operation)
        for inner in preorder(op):
            for i, operand in enumerate(inner.operands):
                if operand in mapping:
                    inner.operands[i] = mapping[operand]
