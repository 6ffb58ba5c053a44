"""sparsecomp's passes: a lazy registry from command-line name to pass class.

Each pass lives in its own module; the registry names the module so that
listing passes imports only what is asked for (xDSL's ``get_all_passes``).
Upstream MLIR passes are not listed here: pipelines use them by their
textual names and the PassManager resolves them.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable

from sparsecomp.errors import PipelineError
from sparsecomp.transforms.base import SparsecompPass

#: command-line name -> "module:Class" under sparsecomp.transforms
_REGISTRY: dict[str, str] = {
    "sparse-iter-approximate-math": "approximate_math:ApproximateMathPass",
    "sparse-iter-check-narrow-indices": "check_narrow_indices:CheckNarrowIndicesPass",
    "sparse-iter-check-reshapes": "check_reshapes:CheckReshapesPass",
    "sparse-iter-check-translatable": "check_translatable:CheckTranslatablePass",
    "sparse-iter-check-whole-blocks": "check_whole_blocks:CheckWholeBlocksPass",
    "sparse-iter-clone-per-target": "clone_per_target:ClonePerTargetPass",
    "sparse-iter-cpu-function-targets": "cpu_function_targets:CpuFunctionTargetsPass",
    "sparse-iter-decompose-aggregates": "decompose_aggregates:DecomposeAggregatesPass",
    "sparse-iter-decompose-formats": "decompose_formats:DecomposeFormatsPass",
    "sparse-iter-densify-unsparsifiable": "densify_unsparsifiable:DensifyUnsparsifiablePass",
    "sparse-iter-destinations": "destinations:DestinationsPass",
    "sparse-iter-drop-destination-results": "drop_destination_results:DropDestinationResultsPass",
    "sparse-iter-emulate-gpu": "emulate_gpu:EmulateGpuPass",
    "sparse-iter-fold-encodings": "fold_encodings:FoldEncodingsPass",
    "sparse-iter-forward-returned-arguments": (
        "forward_returned_arguments:ForwardReturnedArgumentsPass"
    ),
    "sparse-iter-gpu-host-alloc": "gpu_host_alloc:GpuHostAllocPass",
    "sparse-iter-gpu-kernel-bodies": "gpu_kernel_bodies:GpuKernelBodiesPass",
    "sparse-iter-gpu-map-loops": "gpu_map_loops:GpuMapLoopsPass",
    "sparse-iter-gpu-stage-structure": "gpu_stage_structure:GpuStageStructurePass",
    "sparse-iter-gpu-tensorize": "gpu_tensorize:GpuTensorizePass",
    "sparse-iter-gather-lanes": "gather_lanes:GatherLanesPass",
    "sparse-iter-huge-pages": "huge_pages:HugePagesPass",
    "sparse-iter-horizontal-fusion": "horizontal_fusion:HorizontalFusionPass",
    "sparse-iter-guard-coordinates": "guard_coordinates:GuardCoordinatesPass",
    "sparse-iter-import-sparse-tensor": "import_sparse_tensor:ImportSparseTensorPass",
    "sparse-iter-lower-atomics": "lower_atomics:LowerAtomicsPass",
    "sparse-iter-lower-buffers": "lower_buffers:LowerBuffersPass",
    "sparse-iter-lower-iterations": "lower_iterations:LowerIterationsPass",
    "sparse-iter-lower-upstream": "lower_upstream:LowerUpstreamPass",
    "sparse-iter-mark-entry-points": "mark_entry_points:MarkEntryPointsPass",
    "sparse-iter-mark-upstream": "mark_upstream:MarkUpstreamPass",
    "sparse-iter-omp-schedule": "omp_schedule:OmpSchedulePass",
    "sparse-iter-order-levels": "order_levels:OrderLevelsPass",
    "sparse-iter-pack-entry-points": "pack_entry_points:PackEntryPointsPass",
    "sparse-iter-parallelize": "parallelize:ParallelizePass",
    "sparse-iter-privatize-allocas": "privatize_allocas:PrivatizeAllocasPass",
    "sparse-iter-report-conversions": "report_conversions:ReportConversionsPass",
    "sparse-iter-safe-division": "safe_division:SafeDivisionPass",
    "sparse-iter-sequentialize-racy-loops": "sequentialize_racy_loops:SequentializeRacyLoopsPass",
    "sparse-iter-set-encodings": "set_encodings:SetEncodingsPass",
    "sparse-iter-soa-coo": "soa_coo:SoaCooPass",
    "sparse-iter-sparse-mma-operands": "sparse_mma_operands:SparseMmaOperandsPass",
    "sparse-iter-specialize-encodings": "specialize_encodings:SpecializeEncodingsPass",
    "sparse-iter-strided-vector-access": "strided_vector_access:StridedVectorAccessPass",
    "sparse-iter-verify": "verify:VerifyPass",
    "sparse-iter-widen-bool-buffers": "widen_bool_buffers:WidenBoolBuffersPass",
    "sparse-iter-wrap-upstream": "wrap_upstream:WrapUpstreamPass",
}


def _loader(target: str) -> Callable[[], type[SparsecompPass]]:
    module, cls = target.split(":")

    def load() -> type[SparsecompPass]:
        return getattr(importlib.import_module(f"sparsecomp.transforms.{module}"), cls)

    return load


def get_all_passes() -> dict[str, Callable[[], type[SparsecompPass]]]:
    """Name -> zero-argument loader of the pass class, sorted by name."""
    return {name: _loader(target) for name, target in sorted(_REGISTRY.items())}


def get_pass(name: str) -> type[SparsecompPass]:
    """The pass class called ``name``; :class:`PipelineError` listing valid names if unknown."""
    if name not in _REGISTRY:
        raise PipelineError(unknown_pass_message(name))
    return _loader(_REGISTRY[name])()


def unknown_pass_message(name: str) -> str:
    close = difflib.get_close_matches(name, _REGISTRY, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    valid = ", ".join(sorted(_REGISTRY))
    return (
        f"unknown pass '{name}'{hint}; sparsecomp passes: {valid}"
        "; upstream passes: sparsecomp-opt --list-upstream-passes"
    )


def is_sparsecomp_pass(name: str) -> bool:
    return name in _REGISTRY
