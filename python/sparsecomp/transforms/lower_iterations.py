"""Pass ``sparse-iter-lower-iterations`` (stage I -> II, SparseTIR's LowerSparseIter)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from mlir import ir
from mlir.passmanager import ExternalPass

from sparsecomp.errors import SparsecompError
from sparsecomp.ir.attrs import encoding_of
from sparsecomp.ir.walk import preorder
from sparsecomp.lowering.slices import DEFAULT_SLICE_BYTES
from sparsecomp.options import unroll_error, vector_bits_error
from sparsecomp.transforms.base import SparsecompPass


def _encoded(op: ir.Operation) -> bool:
    return any(encoding_of(v.type) is not None for v in [*op.operands, *op.results])


#: Layout conversions (:mod:`sparsecomp.lowering.convert`).
CONVERSIONS = ("sparse_iter.set_encoding", "sparse_iter.unset_encoding")
_OWN_OPS = ("sparse_iter.sparsify", *CONVERSIONS)


def _rewrite(op: ir.Operation, build: Callable[[], ir.Value]) -> bool:
    """Replace ``op`` by what ``build`` emits before it; a refusal is an error at ``op``."""
    try:
        with ir.InsertionPoint(op), op.location:
            result = build()
    except SparsecompError as exc:
        op.location.emit_error(f"cannot lower this {op.name}: {exc}")
        return False
    op.results[0].replace_all_uses_with(result)
    op.erase()
    return True


def _pass_hint(op: ir.Operation, result: ir.Value) -> None:
    """Move a part's hints (:mod:`sparsecomp.lowering.hints`) onto its parallel row loop."""
    from sparsecomp.lowering import hints
    from sparsecomp.lowering.loops import PARALLEL_ATTR

    loop = getattr(result.owner, "operation", result.owner)
    if not isinstance(loop, ir.Operation) or PARALLEL_ATTR not in loop.attributes:
        return
    for name in hints.ALL:
        if name in op.attributes:
            loop.attributes[name] = op.attributes[name]


def _erase_if_unused(init: ir.Operation | ir.Block) -> None:
    """Erase ``init``, an output's former ``tensor.empty``, where nothing uses it now."""
    if not isinstance(init, ir.Block) and init.name == "tensor.empty":
        if not list(init.results[0].uses):
            init.erase()


def _element_bits(op: ir.Operation) -> int:
    ty = ir.RankedTensorType(op.results[0].type).element_type
    return ir.FloatType(ty).width if isinstance(ty, ir.FloatType) else ir.IntegerType(ty).width


@dataclasses.dataclass(frozen=True)
class LowerIterationsPass(SparsecompPass):
    """Lower linalg.generic ops over sparse tensors to loops in position space.

    Each ``linalg.generic`` with an operand whose type carries a
    ``#sparse_iter.layout`` becomes an ``scf.for`` nest that walks the
    storage levels of one sparse input (the *driver*) and visits its stored
    entries only; the driver's buffers are read through
    ``sparse_iter.positions``/``coordinates``/``values``, the dense operands
    with ``tensor.extract`` or, along the vectorized dimension,
    ``vector.transfer_read`` with masks. Loop order, output hoisting,
    vectorization and the zero analysis are described in
    :mod:`sparsecomp.lowering.plan` and :mod:`sparsecomp.lowering.zeros`;
    the outermost loop, when its iterations write disjoint outputs, carries
    ``sparse_iter.parallel`` (and, for a part of a composable layout, the hints
    of :mod:`sparsecomp.lowering.hints`). Semantics follow linalg exactly: the output
    starts from the ``outs`` operand (filled with zeros first when the body
    yields zero wherever the driver is zero) and reductions accumulate into it.

    Outputs with a structure of their own (SpGEMM; sums and products of
    differently structured operands) are built row by row with workspaces
    (:mod:`sparsecomp.lowering.rowplan`) and returned by
    ``sparse_iter.assemble``. ``sparse_iter.sparsify`` with a streaming
    sparsifier (``threshold``, ``keep_all``) becomes a CSR result built the
    same way, fused with an elementwise producer
    (:mod:`sparsecomp.lowering.sparsify`). Layout conversions
    (``sparse_iter.set_encoding`` to CSR or CSC from a layout or a dense
    tensor, ``unset_encoding`` to dense) walk the source's entries
    (:mod:`sparsecomp.lowering.convert`). An op over a composable operand
    that accumulates into its output runs once per part, each part read with
    ``sparse_iter.get_part`` (:mod:`sparsecomp.lowering.parts`).

    Named linalg ops must be generalized first (``linalg-generalize-named-ops``;
    the ``sparsecomp-cpu`` pipeline does). Ops it cannot lower (bodies that do not
    vanish at zero, column-major factors of a product, sparse outputs other
    than CSR, non-streaming sparsifiers) are errors at the op's location;
    ``sparse-iter-mark-upstream`` hands such functions to the upstream
    sparsifier first.

    Options: ``vector-bits`` is the vector register width to target (-1,
    the default: the ``vector_bits`` of the function's CPU target, see
    ``sparse_iter.target``; 0: scalar code); ``unroll`` is how many vectors
    one iteration keeps in flight (per row of a block where the rows of
    BSR blocks are jammed, fewer so that they fit the target's registers:
    :mod:`sparsecomp.lowering.jam`); ``panel-bytes`` (0, the default: off)
    splits the vector dimension into column panels whose gathered dense
    inputs fit that many bytes, each panel of a row-major one copied into a
    contiguous buffer first (cache tiling and packing of SpMM's ``B``; see
    :meth:`~sparsecomp.lowering.nest.NestEmitter.panels`); ``slice-bytes``
    (``DEFAULT_SLICE_BYTES``, 256 KiB; 0: off) runs the nest once per slice of
    the gathered rows (SpMM's ``B``) that fits that many bytes, where rows
    are long enough (:mod:`sparsecomp.lowering.slices`).

    Before:

    ```mlir
    %r = linalg.generic {indexing_maps = [#map, #map1, #map2],
                         iterator_types = ["parallel", "reduction"]}
        ins(%A, %x : tensor<?x?xf32, #csr>, tensor<?xf32>) outs(%y : tensor<?xf32>) {...}
    ```

    After:

    ```mlir
    %pos = sparse_iter.positions %A[1] : tensor<?x?xf32, #csr> -> tensor<?xi32>
    %crd = sparse_iter.coordinates %A[1] : tensor<?x?xf32, #csr> -> tensor<?xi32>
    %val = sparse_iter.values %A : tensor<?x?xf32, #csr> -> tensor<?xf32>
    %r = scf.for %i = %c0 to %rows step %c1 iter_args(%out = %y) -> (tensor<?xf32>) {
      %lo = ... %pos[%i] ...  %hi = ... %pos[%i + 1] ...
      %y_i = tensor.extract %out[%i] : tensor<?xf32>
      %acc = scf.for %q = %lo to %hi step %c1 iter_args(%a = %y_i) -> (f32) {...}
      %new = tensor.insert %acc into %out[%i] : tensor<?xf32>
      scf.yield %new : tensor<?xf32>
    } {sparse_iter.parallel}
    ```
    """

    NAME = "sparse-iter-lower-iterations"
    vector_bits: int = -1
    unroll: int = 4
    panel_bytes: int = 0
    slice_bytes: int = DEFAULT_SLICE_BYTES

    def __post_init__(self) -> None:
        if (why := vector_bits_error(self.vector_bits)) is not None:
            raise ValueError(f"vector-bits {why}")
        if (why := unroll_error(self.unroll)) is not None:
            raise ValueError(f"unroll {why}")
        if self.panel_bytes < 0:
            raise ValueError(f"panel-bytes must be >= 0 (0: no panels), got {self.panel_bytes}")
        if self.slice_bytes < 0:
            raise ValueError(f"slice-bytes must be >= 0 (0: no slices), got {self.slice_bytes}")

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        targets = [
            inner
            for inner in preorder(op)
            if _encoded(inner)
            and (inner.name.startswith("linalg.") or inner.name in _OWN_OPS)
            and inner.name != "linalg.yield"
        ]
        from sparsecomp.lowering.sizes import record_generic

        for dense in preorder(op):  # upstream lowers these: the runtime checks their sizes
            if dense.name == "linalg.generic" and not _encoded(dense):
                record_generic(dense)
        ok = True
        for target in targets:
            if target.name == "sparse_iter.sparsify":
                ok = self._sparsify(target) and ok
            elif target.name in CONVERSIONS:
                ok = self._convert(target) and ok
            else:
                ok = self._lower(target) and ok
        if not ok:
            pass_.signal_pass_failure()

    def _vector_bits(self, op: ir.Operation) -> int:
        from sparsecomp.ir.targets import enclosing_function, function_target
        from sparsecomp.targets import CpuTarget

        if self.vector_bits >= 0:
            return self.vector_bits
        func = enclosing_function(op)
        target = function_target(func) if func is not None else None
        return target.vector_bits if isinstance(target, CpuTarget) else 0

    def _vector_registers(self, op: ir.Operation) -> int:
        """The vector registers of the function's CPU target: 32 with AVX-512 or on
        aarch64, else 16; without a target, 32 for 512-bit vectors, else 16."""
        from sparsecomp.ir.targets import enclosing_function, function_target
        from sparsecomp.targets import CpuTarget

        func = enclosing_function(op)
        target = function_target(func) if func is not None else None
        if isinstance(target, CpuTarget):
            wide = target.arch != "x86_64" or "avx512f" in target.features
            return 32 if wide else 16
        return 32 if self._vector_bits(op) == 512 else 16

    def _convert(self, op: ir.Operation) -> bool:
        from sparsecomp.lowering.convert import lower_conversion

        return _rewrite(op, lambda: lower_conversion(op))

    def _sparsify(self, op: ir.Operation) -> bool:
        from sparsecomp.lowering.sparsify import fused_producer, lower_sparsify

        fused: list[ir.Operation | None] = []

        def build() -> ir.Value:
            fused.append(fused_producer(op))
            return lower_sparsify(op)

        if not _rewrite(op, build):
            return False
        producer = fused[0]
        if producer is not None:
            init = producer.operands[len(producer.operands) - 1].owner
            producer.erase()
            if not isinstance(init, ir.Block) and not list(init.results[0].uses):
                init.erase()
        return True

    def _lower(self, op: ir.Operation) -> bool:
        from sparsecomp.lowering import choose_plan
        from sparsecomp.lowering.epilogue import consumer
        from sparsecomp.lowering.nest import NestEmitter
        from sparsecomp.lowering.parts import composable_input, split_parts
        from sparsecomp.lowering.rowemit import emit_rows
        from sparsecomp.lowering.rowplan import RowPlan
        from sparsecomp.lowering.sizes import record

        if op.name != "linalg.generic":
            op.location.emit_error(
                f"'{op.name}' on sparse tensors must be generalized first "
                "(run linalg-generalize-named-ops before sparse-iter-lower-iterations)"
            )
            return False
        try:
            if (number := composable_input(op)) is not None:
                return all([self._lower(part) for part in split_parts(op, number)])
            bits = _element_bits(op)
            lanes = self._vector_bits(op) // bits
            plan = choose_plan(op, vectorize=lanes >= 2)
        except SparsecompError as exc:
            op.location.emit_error(f"cannot lower this linalg.generic: {exc}")
            return False
        record(plan)
        fused: ir.Operation | None = None
        with ir.InsertionPoint(op), op.location:
            if isinstance(plan, RowPlan):
                result = emit_rows(plan)
            else:
                emitter = NestEmitter(
                    plan,
                    max(lanes, 1),
                    self.unroll,
                    self.panel_bytes,
                    self.slice_bytes,
                    self._vector_registers(op),
                    epilogue=consumer(op),
                )
                result = emitter.emit()
                fused = emitter.epilogue
        init = plan.output.value.owner
        _pass_hint(op, result)
        op.results[0].replace_all_uses_with(result)
        op.erase()
        _erase_if_unused(init)
        if fused is not None:  # applied as the nest wrote its output
            fused_init = fused.operands[1].owner
            fused.results[0].replace_all_uses_with(result)
            fused.erase()
            _erase_if_unused(fused_init)
        return True
