"""Pass ``sparse-iter-wrap-upstream``."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from mlir import ir
from mlir.dialects import arith, func, memref
from mlir.dialects import sparse_tensor as st
from mlir.passmanager import ExternalPass

from sparsecomp.errors import FormatError
from sparsecomp.formats.dimmap import DimMap
from sparsecomp.ir import fatal, whole_blocks
from sparsecomp.ir.calls import functions, name_of
from sparsecomp.ir.upstream import is_sparse_tensor_encoding
from sparsecomp.transforms import check_whole_blocks
from sparsecomp.transforms.base import SparsecompPass

C_INTERFACE = "llvm.emit_c_interface"
#: Function attribute: the function type before sparsification (tensor types).
SIGNATURE_ATTR = "sparse_iter.tensor_signature"
_POSITIONS = (int(st.LevelFormat.compressed), int(st.LevelFormat.loose_compressed))
_SOA = st.LevelProperty.soa.value


#: Why array-of-structs COO has no buffer ABI (a public function with it stays uncallable).
AOS_COO = (
    "COO coordinates stored as an array of structs (singleton without soa) "
    "cannot cross the sparsecomp ABI; sparse-iter-soa-coo makes them soa unless "
    "the function or one it calls uses their storage (sparse_tensor.assemble, "
    "disassemble, coordinates, coordinates_buffer, print, a constant)"
)


@dataclasses.dataclass(frozen=True)
class Storage:
    """A sparse tensor type's flat storage: ``(specifier kind, level)`` per buffer, dim map."""

    fields: tuple[tuple[str, int | None], ...]
    dim_map: DimMap

    @classmethod
    def of(cls, ty: ir.Type) -> Storage | None:
        """None for other types; FormatError for array-of-structs COO."""
        if not isinstance(ty, ir.RankedTensorType) or not is_sparse_tensor_encoding(ty.encoding):
            return None
        enc = st.EncodingAttr(ty.encoding)
        fields: list[tuple[str, int | None]] = []
        formats = zip(enc.lvl_types, enc.lvl_formats_enum, strict=True)
        for lvl, (lt, fmt) in enumerate(formats):
            if fmt == int(st.LevelFormat.singleton) and not lt & _SOA:
                raise FormatError(AOS_COO)
            fields += [("pos_mem_sz", lvl)] if int(fmt) in _POSITIONS else []
            fields += [("crd_mem_sz", lvl)] if int(fmt) != int(st.LevelFormat.dense) else []
        text = str(enc.dim_to_lvl) if enc.dim_to_lvl else ""
        dim_map = DimMap.parse(text) if text else DimMap.identity(len(enc.lvl_types))
        return cls((*fields, ("val_mem_sz", None)), dim_map)


def _is_specifier(ty: ir.Type) -> bool:
    return str(ty).startswith("!sparse_tensor.storage_specifier<")


def groups(
    tensor_types: Sequence[ir.Type], types: Sequence[ir.Type]
) -> list[tuple[int, Storage | None]]:
    """``(first index in types, storage)`` per tensor-level type.

    A sparse tensor is its buffers then a specifier in ``types`` (the
    sparsified signature); anything else is one value. FormatError when the
    two signatures do not match this way.
    """
    out: list[tuple[int, Storage | None]] = []
    at = 0
    for ty in tensor_types:
        storage = Storage.of(ty)
        out.append((at, storage))
        at += 1 if storage is None else len(storage.fields) + 1
        if storage is not None and (at > len(types) or not _is_specifier(types[at - 1])):
            raise FormatError(f"the sparsified signature does not flatten {ty} as expected")
    if at != len(types):
        raise FormatError("the sparsified signature does not match the tensor signature")
    return out


class _Builder:
    """Emits the wrapper body (an insertion point and location must be active)."""

    def __init__(self) -> None:
        self.index = ir.IndexType.get()
        self.consts: dict[int, ir.Value] = {}

    def const(self, value: int) -> ir.Value:
        if value not in self.consts:
            self.consts[value] = arith.ConstantOp(self.index, value).result
        return self.consts[value]

    def set(self, spec: ir.Value, kind: str, lvl: int | None, value: ir.Value) -> ir.Value:
        level = None if lvl is None else ir.IntegerAttr.get(self.index, lvl)
        op = st.SetStorageSpecifierOp(spec, _kind(kind), value, level=level)
        return op.result

    def get(self, spec: ir.Value, kind: str, lvl: int | None) -> ir.Value:
        level = None if lvl is None else ir.IntegerAttr.get(self.index, lvl)
        return st.GetStorageSpecifierOp(spec, _kind(kind), level=level).result

    def specifier(self, spec_type: ir.Type, storage: Storage, buffers, dims) -> ir.Value:
        """A specifier for argument buffers (whole length used) and dimension sizes."""
        spec = st.storage_specifier_init(spec_type)
        for lvl, e in enumerate(storage.dim_map.results):
            size = dims[e.dim]
            if e.op == "floordiv":
                size = arith.CeilDivUIOp(size, self.const(e.const)).result
            elif e.op == "mod":
                size = self.const(e.const)
            spec = self.set(spec, "lvl_sz", lvl, size)
        for buffer, (kind, at) in zip(buffers, storage.fields, strict=True):
            spec = self.set(spec, kind, at, memref.DimOp(buffer, self.const(0)).result)
        return spec

    def unpack(self, storage: Storage, buffers, spec) -> list[ir.Value]:
        """A result's buffers cut to their used length, then its dimension sizes."""
        out = []
        dyn = ir.ShapedType.get_dynamic_size()
        for buffer, (kind, lvl) in zip(buffers, storage.fields, strict=True):
            used = self.get(spec, kind, lvl)
            out.append(
                memref.reinterpret_cast(buffer.type, buffer, [], [used], [], [0], [dyn], [1])
            )
        dims: dict[int, ir.Value] = {}
        for lvl, e in enumerate(storage.dim_map.results):
            if e.op != "mod":
                size = self.get(spec, "lvl_sz", lvl)
                dims[e.dim] = (
                    size if e.op == "id" else arith.MulIOp(size, self.const(e.const)).result
                )
        return out + [dims[d] for d in range(storage.dim_map.n_dims)]


def _kind(name: str) -> ir.Attribute:
    return ir.Attribute.parse(f"#sparse_tensor<kind {name}>")


def _abi_types(tensor_types: Sequence[ir.Type], types: Sequence[ir.Type]) -> list[ir.Type]:
    out: list[ir.Type] = []
    for first, storage in groups(tensor_types, types):
        if storage is None:
            out.append(types[first])
        else:
            out += types[first : first + len(storage.fields)]
            out += [ir.IndexType.get()] * storage.dim_map.n_dims
    return out


def _check_whole_blocks(ty: ir.Type, dims: list[ir.Value], name: str, module: ir.Operation) -> None:
    """Fail at run time unless ``dims`` divide into the blocks of ``ty`` (a dynamic-shape
    BSR type kept blocked, see ``sparse-iter-check-whole-blocks``)."""
    blocks = whole_blocks.dynamic_blocks(ty)
    if blocks:
        bad = fatal.any_not_whole([(dims[d], b) for d, b in blocks])
        place = fatal.where(ir.Location.current)
        fatal.fail_if(bad, check_whole_blocks.message(place, name, ty), dims, module)


def _emit_wrapper(
    inner: str, name: str, tensor: ir.FunctionType, fty: ir.FunctionType, module: ir.Operation
) -> None:
    abi = (_abi_types(tensor.inputs, fty.inputs), _abi_types(tensor.results, fty.results))
    wrapper = func.FuncOp(name, abi)
    wrapper.attributes[C_INTERFACE] = ir.UnitAttr.get()
    block = wrapper.add_entry_block()
    build = _Builder()
    with ir.InsertionPoint(block):
        args, at = [], 0
        inputs = groups(tensor.inputs, fty.inputs)
        for ty, (first, storage) in zip(tensor.inputs, inputs, strict=True):
            if storage is None:
                args.append(block.arguments[at])
                at += 1
                continue
            k, rank = len(storage.fields), storage.dim_map.n_dims
            buffers = list(block.arguments[at : at + k])
            dims = list(block.arguments[at + k : at + k + rank])
            _check_whole_blocks(ty, dims, name, module)
            args += [*buffers, build.specifier(fty.inputs[first + k], storage, buffers, dims)]
            at += k + rank
        call = func.CallOp(list(fty.results), ir.FlatSymbolRefAttr.get(inner), args)
        results: list[ir.Value] = []
        for first, storage in groups(tensor.results, fty.results):
            if storage is None:
                results.append(call.results[first])
                continue
            k = len(storage.fields)
            buffers = list(call.results[first : first + k])
            results += build.unpack(storage, buffers, call.results[first + k])
        func.ReturnOp(results)


def _fresh_name(name: str, taken: set[str]) -> str:
    candidate, n = f"{name}__sparsified", 0
    while candidate in taken:
        n += 1
        candidate = f"{name}__sparsified{n}"
    return candidate


def _public(op: ir.Operation) -> bool:
    vis = op.attributes["sym_visibility"] if "sym_visibility" in op.attributes else None
    return (vis is None or ir.StringAttr(vis).value == "public") and len(op.regions[0].blocks) > 0


def _signatures(f: ir.Operation) -> tuple[ir.FunctionType, ir.FunctionType]:
    """(tensor-level, sparsified) function types; FormatError if they do not match."""
    fty = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)
    tensor = ir.FunctionType(ir.TypeAttr(f.attributes[SIGNATURE_ATTR]).value)
    groups(tensor.inputs, fty.inputs)
    groups(tensor.results, fty.results)
    return tensor, fty


#: On a public function left unwrapped: why Python cannot call it (read by the driver).
UNCALLABLE_ATTR = "sparse_iter.uncallable"


@dataclasses.dataclass(frozen=True)
class WrapUpstreamPass(SparsecompPass):
    """Give functions the upstream sparsifier lowered sparsecomp's buffer ABI.

    Runs inside the upstream sparsifier's pipeline, after
    ``sparsification-and-bufferization`` and before
    ``sparse-storage-specifier-to-llvm``: a sparse tensor is then its
    buffers (``memref``s, upstream field order) and a
    ``!sparse_tensor.storage_specifier`` holding level sizes and used buffer
    lengths. Each public function with a specifier in its signature and a
    ``sparse_iter.tensor_signature`` (its type before sparsification, which
    the fallback records on the functions Python calls) is renamed
    ``<name>__sparsified`` (private; calls follow) and a public wrapper
    ``<name>`` with ``llvm.emit_c_interface`` takes its place with the ABI
    of docs/cpu-abi.md: per sparse tensor its buffers then its dimension
    sizes (``index``), dynamic shapes included. The wrapper builds each
    argument's specifier (``lvl_sz`` from the dimension sizes through
    the encoding's map, ``*_mem_sz`` from the buffer lengths) and returns a
    sparse result's buffers cut to their used length
    (``memref.reinterpret_cast``) and its dimension sizes (from ``lvl_sz``).
    A BSR argument of dynamic shape (one whose storage the program reads, so
    it keeps its blocks; see ``sparse-iter-check-whole-blocks``) is checked
    to be whole blocks: if not, the program reports its shape and exits.
    Upstream fields and sparsecomp buffers agree in order (``pos{l}``,
    ``crd{l}``, values) when singleton levels are SoA
    (``sparse-iter-soa-coo`` makes them so). A public function with an
    array-of-structs COO level left in its signature (it reads that storage)
    is not wrapped: it runs inside the program, and ``sparse_iter.uncallable``
    says why Python cannot call it (the fallback puts that in its ABI entry).
    Signatures that do not match their tensor signature are errors.

    Before:

    ```mlir
    func.func @mul(%pos: memref<?xi32>, %crd: memref<?xi32>, %val: memref<?xf32>,
                   %spec: !sparse_tensor.storage_specifier<#CSR>, ...) -> memref<?x?xf32>
    ```

    After:

    ```mlir
    func.func private @mul__sparsified(...)  // the function above
    func.func @mul(%pos: memref<?xi32>, %crd: memref<?xi32>, %val: memref<?xf32>,
                   %rows: index, %cols: index, ...) -> memref<?x?xf32>
        attributes {llvm.emit_c_interface} {
      %s0 = sparse_tensor.storage_specifier.init : !sparse_tensor.storage_specifier<#CSR>
      %s1 = sparse_tensor.storage_specifier.set %s0 lvl_sz at 0 with %rows : ...
      ...
      %r = call @mul__sparsified(%pos, %crd, %val, %s5, ...) : (...) -> memref<?x?xf32>
      return %r : memref<?x?xf32>
    }
    ```
    """

    NAME = "sparse-iter-wrap-upstream"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        taken = {name_of(f) for f in functions(op)}
        for f in [f for f in functions(op) if _public(f)]:
            fty = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)
            if not any(_is_specifier(t) for t in [*fty.inputs, *fty.results]):
                continue
            if SIGNATURE_ATTR not in f.attributes:  # not called from Python: no ABI wanted
                continue
            name = name_of(f)
            try:
                tensor, fty = _signatures(f)
            except FormatError as exc:
                if exc.message == AOS_COO:
                    # No buffer ABI (AoS COO kept because the function reads its storage):
                    # it still runs inside the program; its ABI says Python cannot call it.
                    del f.attributes[SIGNATURE_ATTR]
                    why = f"'{name}' has no sparsecomp ABI: {exc.message}"
                    f.attributes[UNCALLABLE_ATTR] = ir.StringAttr.get(why)
                    continue
                f.location.emit_error(f"cannot give '{name}' the sparsecomp ABI: {exc.message}")
                pass_.signal_pass_failure()
                continue
            inner = _fresh_name(name, taken)
            taken.add(inner)
            ir.SymbolTable.replace_all_symbol_uses(name, inner, op)
            ir.SymbolTable.set_symbol_name(f, inner)
            f.attributes["sym_visibility"] = ir.StringAttr.get("private")
            for attr in (C_INTERFACE, SIGNATURE_ATTR):
                if attr in f.attributes:
                    del f.attributes[attr]
            with ir.InsertionPoint(op.regions[0].blocks[0]), f.location:
                _emit_wrapper(inner, name, tensor, fty, op)
