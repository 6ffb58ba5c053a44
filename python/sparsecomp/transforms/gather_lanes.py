"""Pass ``sparse-iter-gather-lanes``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import arith, scf, vector
from mlir.passmanager import ExternalPass

from sparsecomp.ir.walk import preorder
from sparsecomp.transforms.base import SparsecompPass

#: The lane counts the pass takes (its masks, ``count & -lanes``, need a power of two).
_POWERS = (2, 4, 8, 16, 32, 64)
#: Ops a lane reads or computes an index with: cloned once per lane.
_PER_LANE = ("memref.load", "arith.index_cast", "arith.index_castui", "arith.addi",
             "arith.subi", "arith.muli", "arith.minui", "arith.maxui", "arith.extui",
             "arith.extsi", "arith.trunci", "arith.constant")  # fmt: skip
#: Float ops computed once on the lanes' vectors.
_ELEMENTWISE = ("arith.mulf", "arith.addf", "arith.subf", "arith.divf", "arith.negf",
                "arith.maximumf", "arith.minimumf", "math.fma", "math.absf")  # fmt: skip


def _reassociable(op: ir.Operation) -> bool:
    if "fastmath" not in op.attributes:
        return False
    return "reassoc" in str(op.attributes["fastmath"])


def _attributes(op: ir.Operation) -> dict[str, ir.Attribute]:
    attrs = op.attributes
    return {attrs[i].name: attrs[i].attr for i in range(len(attrs))}


@dataclasses.dataclass(frozen=True)
class _Sum:
    """A loop :func:`_match` accepts: ``acc += g`` over its iterations."""

    loop: ir.Operation
    add: ir.Operation  # the body's ``arith.addf %acc, %g``
    addend: ir.Value  # ``g``


def _match(loop: ir.Operation) -> _Sum | None:
    """``scf.for`` with step 1 carrying one float, whose body yields ``acc + g``
    (``reassoc``; ``acc`` used nowhere else), computes ``g`` with loads, index
    arithmetic and elementwise float ops only, and reads at least one load at
    an index loaded in the body (a gather, SpMV's ``x[crd[p]]``)."""
    if loop.name != "scf.for" or len(loop.results) != 1:
        return None
    step = loop.operands[2].owner
    if isinstance(step, ir.Block) or step.name != "arith.constant":
        return None
    if ir.IntegerAttr(step.attributes["value"]).value != 1:
        return None
    if not isinstance(loop.results[0].type, ir.FloatType):
        return None
    body = loop.regions[0].blocks[0]
    acc = body.arguments[1]
    ops = [o.operation for o in body.operations]
    add = ops[-1].operands[0].owner if ops[-1].name == "scf.yield" else None
    if add is None or isinstance(add, ir.Block) or add.name != "arith.addf":
        return None
    if not _reassociable(add) or acc not in list(add.operands):
        return None
    if sum(1 for o in ops for v in o.operands if v == acc) != 1:
        return None
    loaded: set[ir.Value] = set()  # values that depend on a load in the body
    gathers = 0
    for o in ops[:-1]:
        if o == add:
            continue
        if o.name not in _PER_LANE and o.name not in _ELEMENTWISE:
            return None
        if len(o.regions) or any(isinstance(r.type, ir.VectorType) for r in o.results):
            return None
        if o.name == "memref.load" and any(v in loaded for v in list(o.operands)[1:]):
            gathers += 1
        if o.name == "memref.load" or any(v in loaded for v in o.operands):
            loaded.update(o.results)
    addend = next(v for v in add.operands if v != acc)
    return _Sum(loop, add, addend) if gathers else None


def _lanes_loop(found: _Sum, lanes: int, lo: ir.Value, full: ir.Value, acc: ir.Value) -> ir.Value:
    """The vector loop over ``[lo, full)``, ``lanes`` iterations at a time, and its
    horizontal sum into ``acc``."""
    loop, add = found.loop, found.add
    body = loop.regions[0].blocks[0]
    index = ir.IndexType.get()
    vt = ir.VectorType.get([lanes], acc.type)
    zero = arith.constant(vt, ir.DenseElementsAttr.get_splat(vt, ir.FloatAttr.get(acc.type, 0.0)))
    step = arith.constant(index, lanes)
    outer = scf.ForOp(lo, full, step, [zero])
    with ir.InsertionPoint(outer.body):
        q = outer.induction_variable
        per_lane: dict[ir.Value, list[ir.Value]] = {
            body.arguments[0]: [
                q if lane == 0 else arith.addi(q, arith.constant(index, lane))
                for lane in range(lanes)
            ]
        }
        vectors: dict[ir.Value, ir.Value] = {}

        def lane_value(v: ir.Value, lane: int) -> ir.Value:
            return per_lane[v][lane] if v in per_lane else v

        def vector_of(v: ir.Value) -> ir.Value:
            if v not in vectors:
                if v in per_lane:
                    vectors[v] = vector.from_elements(
                        ir.VectorType.get([lanes], v.type), per_lane[v]
                    )
                else:  # defined outside the loop
                    vectors[v] = vector.broadcast(ir.VectorType.get([lanes], v.type), v)
            return vectors[v]

        for o in [o.operation for o in body.operations][:-1]:
            if o == add:
                continue
            if o.name in _ELEMENTWISE:
                attrs = _attributes(o)
                new = ir.Operation.create(
                    o.name,
                    results=[ir.VectorType.get([lanes], r.type) for r in o.results],
                    operands=[vector_of(v) for v in o.operands],
                    attributes=attrs,
                )
                vectors[o.results[0]] = new.results[0]
                continue
            clones = []
            for lane in range(lanes):
                clone = o.clone()
                for i, v in enumerate(o.operands):
                    if v in per_lane:
                        clone.operands[i] = lane_value(v, lane)
                clones.append(clone)
            for r, result in enumerate(o.results):
                per_lane[result] = [c.results[r] for c in clones]
        attrs = _attributes(add)
        summed = ir.Operation.create(
            "arith.addf",
            results=[vt],
            operands=[outer.inner_iter_args[0], vector_of(found.addend)],
            attributes=attrs,
        ).results[0]
        scf.yield_([summed])
    kind = ir.Attribute.parse("#vector.kind<add>")
    return vector.reduction(acc.type, kind, outer.results[0], acc=acc,
                            fastmath=add.attributes["fastmath"])  # fmt: skip


def _rewrite(found: _Sum, lanes: int) -> None:
    """``if (lo < full) { lanes loop; the rest from full } else { the loop }``, where
    ``full = lo + ((hi - lo) & -lanes)``."""
    loop = found.loop
    lo, hi, init = loop.operands[0], loop.operands[1], loop.operands[3]
    index = ir.IndexType.get()
    with ir.InsertionPoint(loop), loop.location:
        count = arith.subi(hi, lo)
        full = arith.addi(lo, arith.andi(count, arith.constant(index, -lanes)))
        # the iterations left after the lanes (all of them in a short row): bounds
        # written as `start + rest` let LLVM see fewer than `lanes` iterations
        # and leave those loops scalar (no vector loop and its checks per row)
        rest = arith.andi(count, arith.constant(index, lanes - 1))
        tail_end, short_end = arith.addi(full, rest), arith.addi(lo, rest)
        some = arith.cmpi(arith.CmpIPredicate.ult, lo, full)
        branch = scf.IfOp(some, [init.type], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            total = _lanes_loop(found, lanes, lo, full, init)
            tail = loop.clone()
            tail.operands[0] = full
            tail.operands[1] = tail_end
            tail.operands[3] = total
            scf.yield_([tail.results[0]])
        with ir.InsertionPoint(branch.else_block):
            plain = loop.clone()
            plain.operands[1] = short_end
            scf.yield_([plain.results[0]])
    loop.results[0].replace_all_uses_with(branch.results[0])
    loop.erase()


@dataclasses.dataclass(frozen=True)
class GatherLanesPass(SparsecompPass):
    """Run a sum over gathered reads by lanes, its gathers as loads one by one.

    A row of SpMV is a scalar loop, ``acc += val[p] * x[crd[p]]``, that LLVM's
    loop vectorizer turns into vector code reading ``x`` with gather
    instructions. On AMD's Zen 4 a gather of 8 lanes costs more than 8 loads
    (a C loop reading them one by one ran 1.16-1.23x faster on matrices in
    cache). On functions whose CPU target is tuned for AMD (``tune = amd``),
    this pass rewrites such a loop itself: a row of at least ``lanes``
    iterations runs them ``lanes`` at a time, each iteration's loads cloned
    per lane and put together with ``vector.from_elements`` (LLVM keeps them
    scalar loads, and merges the contiguous ones into a vector load), the
    float arithmetic on vectors, one horizontal sum (``reassoc``, a tree),
    then its last iterations in the original loop; a shorter row runs the
    original loop untouched (running it by lanes cost 10-20% on meshes and
    circuits with rows of 6-7 entries). SpMV against oneMKL's optimized
    handle on a 2-core Zen 4 EPYC, ten real matrices: 0.99x -> 1.13x geomean.

    A loop qualifies when it steps by 1, carries one float that its body adds
    to (``arith.addf`` with ``reassoc``, the carried value used nowhere else),
    computes the addend with loads, index arithmetic and elementwise float ops
    only (no regions, no vectors, no stores), and reads at least one load at
    an index loaded in its body. Runs on buffers, after
    ``sparse-iter-guard-coordinates`` (whose row check wants the plain loop)
    and before lowering to LLVM.

    Option ``lanes``: -1 (default) takes the function's target, declared in
    the module's ``sparse_iter.targets`` (as ``sparsecomp.compile`` declares
    the host's): its vector bits over the element's where it is tuned ``amd``,
    else nothing, and nothing in a module that declares no target (the IR
    ``sparsecomp-opt`` prints does not depend on the machine's vendor); 0
    turns the pass off; a power of two from 2 to 64 forces that many lanes on
    every function.

    Before:

    ```mlir
    %s = scf.for %p = %lo to %hi step %c1 iter_args(%acc = %init) -> (f32) {
      %c = memref.load %crd[%p] : memref<?xi32>
      %j = arith.index_cast %c : i32 to index
      %v = memref.load %val[%p] : memref<?xf32>
      %x = memref.load %xs[%j] : memref<?xf32>
      %m = arith.mulf %v, %x fastmath<reassoc,contract> : f32
      %a = arith.addf %acc, %m fastmath<reassoc,contract> : f32
      scf.yield %a : f32
    }
    ```

    After (``lanes = 8``):

    ```mlir
    %full = %lo + ((%hi - %lo) & -8)
    %s = scf.if (%lo < %full) -> (f32) {
      %v8 = scf.for %q = %lo to %full step %c8 iter_args(%va = %zeros) -> (vector<8xf32>) {
        ... the loads of lanes %q, %q + 1, ..., %q + 7, each its own ...
        %vv = vector.from_elements %v0, ..., %v7 : vector<8xf32>
        %vx = vector.from_elements %x0, ..., %x7 : vector<8xf32>
        %vm = arith.mulf %vv, %vx fastmath<reassoc,contract> : vector<8xf32>
        %na = arith.addf %va, %vm fastmath<reassoc,contract> : vector<8xf32>
        scf.yield %na : vector<8xf32>
      }
      %r = vector.reduction <add>, %v8, %init fastmath<reassoc,contract> : vector<8xf32> into f32
      %t = scf.for %p = %full to %hi step %c1 iter_args(%acc = %r) -> (f32) { ... }
      scf.yield %t : f32
    } else {
      %t = scf.for %p = %lo to %hi step %c1 iter_args(%acc = %init) -> (f32) { ... }
      scf.yield %t : f32
    }
    ```
    """

    NAME = "sparse-iter-gather-lanes"
    lanes: int = -1

    def __post_init__(self) -> None:
        if self.lanes not in (-1, 0) and (self.lanes not in _POWERS):
            raise ValueError(
                "lanes must be -1 (the target's), 0 (off) or a power of two from 2 to 64, "
                f"got {self.lanes}"
            )

    def _lanes(self, func: ir.Operation, element: ir.FloatType) -> int:
        if self.lanes >= 0:
            return self.lanes
        from sparsecomp.ir.targets import function_target, module_targets
        from sparsecomp.targets import CpuTarget

        if not module_targets(func):  # no declared target: not this machine's vendor
            return 0
        target = function_target(func)
        if not isinstance(target, CpuTarget) or target.tune != "amd":
            return 0
        lanes = target.vector_bits // element.width
        return lanes if lanes in _POWERS else 0

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        funcs = [f for f in preorder(op) if f.name == "func.func"]
        for func in funcs:
            found = [m for loop in preorder(func) if (m := _match(loop)) is not None]
            for match in found:
                lanes = self._lanes(func, ir.FloatType(match.loop.results[0].type))
                if lanes >= 2:
                    _rewrite(match, lanes)
