"""The upstream-sparsifier fallback of the CPU driver.

Functions that ``sparse-iter-mark-upstream`` marked at the end of stage I
(``sparse_iter.upstream = "<reason>"``, ``#sparse_tensor`` types) leave the
module (:func:`split`) and are compiled apart by MLIR's ``sparsifier``
(:func:`pipeline`) in a worker subprocess (:mod:`.upstream_worker`), so that
an assertion in an upstream pass becomes an error instead of killing the
caller. The sparsifier's pass list runs as is, with two sparsecomp passes
where the storage is still explicit: ``sparse-iter-widen-bool-buffers``
(this MLIR build aborts lowering stores to ``memref<?xi1>``) and
``sparse-iter-wrap-upstream`` (public functions get sparsecomp's buffer ABI,
dynamic shapes included). ``sparse-iter-lower-upstream`` drives this
and splices the LLVM-dialect result back into the program's module.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from mlir import ir, passmanager

from sparsecomp.errors import FormatError, SparsecompError
from sparsecomp.formats.layout import Layout
from sparsecomp.ir import whole_blocks
from sparsecomp.ir.calls import functions, name_of
from sparsecomp.ir.upstream import is_sparse_tensor_encoding, layout_from_sparse_tensor
from sparsecomp.ir.walk import preorder
from sparsecomp.lowering import sizes
from sparsecomp.lowering.abi import abi_json, describe, is_uncallable, static_shape, uncallable
from sparsecomp.targets import CpuTarget
from sparsecomp.transforms.import_sparse_tensor import UPSTREAM_ATTR
from sparsecomp.transforms.mark_upstream import DECLARED_ATTR
from sparsecomp.transforms.wrap_upstream import C_INTERFACE, SIGNATURE_ATTR

INPUT, OUTPUT = "upstream.mlir", "upstream-llvm.mlir"
#: sparsecomp passes run where the sparsifier's storage is explicit (before
#: the storage specifier is lowered to an LLVM struct); strided-vector-access
#: fixes the vectorizer's (vl > 0) loads of array-of-structs COO coordinates;
#: safe-division gives integer division by zero 0, as sparsecomp's own road does
#: (a kernel dividing by a sparse operand's value died of SIGFPE here).
OWN_PASSES = (
    "sparse-iter-widen-bool-buffers,sparse-iter-strided-vector-access,sparse-iter-wrap-upstream,"
    "sparse-iter-safe-division,"
)
#: sparsecomp passes run on tensors before the sparsifier: COO coordinates SoA
#: (sparsecomp's ABI), levels ordered (the sparsifier assumes it) and dynamic-shape
#: BSR tensors checked to be whole blocks where they are built (it stores them so),
#: narrow index buffers checked where it builds them (it lets them wrap), and the
#: sizes of a sparse tensor's expand_shape (it writes past its buffers where they do
#: not multiply out).
FIRST_PASSES = (
    "sparse-iter-soa-coo,sparse-iter-order-levels,sparse-iter-check-whole-blocks,"
    "sparse-iter-check-narrow-indices,sparse-iter-check-reshapes,"
)
_SPECIFIER_TO_LLVM = "sparse-storage-specifier-to-llvm"
#: Before the sparsifier proper: ops whose bodies it cannot sparsify get dense inputs.
DENSIFY = "sparse-iter-densify-unsparsifiable,"
#: The same for every op with sparse inputs or results (:func:`densified`).
DENSIFY_ALL = "sparse-iter-densify-unsparsifiable{all=true},"
_SPARSIFY = "sparsification-and-bufferization"
_PARALLEL = "parallelization-strategy=dense-outer-loop"


@dataclass
class Part:
    """The functions that go through the sparsifier.

    ``module`` holds them; ``marked`` maps each name to ``(location or None,
    reason)``; ``functions`` are the manifest entries of the public ones.
    """

    module: ir.Module
    marked: dict[str, tuple[str | None, str]]
    functions: dict[str, Any] = field(default_factory=dict)


#: bf16 arithmetic in f32 and the conversions as integer arithmetic, before LLVM
#: (as sparsecomp-cpu-codegen does): LLVM's code for bf16 calls __truncsfbf2, which
#: GCC 12's libgcc lacks, and the kernel did not load.
BF16_PASSES = (
    "arith-emulate-unsupported-floats{source-types=bf16 target-type=f32},"
    "arith-expand{include-bf16=true}"
)


def pipeline(cpu: CpuTarget, vector_bits: int = -1) -> str:
    """The sparsifier's pass list with sparsecomp's passes and, if threaded, OpenMP.

    ``vector_bits``: -1 for the target's width, 0 for scalar code.
    """
    vector_bits = cpu.vector_bits if vector_bits < 0 else vector_bits
    flags = ["enable-runtime-library=false"]
    if vector_bits:
        lanes = vector_bits // 32  # 32-bit lanes; wider types are split by LLVM
        flags += [f"vl={lanes}", "enable-index-optimizations=true"]
        flags += ["reassociate-fp-reductions=true"]
    threaded = cpu.threads != 1
    if threaded:
        flags.append(_PARALLEL)
    with ir.Context():
        sparsifier = f"builtin.module(sparsifier{{{' '.join(flags)}}})"
        text = str(passmanager.PassManager.parse(sparsifier))
    text = text.removeprefix("builtin.module(").removesuffix(")")
    at = text.index(_SPARSIFY)
    text = text[:at] + DENSIFY + text[at:]
    at = text.index(_SPECIFIER_TO_LLVM)
    text = FIRST_PASSES + text[:at] + OWN_PASSES + text[at:]
    at = text.index("convert-to-llvm{")
    text = text[:at] + BF16_PASSES + "," + text[at:]
    if not threaded:
        return text
    # The stock sparsifier lowers scf.parallel sequentially (convert-scf-to-cf):
    # OpenMP first, with memref-to-llvm for the alloca_scope it creates (before
    # scf-to-cf splits its region), and omp-to-llvm before the final conversion.
    # Loops whose iterations may write one element (a reduction scattered into the
    # output: CSC SpMV) run sequentially; scratch allocas the sparsifier hoists
    # out of a parallel loop (COO/DCSR iterators) are made private to its iterations.
    omp = "sparse-iter-sequentialize-racy-loops,sparse-iter-privatize-allocas,convert-scf-to-openmp"
    omp += f"{{num-threads={cpu.threads}}}" if cpu.threads else ""
    scf_to_cf = text.index("func.func(convert-scf-to-cf")
    to_llvm = text.index("convert-to-llvm{")
    return (
        f"{text[:scf_to_cf]}{omp},expand-strided-metadata,lower-affine,finalize-memref-to-llvm,"
        f"{text[scf_to_cf:to_llvm]}convert-openmp-to-llvm,{text[to_llvm:]}"
    )


def sequential(pipeline: str) -> str | None:
    """``pipeline`` with the sparsifier's loops left sequential; None if they already are.

    The worker retries a threaded build that failed with it (an upstream
    assertion or refusal under ``dense-outer-loop``); never a fix for wrong
    results, which :data:`DENSIFY` and ``sparse-iter-privatize-allocas`` address.
    """
    if _PARALLEL not in pipeline:
        return None
    return pipeline.replace(_PARALLEL, "parallelization-strategy=none")


def densified(pipeline: str) -> str:
    """``pipeline`` with every ``linalg.generic`` that has sparse inputs or results
    computed dense (:data:`DENSIFY` ``{all=true}``): dense copies of its sparse
    inputs, its sparse results converted back from dense ones.

    The worker's last try at a build the sparsifier refused or crashed on (it
    aborts on ``select(cmpf(x, y), x, y)`` of a sparse and a dense operand,
    segfaults on ``A + v`` over DCSR or CSC ``A`` and on ``exp(A)`` into a CSR
    result, and cannot build ``max(A, D)`` into one): exact for every body, at
    the cost of the dense iteration space for those ops.
    """
    return pipeline.replace(DENSIFY, DENSIFY_ALL)


def _location(op: ir.Operation) -> str | None:
    loc = op.location
    return f"{loc.filename}:{loc.start_line}:{loc.start_col}" if loc.is_a_file() else None


def _abi_layout(ty: ir.Type, argument: bool = False) -> Layout | None:
    """The sparsecomp layout of an upstream-encoded tensor type.

    sparse_iter keeps every level's coordinates apart, so SoA singletons are
    plain singletons here. Arguments are ordered (``sparse-iter-order-levels``
    makes the sparsifier's types so): the runtime sorts nonordered data.
    """
    if not isinstance(ty, ir.RankedTensorType) or not is_sparse_tensor_encoding(ty.encoding):
        return None
    layout = layout_from_sparse_tensor(ty.encoding)
    levels = tuple(
        dataclasses.replace(lv, soa=False, nonordered=lv.nonordered and not argument)
        for lv in layout.levels
    )
    return dataclasses.replace(layout, levels=levels)


def _record_same_sizes(func: ir.Operation) -> None:
    """Argument dims one linalg loop indexes must agree (``sizes.ATTR``, read by the
    runtime): each structured op's, as for sparse_iter's road (``sizes.record_generic``)."""
    for op in preorder(func):
        if op.name.startswith("linalg.") and "indexing_maps" in op.attributes:
            sizes.record_generic(op)


def _abi(func: ir.Operation) -> str:
    fty = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    symbols = sizes.size_symbols(func, len(fty.inputs))
    try:
        args = []
        for n, ty in enumerate(fty.inputs):
            # a static size stays (the runtime checks it); a dynamic one may be a symbol
            static = static_shape(ty)
            shape = [symbols.get((n, d)) if s is None else s for d, s in enumerate(static)]
            args.append(describe(ty, _abi_layout(ty, argument=True), shape))
            if whole_blocks.dynamic_blocks(ty):  # kept blocked: the runtime checks its shape
                args[-1]["blocks"] = list(whole_blocks.block_sizes(ty))
        results = [describe(t, _abi_layout(t), static_shape(t)) for t in fty.results]
        if DECLARED_ATTR in func.attributes:  # held unblocked, returned as declared
            declared = ir.ArrayAttr(func.attributes[DECLARED_ATTR])
            for result, text in zip(results, declared, strict=True):
                if ir.StringAttr(text).value:
                    result["declared_layout"] = ir.StringAttr(text).value
    except (FormatError, ValueError) as exc:
        # Still compiled for the module's own callers; Python is told it cannot call it.
        message = exc.message if isinstance(exc, SparsecompError) else str(exc)
        return uncallable(f"'{name_of(func)}' has no sparsecomp ABI: {message}")
    return abi_json(args, results)


def _public(func: ir.Operation) -> bool:
    vis = func.attributes["sym_visibility"] if "sym_visibility" in func.attributes else None
    return vis is None or ir.StringAttr(vis).value == "public"


def split(module: ir.Operation) -> Part | None:
    """Move the marked functions of a module op into a module of their own.

    None if there are none. Public ones get their ABI entry (as
    ``sparse-iter-lower-buffers`` gives ours), read-only tensor arguments
    and the C interface.
    """
    marked = [f for f in functions(module) if UPSTREAM_ATTR in f.attributes]
    if not marked:
        return None
    with module.context, ir.Location.unknown():
        reasons = {
            name_of(f): (_location(f), ir.StringAttr(f.attributes[UPSTREAM_ATTR]).value)
            for f in marked
        }
        part = Part(ir.Module.create(), reasons)
        for func in marked:
            if func.regions[0].blocks:
                _record_same_sizes(func)
        sizes.record_calls(marked)  # what private callees require of their callers
        for func in marked:
            abi = _abi(func) if _public(func) and func.regions[0].blocks else None
            if abi is not None:
                entry = {"symbol": f"_mlir_ciface_{name_of(func)}", "abi": json.loads(abi)}
                part.functions[name_of(func)] = entry
            if abi is not None and not is_uncallable(abi):  # an entry point for Python
                _read_only_arguments(func)
                func.attributes[C_INTERFACE] = ir.UnitAttr.get()
                func.attributes[SIGNATURE_ATTR] = func.attributes["function_type"]
            func.detach_from_parent()
            part.module.body.append(func)
    return part


def _read_only_arguments(func: ir.Operation) -> None:
    fty = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
    false = ir.BoolAttr.get(False, func.context)
    old = ir.ArrayAttr(func.attributes["arg_attrs"]) if "arg_attrs" in func.attributes else None
    attrs = []
    for n, ty in enumerate(fty.inputs):
        entries = {a.name: a.attr for a in ir.DictAttr(old[n])} if old is not None else {}
        if isinstance(ty, ir.RankedTensorType):
            entries["bufferization.writable"] = false
        attrs.append(ir.DictAttr.get(entries, func.context))
    func.attributes["arg_attrs"] = ir.ArrayAttr.get(attrs, func.context)
