"""Pass ``sparse-iter-densify-unsparsifiable``."""

from __future__ import annotations

import dataclasses
from typing import Any

from mlir import ir
from mlir.dialects import arith, bufferization, tensor
from mlir.dialects import sparse_tensor as st
from mlir.passmanager import ExternalPass

from sparsecomp.ir.linalg_ops import iterator_types
from sparsecomp.ir.upstream import is_sparse_tensor_encoding
from sparsecomp.ir.walk import preorder
from sparsecomp.transforms.base import SparsecompPass

#: Body ops the sparsifier's merger builds expressions of (MLIR's Merger.cpp).
_MERGER_OPS = frozenset(
    {f"arith.{n}" for n in (
        "addf addi subf subi mulf muli divf divsi divui andi ori xori shli shrsi shrui "
        "cmpf cmpi select negf truncf extf fptosi fptoui sitofp uitofp extsi extui trunci "
        "index_cast bitcast constant"
    ).split()}
    | {f"math.{n}" for n in "absf absi ceil floor sqrt expm1 log1p sin tanh".split()}
    | {f"complex.{n}" for n in "abs add sub mul div neg sqrt expm1 log1p sin tanh re im".split()}
    | {f"sparse_tensor.{n}" for n in "unary binary reduce select yield".split()}
    | {"linalg.index", "linalg.yield"}
)  # fmt: skip
#: Ops that say themselves what happens at stored and absent entries: the sparsifier's.
_SEMANTIC_OPS = frozenset(f"sparse_tensor.{n}" for n in ("unary", "binary", "reduce", "select"))
#: Ops whose result is a fresh tensor: a sparse output built from one is filled by insertion.
_FRESH = frozenset({"tensor.empty", "bufferization.alloc_tensor"})
#: Reductions the sparsifier runs over stored entries only: zero is their identity.
_SPARSE_REDUCTIONS = frozenset({"arith.addf", "arith.addi", "arith.ori", "arith.xori"})


def _is_sparse(ty: ir.Type) -> bool:
    return isinstance(ty, ir.RankedTensorType) and is_sparse_tensor_encoding(
        ir.RankedTensorType(ty).encoding
    )


def _reordered(ty: ir.Type) -> bool:
    """Whether a sparse tensor type's levels are other than its dimensions in order
    (CSC, BSR...): the sparsifier's ``linalg.index`` then read the wrong loop's index."""
    if not _is_sparse(ty):
        return False
    mapping = st.EncodingAttr(ir.RankedTensorType(ty).encoding).dim_to_lvl
    if mapping is None:
        return False
    return [str(r) for r in mapping.results] != [f"d{i}" for i in range(mapping.n_dims)]


def _index_on_reordered(op: ir.Operation) -> bool:
    """Whether ``op``'s body reads ``linalg.index`` and a sparse operand's levels are
    not its dimensions in order (CSC): the sparsifier gave ``A + j`` over CSC as
    ``A + i`` wherever the body does not vanish (silently)."""
    body = op.regions[0].blocks[0]
    return any(inner.name == "linalg.index" for inner in body.operations) and any(
        _reordered(v.type) for v in op.operands
    )


def _semantic(op: ir.Operation) -> bool:
    """Whether ``op``'s body says what happens at absent entries (``sparse_tensor.unary``,
    ``reduce``, ...): defined over stored entries, it must stay sparse."""
    return any(inner.name in _SEMANTIC_OPS for inner in op.regions[0].blocks[0].operations)


def _dense_reason(op: ir.Operation) -> str | None:
    """Why the sparsifier cannot take ``op`` on its sparse inputs, or None."""
    n_in = len(op.operands) - len(op.results)
    body = op.regions[0].blocks[0]
    if _semantic(op):
        return None  # sparse_tensor.unary/reduce/...: defined over stored entries
    for inner in body.operations:
        if inner.name not in _MERGER_OPS:
            return f"'{inner.name}'"
    iterators = iterator_types(op)
    reduces = any("reduction" in it for it in iterators)
    outs = list(body.arguments)[n_in:]
    yielded = body.operations[len(body.operations) - 1].operands
    for out, value in zip(outs, yielded, strict=True):
        if not reduces and not list(out.uses):
            continue  # the output is only written
        owner = value.owner.operation if isinstance(value, ir.OpResult) else None
        combiner = owner.name if owner is not None else None
        users = [use.owner.operation for use in out.uses]
        plain = combiner in _SPARSE_REDUCTIONS and len(users) == 1 and users[0] == owner
        if not plain:
            what = "a reduction" if reduces else "an update of the output"
            return f"{what} by '{combiner}'" if combiner else what
    return None


def _densify(op: ir.Operation) -> None:
    n_in = len(op.operands) - len(op.results)
    for n in range(n_in):
        value = op.operands[n]
        if not _is_sparse(value.type):
            continue
        rt = ir.RankedTensorType(value.type)
        with ir.InsertionPoint(op), op.location:
            dense = ir.RankedTensorType.get(rt.shape, rt.element_type)
            op.operands[n] = st.ConvertOp(dense, value).result


def _fresh(value: ir.Value) -> bool:
    return isinstance(value, ir.OpResult) and value.owner.operation.name in _FRESH


def _sparse_outputs(op: ir.Operation) -> None:
    """The sparse outputs of ``op`` that are not built fresh, made sparsifiable.

    An output the body does not read starts from a ``tensor.empty`` of its type
    (linalg overwrites every element; its old values never matter). One it reads,
    in an op with tensor inputs, is computed dense: a dense copy of the initial
    value goes in, the dense result is converted back to the sparse type.
    """
    n_in = len(op.operands) - len(op.results)
    body = op.regions[0].blocks[0]
    has_inputs = any(
        isinstance(v.type, ir.RankedTensorType) and ir.RankedTensorType(v.type).rank > 0
        for v in list(op.operands)[:n_in]
    )
    for k, result in enumerate(op.results):
        init = op.operands[n_in + k]
        if not _is_sparse(result.type) or _fresh(init):
            continue
        rt = ir.RankedTensorType(result.type)
        read = bool(list(body.arguments[n_in + k].uses))
        if read and not has_inputs:
            continue  # x = f(x) over x's own entries: the sparsifier updates in place
        with ir.InsertionPoint(op), op.location:
            if not read:
                empty = tensor.EmptyOp(_sizes(init, rt), rt.element_type, encoding=rt.encoding)
                op.operands[n_in + k] = empty.result
                continue
            dense = ir.RankedTensorType.get(rt.shape, rt.element_type)
            op.operands[n_in + k] = st.ConvertOp(dense, init).result
        result.set_type(dense)
        with ir.InsertionPoint.after(op), op.location:
            back = st.ConvertOp(rt, result)
        result.replace_all_uses_except(back.result, back.operation)


def _dense_outputs(op: ir.Operation) -> None:
    """Every sparse output of ``op`` computed dense and converted back to its type after
    the op: the initial value a dense copy where the body reads it, else a dense
    ``tensor.empty`` of its sizes (``all=true``: the sparsifier could not build it)."""
    n_in = len(op.operands) - len(op.results)
    body = op.regions[0].blocks[0]
    for k, result in enumerate(op.results):
        if not _is_sparse(result.type):
            continue
        init = op.operands[n_in + k]
        rt = ir.RankedTensorType(result.type)
        with ir.InsertionPoint(op), op.location:
            dense = ir.RankedTensorType.get(rt.shape, rt.element_type)
            if list(body.arguments[n_in + k].uses):
                op.operands[n_in + k] = st.ConvertOp(dense, init).result
            else:
                op.operands[n_in + k] = tensor.EmptyOp(_sizes(init, rt), rt.element_type).result
        result.set_type(dense)
        with ir.InsertionPoint.after(op), op.location:
            # through an op the sparsifier's pre-rewrite does not see through: it folds a
            # convert of a linalg result into the op, making the output sparse again
            kept = bufferization.MaterializeInDestinationOp(dense, result, op.operands[n_in + k])
            back = st.ConvertOp(rt, kept.result)
        result.replace_all_uses_except(back.result, kept.operation)


def _sizes(value: ir.Value, rt: ir.RankedTensorType) -> list[Any]:
    """The sizes of tensor ``value`` as ``tensor.EmptyOp`` takes them: static ones as
    ints, dynamic ones as ``tensor.dim`` values."""
    return [
        tensor.DimOp(value, arith.ConstantOp(ir.IndexType.get(), d)).result
        if rt.is_dynamic_dim(d)
        else rt.shape[d]
        for d in range(rt.rank)
    ]


@dataclasses.dataclass(frozen=True)
class DensifyUnsparsifiablePass(SparsecompPass):
    """Give the sparsifier dense copies of operands of ops it cannot sparsify.

    The upstream sparsifier builds loops over stored entries from an
    expression tree of the ``linalg.generic`` body (its merger). Bodies
    outside it are refused or mis-compiled in this MLIR build: ops the
    merger does not know on sparse values (``math.exp``, ``math.cos``,
    ``arith.maximumf``, ...: a legalization failure), and reductions whose
    combiner does not have zero as identity (products, min / max, ``andi``:
    an assertion under ``parallelization-strategy=dense-outer-loop``,
    ``tensor.extract`` verifier errors or an ``scf.reduce`` that
    ``convert-scf-to-openmp`` cannot convert). Such bodies read every
    element anyway (they do not vanish at zero), so this pass converts the
    op's sparse inputs to dense tensors (``sparse_tensor.convert``) and
    leaves a dense ``linalg.generic``, exact for every body.

    Matches ``linalg.generic`` ops with ``#sparse_tensor`` inputs and dense
    outputs whose body has an op outside the merger's set, or that reads
    the output (a reduction, or an update such as ``out * x``) and yields
    something other than ``out + x`` / ``out | x`` / ``out ^ x`` (``addf``,
    ``addi``, ``ori``, ``xori``, the output read once): the sparsifier keeps
    the output where the sparse inputs are zero, which only those keep too.
    Sums, elementwise arithmetic and bodies with ``sparse_tensor.unary``,
    ``binary``, ``reduce`` or ``select`` (which say themselves what happens at
    absent entries; densified, they were refused) are left to the sparsifier.

    Sparse outputs whose initial value is not a fresh ``tensor.empty``: the
    sparsifier fills a sparse output by insertion into an empty tensor, or
    updates one in place over its own entries (``x = 2 * x``, no inputs); any
    other it compiled as if the output were empty, reading it as zero (``X = X +
    A .* X`` returned X unchanged, ``C += A B`` dropped C). So an output the
    body does not read starts from a ``tensor.empty`` of its type (linalg
    overwrites every element), and one it reads in an op with inputs is
    computed dense: a dense copy of its initial value goes in, and the dense
    result is converted back to the sparse type. Runs in the fallback before
    ``sparsification-and-bufferization``.

    A body that reads ``linalg.index`` with a sparse operand whose levels are not
    its dimensions in order (CSC, BSR) is computed dense the same way, whatever
    the body: the sparsifier read the wrong loop's index (``A + j`` over CSC gave
    ``A + i``, silently).

    ``all``: every ``linalg.generic`` with sparse inputs or outputs is computed
    dense, whatever its body (``sparse_tensor`` semantic ops excepted): dense
    copies of its sparse inputs, dense outputs (a dense copy of an initial value
    the body reads, else an empty dense tensor), its sparse results converted
    back after it. The fallback's last try when the sparsifier crashed on or
    refused the program as it is (:func:`sparsecomp.compiler.upstream.densified`).

    Before:

    ```mlir
    %r = linalg.generic {... iterator_types = ["reduction"]}
        ins(%a : tensor<?xf64, #SV>) outs(%c : tensor<f64>) {
    ^bb0(%x: f64, %o: f64):
      %m = arith.maximumf %o, %x : f64
      linalg.yield %m : f64
    } -> tensor<f64>
    ```

    After:

    ```mlir
    %d = sparse_tensor.convert %a : tensor<?xf64, #SV> to tensor<?xf64>
    %r = linalg.generic {... iterator_types = ["reduction"]}
        ins(%d : tensor<?xf64>) outs(%c : tensor<f64>) { ... } -> tensor<f64>
    ```
    """

    NAME = "sparse-iter-densify-unsparsifiable"
    #: densify every such op, whatever its body (the fallback's last try after the
    #: sparsifier crashed on or refused a body it should take)
    all: bool = False

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        for generic in preorder(op):
            if generic.name != "linalg.generic":
                continue
            whole = (self.all or _index_on_reordered(generic)) and not _semantic(generic)
            if whole:
                _dense_outputs(generic)
            _sparse_outputs(generic)
            if any(_is_sparse(r.type) for r in generic.results):
                continue
            n_in = len(generic.operands) - len(generic.results)
            if not any(_is_sparse(v.type) for v in list(generic.operands)[:n_in]):
                continue
            if whole or _dense_reason(generic) is not None:
                _densify(generic)
