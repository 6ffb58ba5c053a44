"""Pass ``sparse-iter-lower-buffers`` (stage II -> III, SparseTIR's LowerSparseBuffer)."""

from __future__ import annotations

import dataclasses
from typing import Any

from mlir import ir
from mlir.passmanager import ExternalPass

from sparsecomp.errors import SparsecompError
from sparsecomp.ir.attrs import encoding_of
from sparsecomp.ir.destinations import DESTINATIONS, MATERIALIZE, destinations, returns
from sparsecomp.ir.verify import types_of
from sparsecomp.lowering import sizes
from sparsecomp.lowering.abi import abi_json, abi_or_note, describe, static_shape
from sparsecomp.lowering.flatten import Flattener, FlattenError, flatten_types, layout_of
from sparsecomp.transforms.base import SparsecompPass

ABI_ATTR = "sparse_iter.abi"


def _function_type(func: ir.Operation) -> ir.FunctionType:
    return ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)


def _is_public(func: ir.Operation) -> bool:
    vis = func.attributes["sym_visibility"] if "sym_visibility" in func.attributes else None
    return vis is None or ir.StringAttr(vis).value == "public"


def _destination_sizes(func: ir.Operation, into: list[int], shapes: list[list[Any]]) -> None:
    """Relate each destination argument's sizes to the arguments its result's come from.

    The runtime then checks an ``out=`` array's shape like any argument's, before
    the call: the kernel writes it with the loops' bounds. A size the arguments
    do not give is an error (the variant is not built; the runtime copies instead).
    """
    name = ir.StringAttr(func.attributes["sym_name"]).value
    found = returns(func)
    if len(found) != 1:
        raise SparsecompError(
            f"'@{name}' has {len(found)} returns: its results cannot be written into arguments"
        )
    ret = found[0]
    pairs = []
    for r, dest in enumerate(into):
        if dest < 0:
            continue
        value = _returned(ret.operands[r])
        for d, size in enumerate(sizes.result_dims(func, value)):
            if size is None:
                raise SparsecompError(
                    f"result {r} of '@{name}' cannot be written into an argument: its size in "
                    f"dimension {d} is not known from the arguments before the call"
                )
            if isinstance(size, int):
                shapes[dest][d] = size
            elif size != (dest, d):
                pairs.append(ir.DenseI64ArrayAttr.get([dest, d, *size]))
    if pairs:
        old = list(func.attributes[sizes.ATTR]) if sizes.ATTR in func.attributes else []
        func.attributes[sizes.ATTR] = ir.ArrayAttr.get(old + pairs)


def _returned(value: ir.Value) -> ir.Value:
    """A returned value, through the casts and materializations a return goes through."""
    while not isinstance(value, ir.BlockArgument) and value.owner.name == "tensor.cast":
        value = value.owner.operands[0]  # a static-size variant casts its result back
    if not isinstance(value, ir.BlockArgument) and value.owner.name == MATERIALIZE:
        value = value.owner.operands[0]
    return value


def _result_dims(func: ir.Operation, value: ir.Value | None, ty: ir.Type) -> list[Any]:
    """Where a returned tensor's sizes come from (:func:`sizes.result_dims`); empty for
    a scalar or a function with several returns."""
    if value is None or not isinstance(ty, ir.RankedTensorType):
        return []
    return list(sizes.result_dims(func, _returned(value)))


def _result_shape(ty: ir.Type, dims: list[Any], symbols: dict, known: dict) -> list[Any]:
    """A result's shape for the ABI: static sizes, and the size symbol of the argument
    dimension a dynamic one comes from (``A^T x``'s result has ``A``'s column symbol),
    where the body shows it; None where it does not."""
    shape = static_shape(ty)
    for d, size in enumerate(dims):
        if shape[d] is None and isinstance(size, tuple) and size in symbols:
            shape[d] = known.get(symbols[size], symbols[size])
    return shape


def _flat_destinations(fty: ir.FunctionType, into: list[int]) -> list[int]:
    """``into``'s argument numbers after encoded arguments become their buffers and sizes."""
    starts, at = [], 0
    for ty in fty.inputs:
        starts.append(at)
        at += len(flatten_types([ty]))
    return [starts[k] if k >= 0 else -1 for k in into]


def _abi(func: ir.Operation, fty: ir.FunctionType) -> str:
    shapes = [static_shape(ty) for ty in fty.inputs]
    into = destinations(func)
    if into:
        _destination_sizes(func, into, shapes)
    symbols = sizes.size_symbols(func, len(fty.inputs))
    found = returns(func)
    returned = list(found[0].operands) if len(found) == 1 else [None] * len(fty.results)
    dims = [_result_dims(func, v, ty) for v, ty in zip(returned, fty.results, strict=True)]
    free = [
        size
        for sizes_of in dims
        for size in sizes_of
        if isinstance(size, tuple) and size[0] >= 0 and size[1] >= 0
        and size[0] < len(shapes) and shapes[size[0]][size[1]] is None
    ]  # fmt: skip
    symbols = sizes.with_result_sizes(func, symbols, free)
    # a symbol some argument has statically: every dimension it names has that size
    known = sizes.fixed_sizes(symbols) | {
        symbols[(n, d)]: size
        for n, shape in enumerate(shapes)
        for d, size in enumerate(shape)
        if isinstance(size, int) and (n, d) in symbols
    }
    args = []
    for n, ty in enumerate(fty.inputs):
        shape = [
            known.get(symbols[(n, d)], symbols[(n, d)]) if (n, d) in symbols else s
            for d, s in enumerate(shapes[n])
        ]
        entry = describe(ty, layout_of(ty), shape)
        if (n, sizes.VALUE) in symbols:  # an index argument that sizes a loop
            symbol = symbols[(n, sizes.VALUE)]
            entry["shape"] = [known.get(symbol, symbol)]
        args.append(entry)
    results = [
        describe(ty, layout_of(ty), _result_shape(ty, dims[r], symbols, known))
        for r, ty in enumerate(fty.results)
        if not into or into[r] < 0
    ]
    written = [[r, k] for r, k in enumerate(into) if k >= 0]
    return abi_json(args, results, {"destinations": written} if written else {})


@dataclasses.dataclass(frozen=True)
class LowerBuffersPass(SparsecompPass):
    """Replace encoded tensors by their flat buffers and dimension sizes.

    Every function argument or result whose type carries a
    ``#sparse_iter.layout`` becomes its buffers, rank-1 tensors in
    ``SparseTensor.buffers()`` order (``pos{l}``, ``crd{l}`` for the levels
    that store them, then ``values``), followed by one ``index`` per
    dimension. Inside the function, ``sparse_iter.positions``,
    ``coordinates`` and ``values`` become those buffers, ``tensor.dim`` of
    an encoded tensor its size argument, and ``sparse_iter.with_values``
    reuses the index buffers with new values, ``sparse_iter.storage_size``
    the sum of its buffers' lengths times their element bytes (of any
    tensor: a dense one's dimensions times its element bytes); calls and
    returns pass the
    flattened values. Only varied levels have position buffers, so only they
    are flattened. Public functions get ``sparse_iter.abi``, the JSON
    description of their original signature that the runtime marshals
    numpy and scipy arguments with; argument dimensions that the kernels
    index with one loop share a size symbol, which the runtime checks. A
    function with ``sparse_iter.destinations`` (a variant for ``out=``)
    lists in its ABI only the results it still returns, plus
    ``"destinations"`` pairs; each destination's sizes share the symbols of
    the argument dimensions its result's sizes come from (``tensor.empty``
    sizes, traced back), so that the runtime checks an ``out`` array before
    the call; the attribute's argument numbers become the flattened ones.

    Any other op on an encoded tensor is an error at that op (it should
    have been lowered by ``sparse-iter-lower-iterations``).

    Before:

    ```mlir
    func.func @spmv(%A: tensor<?x?xf32, #csr>, ...) {
      %pos = sparse_iter.positions %A[1] : tensor<?x?xf32, #csr> -> tensor<?xi32>
      %rows = tensor.dim %A, %c0 : tensor<?x?xf32, #csr>
    ```

    After:

    ```mlir
    func.func @spmv(%pos1: tensor<?xi32>, %crd1: tensor<?xi32>, %values: tensor<?xf32>,
                    %rows: index, %cols: index, ...) attributes {sparse_iter.abi = "{...}"}
    ```
    """

    NAME = "sparse-iter-lower-buffers"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        funcs = [o.operation for o in op.regions[0].blocks[0].operations
                 if o.operation.name == "func.func"]  # fmt: skip
        signatures = {ir.StringAttr(f.attributes["sym_name"]).value: _function_type(f)
                      for f in funcs}  # fmt: skip
        sizes.record_calls(funcs)  # what private callees require of their callers
        ok = True
        for func in funcs:
            with func.location:
                ok = self._lower(func, signatures) and ok
        ok = ok and self._check_no_encodings(op)
        if not ok:
            pass_.signal_pass_failure()

    def _lower(self, func: ir.Operation, signatures: dict[str, ir.FunctionType]) -> bool:
        fty = _function_type(func)
        has_body = len(func.regions[0].blocks) > 0
        try:
            if has_body and _is_public(func):
                abi = abi_or_note(lambda: _abi(func, fty))  # uncallable ones get a note
                func.attributes[ABI_ATTR] = ir.StringAttr.get(abi)
            if has_body:
                Flattener(signatures).run(func)
        except FlattenError as exc:
            exc.op.location.emit_error(str(exc))
            return False
        except SparsecompError as exc:
            func.location.emit_error(str(exc))
            return False
        if into := destinations(func):
            func.attributes[DESTINATIONS] = ir.DenseI64ArrayAttr.get(_flat_destinations(fty, into))
        new = ir.FunctionType.get(flatten_types(list(fty.inputs)), flatten_types(list(fty.results)))
        func.attributes["function_type"] = ir.TypeAttr.get(new)
        if sizes.ATTR in func.attributes:
            del func.attributes[sizes.ATTR]
        return True

    @staticmethod
    def _check_no_encodings(root: ir.Operation) -> bool:
        bad: list[ir.Operation] = []

        def visit(op: ir.Operation) -> ir.WalkResult:
            if any(encoding_of(t) is not None for t in types_of(op)):
                bad.append(op)
                return ir.WalkResult.INTERRUPT
            return ir.WalkResult.ADVANCE

        root.walk(visit)
        for op in bad:
            op.location.emit_error(
                f"'{op.name}' still has a sparse tensor after buffer lowering; "
                "only func arguments/results, calls and the sparse_iter access ops are lowered"
            )
        return not bad
