"""Pass ``sparse-iter-gpu-tensorize``."""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from typing import Any

from mlir import ir
from mlir.dialects import bufferization, func, memref, tensor
from mlir.passmanager import ExternalPass

from sparsecomp.dialects import sparse_iter
from sparsecomp.formats.composable import Composable
from sparsecomp.formats.layout import Layout, short_name, standard_layout
from sparsecomp.ir.attrs import layout_of
from sparsecomp.ir.context import emit_remark
from sparsecomp.ir.targets import function_target
from sparsecomp.lowering.loops import index
from sparsecomp.lowering.mma_kernels import BsrMma, bsr_spmm
from sparsecomp.lowering.mma_nm_dense_kernels import NmDenseMma, nm_dense_spmm
from sparsecomp.lowering.mma_packed_kernels import PackedBsrMma, packed_bsr_spmm
from sparsecomp.lowering.mma_sp_kernels import NmMma, nm_spmm
from sparsecomp.lowering.mma_sp_staged_kernels import NmMmaStaged, staged_declaration
from sparsecomp.lowering.reader import int_type, rank1
from sparsecomp.targets import CudaTarget
from sparsecomp.targets.fragments import for_inputs
from sparsecomp.transforms.base import SparsecompPass

si: Any = sparse_iter
#: The MMA shape each input element type needs on the target.
_NEEDS = {"f32": "m16n8k8", "f16": "m16n8k16"}
#: The first sm with each input type's MMA: f32 runs as tf32, which sm_75's
#: m16n8k8 (f16 only) lacks (ptxas: "Feature '.tf32' requires .target sm_80").
_FIRST_SM = {"f32": 80, "f16": 80}
_MATMUL_MAPS = (
    "affine_map<(d0, d1, d2) -> (d0, d2)>",
    "affine_map<(d0, d1, d2) -> (d2, d1)>",
    "affine_map<(d0, d1, d2) -> (d0, d1)>",
)


def _matmul_maps(op: ir.Operation) -> bool:
    """``linalg.matmul`` (default maps), or a generic with its maps and three operands."""
    if op.name == "linalg.matmul":
        if "indexing_maps" not in op.attributes:
            return True
        maps = ir.ArrayAttr(op.attributes["indexing_maps"])
        return tuple(str(m) for m in maps) == _MATMUL_MAPS
    if op.name != "linalg.generic":
        return False
    maps = tuple(str(m) for m in ir.ArrayAttr(op.attributes["indexing_maps"]))
    return maps == _MATMUL_MAPS and len(op.operands) == 3


def _product_shaped(op: ir.Operation) -> bool:
    """Whether ``op`` is a product of two matrices into a third whatever its maps: a
    ``linalg.matmul``, or a generic of three 2-d operands over two parallel loops and
    one reduction whose body is a multiply-add."""
    if any(
        not isinstance(v.type, ir.RankedTensorType) or ir.RankedTensorType(v.type).rank != 2
        for v in op.operands
    ):
        return False
    if op.name == "linalg.matmul":
        return True
    if op.name != "linalg.generic":
        return False
    kinds = [str(k) for k in ir.ArrayAttr(op.attributes["iterator_types"])]
    return sorted(k.split("<")[-1].rstrip(">") for k in kinds) == [
        "parallel", "parallel", "reduction"
    ] and _multiply_adds(op.regions[0].blocks[0])


def is_matmul(op: ir.Operation) -> bool:
    """``linalg.matmul`` (default maps), or a generic with its maps and a mul-add body."""
    return _matmul_maps(op) and (
        op.name == "linalg.matmul" or _multiply_adds(op.regions[0].blocks[0])
    )


def _multiply_adds(body: ir.Block) -> bool:
    """Whether ``body`` yields ``out + a * b`` of its arguments (each maybe widened by extf)."""
    a, b, out = body.arguments
    ops = [o.operation for o in body.operations]
    widened: dict[ir.Value, ir.Value] = {a: a, b: b}
    for op in ops[:-3]:
        if op.name != "arith.extf" or op.operands[0] not in (a, b):
            return False
        widened[op.results[0]] = op.operands[0]
    if len(ops) < 3:
        return False
    mul, add, done = ops[-3:]
    if (mul.name, add.name, done.name) != ("arith.mulf", "arith.addf", "linalg.yield"):
        return False
    factors = {widened.get(v) for v in mul.operands}
    terms = set(add.operands)
    return (
        factors == {a, b} and terms == {out, mul.results[0]} and done.operands[0] == add.results[0]
    )


def _bsr_blocks(layout: Any) -> tuple[int, int] | None:
    """``(R, C)`` if ``layout`` is BSR (any index widths), else None."""
    if not isinstance(layout, Layout) or layout.rank != 2:
        return None
    plain = replace(layout, pos_width=32, crd_width=32, index_group="", nm_metadata="")
    rows, cols = layout.dim_to_lvl.block_sizes()
    return (rows, cols) if short_name(plain) == f"bsr:{rows}x{cols}" else None


def _is_mma_sp_2_4(layout: Any) -> bool:
    """Whether ``layout`` is 2:4 along rows with ``mma.sp`` m16n8k16 metadata."""
    return (
        isinstance(layout, Layout) and _is_2_4(layout) and (layout.nm_metadata == "mma_sp_m16n8k16")
    )


def _is_2_4(layout: Layout) -> bool:
    """Whether ``layout`` is 2:4 along rows, whatever its metadata and index widths."""
    return _nm_ratio(layout) == (2, 4)


def _nm_ratio(layout: Any) -> tuple[int, int] | None:
    """``(N, M)`` if ``layout`` is N:M along rows (``nm:N:M``, whatever its metadata and
    index widths), else None."""
    if not isinstance(layout, Layout) or layout.rank != 2 or not layout.is_structured:
        return None
    level = layout.levels[-1]
    plain = replace(layout, pos_width=32, crd_width=32, index_group="", nm_metadata="")
    return (level.n, level.m) if plain == standard_layout(f"nm:{level.n}:{level.m}") else None


def _width_type(width: int) -> str:
    return f"i{width or 64}"


@dataclasses.dataclass(frozen=True)
class GpuTensorizePass(SparsecompPass):
    """Run BSR and 2:4 x dense products of CUDA functions on tensor cores (``mma.sync``/``.sp``).

    Matches ``linalg.matmul`` (or a ``linalg.generic`` with its maps and a
    multiply-add body) whose first operand is BSR with ``R x C`` blocks, ``R``
    a multiple of 16 and ``C`` of the MMA's ``k`` (8 for f32, run as tf32;
    16 for f16), the second a dense matrix and the output a dense f32 matrix
    (or f16 for f16 inputs: the MMA then accumulates in f16, the type the
    program's ``outs`` gives its sums),
    in a function whose target is CUDA with that MMA shape
    (``m16n8k8``/``m16n8k16``). The product becomes a call of a private
    function whose ``gpu.launch`` has each warp own a 16-row slice of a block
    row and ``tiles`` groups of 8 output columns, and issue
    ``nvgpu.mma.sync`` per stored block and ``k`` slice, with every lane
    loading its fragment elements where the PTX ISA puts them
    (:mod:`sparsecomp.lowering.mma_kernels`). Smaller blocks (any ``R``;
    ``C`` at most ``k`` or a multiple of it: 3x3, 4x4, 8x8, 16x4 ...) pack
    several to an MMA: the kernel computes ``out^T = B^T A^T`` with 8 rows
    of a block row on the MMA's ``n`` and ``k // C`` blocks on its ``k``
    (:mod:`sparsecomp.lowering.mma_packed_kernels`). The operand buffers come from
    ``sparse_iter.positions``/``coordinates``/``values``; the result is a new
    buffer (``bufferization.to_tensor``).

    A first operand that is 2:4 along rows with ``mma.sp`` metadata
    (``nmMetadata = mma_sp_m16n8k16``, what a CUDA target with sparse MMAs
    resolves 2:4 to) in f16, with an f32 or f16 result, on a target with the
    sparse ``m16n8k16`` shape, goes to a kernel on ``nvgpu.mma.sp.sync``
    that reads the values and the metadata words: block-tiled, with A and B
    staged in shared memory (:mod:`sparsecomp.lowering.mma_sp_staged_kernels`;
    the call's callee is only declared here, and
    ``sparse-iter-gpu-kernel-bodies`` defines it after bufferization), or
    with ``staged=false`` warp-tiled from global memory
    (:mod:`sparsecomp.lowering.mma_sp_kernels`). Other n:m layouts along rows with indices as
    metadata, whose ``M`` divides the MMA's ``k`` (2:4 in f32, which
    ``mma.sp`` cannot take: its tf32 form is 1:2; 1:2, 1:4, 2:8 ...), go to
    dense ``mma.sync`` with each lane expanding its A elements from the
    group's values and indices
    (:mod:`sparsecomp.lowering.mma_nm_dense_kernels`); a 2:4 product placed
    there is a remark that says why not on the sparse tensor cores. Anything
    else is left to the scalar schedule, with a remark.

    Before (a CUDA function):

    ```mlir
    %r = linalg.matmul ins(%A, %B : tensor<?x?xf32, #bsr16x8>, tensor<?x?xf32>)
                       outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
    ```

    After:

    ```mlir
    %pos = sparse_iter.positions %A[1] ...   %crd = ...   %val = sparse_iter.values %A ...
    %out = memref.alloc(%m, %n) : memref<?x?xf32>
    call @__sparse_iter_bsr_mma_16x8_f32_i32_i32_w4t4(%pos_m, %crd_m, %val_m, %B_m, %C_m, %out)
    %r = bufferization.to_tensor %out restrict : memref<?x?xf32> to tensor<?x?xf32>
    // with @__sparse_iter_bsr_mma_...: gpu.launch ... nvgpu.mma.sync ... {mmaShape = [16, 8, 8],
    //                                                                      tf32Enabled}
    ```
    """

    NAME = "sparse-iter-gpu-tensorize"
    warps: int = 4
    tiles: int = 4
    #: f32 products on tf32 MMAs; false: they keep the scalar schedule (f32 FMAs).
    tf32: bool = True
    #: 16-row tiles a warp of the 2:4 kernel computes (each B fragment serves them all).
    row_tiles: int = 2
    #: 2:4 on the block-tiled kernel that stages A and B in shared memory
    #: (:mod:`sparsecomp.lowering.mma_sp_staged_kernels`); false: the warp-tiled one that
    #: reads global memory (``warps``, ``tiles``, ``row-tiles``), kept to compare them.
    staged: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.warps <= 32 or not 1 <= self.tiles <= 16:
            raise ValueError(f"warps must be in 1..32 and tiles in 1..16, got "
                             f"{self.warps} and {self.tiles}")  # fmt: skip
        if not 1 <= self.row_tiles <= 4:
            raise ValueError(f"row-tiles must be in 1..4, got {self.row_tiles}")

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        made: dict[str, str] = {}
        for function in [o.operation for o in op.regions[0].blocks[0].operations]:
            if function.name != "func.func" or not len(function.regions[0].blocks):
                continue
            device = function_target(function)
            if not isinstance(device, CudaTarget):
                continue
            for candidate in _walk(function):
                spec = self._spec(candidate, device)
                if isinstance(spec, str):  # a product the tensor cores could have run
                    emit_remark(candidate.location,
                                f"this product takes the scalar schedule: {spec}")  # fmt: skip
                elif spec is not None:
                    if isinstance(spec, NmDenseMma) and spec.why:
                        emit_remark(candidate.location, "this 2:4 product runs on the dense "
                                    f"tensor cores, not the sparse ones: {spec.why}")  # fmt: skip
                    _rewrite(candidate, spec)
                    made[spec.name] = _kernel(spec)
        if made:
            body = op.regions[0].blocks[0]
            kernels = ir.Module.parse("\n".join(made.values()), context=op.context)
            for kernel in list(kernels.body.operations):
                body.append(kernel.operation.detach_from_parent())

    def _spec(self, op: ir.Operation, device: CudaTarget) -> _Spec | str | None:
        """The kernel for ``op``; None where it is not a product of a BSR or 2:4 matrix
        and dense ones; or, where it is one the tensor cores do not take, why not."""
        if len(op.results) != 1 or len(op.operands) != 3:
            return None
        first = layout_of(op.operands[0].type)
        if isinstance(first, Composable) and _product_shaped(op):
            if any(_bsr_blocks(p.layout) or _nm_ratio(p.layout) for p in first.parts):
                return ("a composable operand's parts are multiplied part by part, and the "
                        "tensor cores take a whole BSR or n:m operand (prepare the matrix "
                        "as bsr:RxC for them)")  # fmt: skip
            return None
        if not _matmul_maps(op):
            if (_bsr_blocks(first) or _nm_ratio(first)) and _product_shaped(op):
                return ("its indexing maps are not C[m, n] += A[m, k] * B[k, n] (a "
                        "transposed operand: transpose it before the product)")  # fmt: skip
            return None
        a, b, out = (v.type for v in op.operands)
        layout = layout_of(a)
        if layout_of(b) is not None or layout_of(out) is not None:
            return None
        ratio = _nm_ratio(layout)
        blocks = _bsr_blocks(layout)
        if ratio is None and blocks is None:
            return None
        assert isinstance(layout, Layout)
        if op.name == "linalg.generic" and not _multiply_adds(op.regions[0].blocks[0]):
            body = sorted({o.operation.name for o in op.regions[0].blocks[0].operations}
                          - {"arith.mulf", "arith.addf", "arith.extf", "linalg.yield"})  # fmt: skip
            return ("its body is not out + a * b of its operands (each maybe widened)"
                    + (f": it has {', '.join(body)}" if body else ""))  # fmt: skip
        elements = [str(ir.RankedTensorType(t).element_type) for t in (a, b, out)]
        if elements[0] != elements[1]:
            return f"A holds {elements[0]} and B {elements[1]}; an MMA takes one type"
        acc = elements[2]
        if acc not in ("f32", "f16"):
            return f"the tensor cores accumulate in f32 or f16, and the result is {acc}"
        if acc == "f16" and elements[0] != "f16":
            return (f"{elements[0]} products accumulate in f32 on the tensor cores, and the "
                    "result is f16")  # fmt: skip
        if ratio is not None:
            return self._nm_spec(layout, ratio, elements[0], acc, device)
        assert blocks is not None
        why = self._dense_mma(elements[0], device)
        if why is not None:
            return why
        widths = _width_type(layout.pos_width), _width_type(layout.crd_width)
        spec = BsrMma(*blocks, elements[0], *widths, self.warps, self.tiles, acc)
        why = spec.supported()
        if why is None:
            return spec
        if PackedBsrMma.fits(*blocks, spec.shape.k) and spec.acc in ("f32", elements[0]):
            return PackedBsrMma(*blocks, elements[0], *widths, self.warps,
                                max(1, self.tiles // 2), acc)  # fmt: skip
        return why

    def _nm_spec(self, layout: Layout, ratio: tuple[int, int], element: str, acc: str,
                 device: CudaTarget) -> _Spec | str:  # fmt: skip
        """2:4 f16 with mma.sp metadata on the sparse tensor cores; other n:m layouts with
        indices whose M divides the MMA's k on the dense ones (rows expanded per lane)."""
        sparse_why = None
        if ratio != (2, 4):
            sparse_why = "the sparse tensor cores take 2:4"
        elif element != "f16":
            sparse_why = f"the sparse tensor cores take 2:4 in f16 (tf32 only 1:2), not {element}"
        elif "m16n8k16" not in device.sparse_mma_shapes:
            sparse_why = f"{device.chip} has no m16n8k16 sparse MMA (mma.sp)"
        elif not _is_mma_sp_2_4(layout):
            sparse_why = (f"A's 2:4 metadata is '{layout.nm_metadata or 'indices'}', not the "
                          "mma_sp_m16n8k16 words the sparse tensor cores read")  # fmt: skip
        if sparse_why is None:
            meta = _width_type(layout.crd_width)
            if self.staged and NmMmaStaged.from_name(NmMmaStaged(meta, acc=acc).name):
                return NmMmaStaged(meta, acc=acc)
            return NmMma(_width_type(layout.crd_width), self.warps, self.tiles, acc,
                         self.row_tiles)  # fmt: skip
        if layout.nm_metadata not in ("", "indices"):
            return f"{sparse_why}, and A's metadata ('{layout.nm_metadata}') holds no indices"
        why = self._dense_mma(element, device)
        if why is not None:
            return f"{sparse_why}; {why}"
        n, m = ratio
        k = for_inputs(element).k
        if not NmDenseMma.fits(n, m, k):
            return f"{sparse_why}, and {n}:{m} groups do not tile the {k}-wide k of an MMA"
        return NmDenseMma(n, m, element, _width_type(layout.crd_width), self.warps, self.tiles,
                          acc, why=sparse_why if ratio == (2, 4) else "")  # fmt: skip

    def _dense_mma(self, element: str, device: CudaTarget) -> str | None:
        """None where ``device`` has the dense MMA for ``element`` inputs (and tf32 is on
        for f32), else why not."""
        if element not in _NEEDS:
            return f"no tensor-core MMA takes {element} values (f16, or f32 as tf32)"
        if element == "f32" and not self.tf32:
            return "f32 products stay off the tensor cores' tf32 (tf32=false)"
        need = _NEEDS[element]
        if need not in device.mma_shapes or device.sm < _FIRST_SM[element]:
            return f"{device.chip} has no {need} MMA for {element}"
        return None


_Spec = BsrMma | PackedBsrMma | NmMma | NmMmaStaged | NmDenseMma


def _kernel(spec: _Spec) -> str:
    """The kernel's function, as MLIR text."""
    if isinstance(spec, BsrMma):
        return bsr_spmm(spec)
    if isinstance(spec, PackedBsrMma):
        return packed_bsr_spmm(spec)
    if isinstance(spec, NmDenseMma):
        return nm_dense_spmm(spec)
    if isinstance(spec, NmMmaStaged):  # defined after bufferization (its module doc)
        return staged_declaration(spec)
    return nm_spmm(spec)


def _walk(function: ir.Operation) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in ("linalg.matmul", "linalg.generic"):
            found.append(op)
        return ir.WalkResult.ADVANCE

    function.walk(visit)
    return found


def _buffer(value: ir.Value, dims: int) -> ir.Value:
    """A read-only buffer of the tensor ``value``, cast to all-dynamic sizes."""
    ty = ir.RankedTensorType(value.type)
    exact = ir.MemRefType.get(ty.shape, ty.element_type)
    buffer = bufferization.to_buffer(exact, value, read_only=True)
    dynamic = ir.MemRefType.get([ir.ShapedType.get_dynamic_size()] * dims, ty.element_type)
    return buffer if exact == dynamic else memref.cast(dynamic, buffer)


def _sparse_buffers(a: ir.Value, spec: _Spec) -> list[ir.Value]:
    """The buffers of ``a`` the kernel reads: BSR (pos, crd, values); 2:4 (values, metadata)."""
    layout = layout_of(a.type)
    assert isinstance(layout, Layout)
    element = ir.RankedTensorType(a.type).element_type
    if isinstance(spec, NmMma | NmMmaStaged | NmDenseMma):
        values = si.values(rank1(element), a)
        return [values, si.coordinates(rank1(int_type(layout.crd_width)), a, 2)]
    pos = si.positions(rank1(int_type(layout.pos_width)), a, 1)
    crd = si.coordinates(rank1(int_type(layout.crd_width)), a, 1)
    return [pos, crd, si.values(rank1(element), a)]


def _rewrite(op: ir.Operation, spec: _Spec) -> None:
    from sparsecomp.lowering.sizes import record_generic

    record_generic(op)  # the kernel trusts B's and C's sizes: the runtime checks them
    a, b, out = op.operands
    with ir.InsertionPoint(op), op.location:
        operands = [_buffer(v, 1) for v in _sparse_buffers(a, spec)]
        operands += [_buffer(b, 2), _buffer(out, 2)]
        sizes = [tensor.dim(out, index(k)) for k in range(2)]
        out_type = ir.RankedTensorType(op.results[0].type)
        acc = out_type.element_type
        dynamic = ir.ShapedType.get_dynamic_size()
        result = memref.alloc(ir.MemRefType.get([dynamic, dynamic], acc), sizes, [])
        func.call([], spec.name, [*operands, result])
        exact = ir.MemRefType.get(out_type.shape, acc)
        if exact != result.type:
            result = memref.cast(exact, result)
        done = bufferization.to_tensor(out_type, result, restrict=True)
    op.results[0].replace_all_uses_with(done)
    op.erase()
