"""Pass ``sparse-iter-mark-upstream``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import sparse_tensor as st
from mlir.passmanager import ExternalPass

from sparsecomp.errors import FormatError, SparsecompError
from sparsecomp.formats.layout import Layout
from sparsecomp.ir import whole_blocks
from sparsecomp.ir.attrs import encoding_of, layout_of
from sparsecomp.ir.calls import close_over_calls, functions, name_of
from sparsecomp.ir.targets import function_target
from sparsecomp.ir.upstream import (
    is_sparse_tensor_encoding,
    layout_from_sparse_tensor,
    sparse_tensor_text,
)
from sparsecomp.ir.verify import types_of
from sparsecomp.ir.walk import preorder, retype_function
from sparsecomp.targets import CpuTarget
from sparsecomp.targets.resolve import unblocked, upstream_form
from sparsecomp.transforms.base import SparsecompPass
from sparsecomp.transforms.import_sparse_tensor import UPSTREAM_ATTR

#: On a marked function: per result, the declared layout (attribute text) of
#: one held unblocked, else "". The runtime converts such results back.
DECLARED_ATTR = "sparse_iter.declared_results"
#: sparse_iter ops with an upstream counterpart (a layout conversion).
_CONVERSIONS = ("sparse_iter.set_encoding", "sparse_iter.unset_encoding")
#: sparse_tensor ops of linalg bodies (on scalars): the linalg op's check decides for them.
_BODY_OPS = frozenset(
    f"sparse_tensor.{n}" for n in ("unary", "binary", "reduce", "select", "yield")
)
#: Tensor ops on sparse tensors that the sparsifier rewrites and sparse_iter does not.
_RESHAPES = ("tensor.expand_shape", "tensor.collapse_shape", "tensor.reshape", "tensor.concat",
             "tensor.cast")  # fmt: skip


def _encoded(op: ir.Operation) -> bool:
    return any(encoding_of(v.type) is not None for v in [*op.operands, *op.results])


def _where(op: ir.Operation) -> str:
    loc = op.location
    return f" at line {loc.start_line}" if loc.is_a_file() else ""


def _vectorize(op: ir.Operation, func: ir.Operation) -> bool:
    """What ``sparse-iter-lower-iterations`` would ask for (its default options)."""
    ty = ir.RankedTensorType(op.results[0].type).element_type if op.results else None
    bits = getattr(ty, "width", 0) if isinstance(ty, ir.FloatType | ir.IntegerType) else 0
    target = function_target(func)
    return isinstance(target, CpuTarget) and bits > 0 and target.vector_bits // bits >= 2


def _refusal(func: ir.Operation) -> str | None:
    """Why sparse_iter's lowering cannot take ``func`` (``check_lowerable`` refuses), or None."""
    from sparsecomp.lowering import check_lowerable
    from sparsecomp.lowering.convert import check_conversion

    for op in preorder(func):
        if op.name in _CONVERSIONS:
            try:
                check_conversion(op)
            except SparsecompError as exc:
                return f"has a conversion{_where(op)} that sparse_iter cannot lower: {exc.message}"
            continue
        if op.name.startswith("sparse_tensor.") and (_encoded(op) or op.name not in _BODY_OPS):
            return f"uses '{op.name}'{_where(op)}, which sparse_iter has no counterpart for"
        if op.name in _RESHAPES and _encoded(op):
            return f"has '{op.name}'{_where(op)} on sparse tensors, which sparse_iter cannot lower"
        if not op.name.startswith("linalg.") or op.name == "linalg.yield" or not _encoded(op):
            continue
        if op.name != "linalg.generic":
            return f"has '{op.name}'{_where(op)} on sparse tensors, which sparse_iter cannot lower"
        try:
            gpu = not isinstance(function_target(func), CpuTarget)
            check_lowerable(op, vectorize=_vectorize(op, func), tensor_cores=gpu)
        except SparsecompError as exc:
            return f"has a linalg.generic{_where(op)} that sparse_iter cannot lower: {exc.message}"
    return None


def _upstream_layout(layout: Layout) -> Layout:
    """``layout`` in a marked function: only levels with a ``#sparse_tensor`` form.

    ELL and ragged levels become compressed ones (``upstream_form``);
    singletons are SoA (sparse_iter keeps each level's coordinates apart).
    """
    layout = upstream_form(layout)
    levels = tuple(
        dataclasses.replace(lv, soa=True) if lv.kind == "singleton" else lv for lv in layout.levels
    )
    return dataclasses.replace(layout, levels=levels)


class _Exporter:
    """Tensor types with ``#sparse_iter.layout`` -> the same with ``#sparse_tensor.encoding``.

    Types in ``unblock`` (:func:`whole_blocks.unblocked_types`, of either
    syntax) take their unblocked form.
    """

    def __init__(self, unblock: set[str]) -> None:
        self.unblock = unblock
        self.cache: dict[str, ir.Type] = {}

    def __call__(self, ty: ir.Type) -> ir.Type:
        """The upstream type; :class:`FormatError` when the layout has no upstream form."""
        if not isinstance(ty, ir.RankedTensorType):
            return ty
        key = str(ty)
        if key in self.cache:
            return self.cache[key]
        if encoding_of(ty) is not None:
            layout = layout_of(ty)
            if not isinstance(layout, Layout):
                what = "composable layouts" if layout is not None else "unresolved encodings"
                raise FormatError(f"{what} have no #sparse_tensor form")
        elif key in self.unblock and is_sparse_tensor_encoding(ty.encoding):
            layout = layout_from_sparse_tensor(ty.encoding)
        else:
            return ty
        if key in self.unblock:
            layout = unblocked(layout)
        text = sparse_tensor_text(_upstream_layout(layout))
        enc = ir.Attribute.parse(text, ty.context)
        rt = ir.RankedTensorType(ty)
        loc = ir.Location.unknown(ty.context)
        self.cache[key] = ir.RankedTensorType.get(rt.shape, rt.element_type, enc, loc=loc)
        return self.cache[key]

    def check(self, func: ir.Operation, why: str) -> bool:
        """Emit an error at each op whose types cannot be exported; True if none."""
        ok = True
        for op in preorder(func):
            problem = None
            if op.name.startswith("sparse_iter.") and op.name not in _CONVERSIONS:
                problem = f"'{op.name}' has no upstream counterpart"
            for ty in types_of(op):
                try:
                    self(ty)
                except FormatError as exc:
                    problem = f"{encoding_of(ty)} has no #sparse_tensor form: {exc.message}"
            held = len(op.operands) > 0 and str(op.operands[0].type) in self.unblock
            if op.name in whole_blocks.STORAGE_QUERIES and held:
                problem = (
                    f"'{op.name}' reads the storage of {op.operands[0].type}, which is held "
                    "unblocked there (as CSR: this MLIR build stores blocks whole and "
                    "mishandles n:m levels), so it would read other storage than declared; "
                    "read the storage of a sparse_tensor.convert of it to a layout such as "
                    "CSR, or (BSR) give it a shape that its blocks can divide"
                )
            if problem is not None:
                op.location.emit_error(
                    f"'{name_of(func)}' needs the upstream sparsifier (it {why}), but {problem}"
                )
                ok = False
        return ok

    def rewrite(self, func: ir.Operation) -> None:
        self._record_declared_results(func)
        conversions = [op for op in retype_function(func, self) if op.name in _CONVERSIONS]
        for op in conversions:
            with ir.InsertionPoint(op), op.location:
                converted = st.ConvertOp(op.results[0].type, op.operands[0]).result
            op.results[0].replace_all_uses_with(converted)
            op.erase()

    def _record_declared_results(self, func: ir.Operation) -> None:
        """Name the declared layout of each result held in another form
        (``DECLARED_ATTR``): unblocked, or ELL as CSR (:func:`upstream_form`; a result
        declared ``ell`` came back CSR)."""
        fty = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        declared = [
            whole_blocks.layout(t) if str(t) in self.unblock else _held_otherwise(t)
            for t in fty.results
        ]
        if any(declared):
            texts = [lay.attr_text() if lay is not None else "" for lay in declared]
            func.attributes[DECLARED_ATTR] = ir.ArrayAttr.get([ir.StringAttr.get(t) for t in texts])


def _held_otherwise(ty: ir.Type) -> Layout | None:
    """``ty``'s layout where the upstream sparsifier holds it in another one (ELL and
    ragged levels as compressed ones), else None."""
    if not isinstance(ty, ir.RankedTensorType) or encoding_of(ty) is None:
        return None
    layout = layout_of(ty)
    if not isinstance(layout, Layout) or upstream_form(layout) == layout:
        return None
    return layout


@dataclasses.dataclass(frozen=True)
class MarkUpstreamPass(SparsecompPass):
    """Send functions sparse_iter cannot lower to the upstream sparsifier.

    Runs at the end of stage I (``layouts``), on ``linalg.generic`` ops
    with their final layouts. A function is marked
    ``sparse_iter.upstream = "<reason>"`` when it carries the mark already
    (``sparse-iter-import-sparse-tensor`` sets it on functions using
    ``sparse_tensor`` ops or encodings sparse_iter cannot express; a user
    may write it to ask for the fallback), or when one of its linalg ops
    over sparse_iter-encoded tensors is refused by sparse_iter's lowering:
    a dry run of the analysis ``sparse-iter-lower-iterations`` runs
    (``sparsecomp.lowering.choose_plan``: a loop nest, else row by row),
    which changes no IR, when it refuses a layout conversion
    (``sparsecomp.lowering.convert.check_conversion``), or when it reshapes a
    sparse tensor (``tensor.expand_shape``, ``collapse_shape``, ``reshape``,
    ``concat``: the sparsifier rewrites them, sparse_iter has no lowering), or
    when it uses a ``sparse_tensor`` op other than those of linalg bodies (a
    ``sparse_tensor.convert`` building a matrix in a test-style ``main``, a
    ``sort`` or ``push_back`` on memrefs; as ``sparse-iter-import-sparse-tensor``
    keeps such functions upstream).
    Callers and callees of a marked function are marked too, so that calls
    keep matching types.

    In marked functions every ``#sparse_iter.layout`` type becomes the
    equivalent ``#sparse_tensor.encoding`` (singleton levels stored SoA, as
    sparse_iter stores them; ELL and ragged levels, which upstream lacks,
    become compressed ones: CSR instead of ELL, which the runtime converts
    to at the call) and ``sparse_iter.set_encoding`` / ``unset_encoding``
    become ``sparse_tensor.convert``. Upstream stores blocks whole and
    mishandles n:m levels, so every n:m type and BSR types (of either
    syntax) with a dynamic, empty or partial shape are held unblocked (as
    CSR; see ``sparsecomp.ir.whole_blocks``); a function returning one names its
    declared layout in ``sparse_iter.declared_results``. A BSR type of dynamic
    shape whose storage a marked function reads (``sparse_tensor.positions``,
    ``print``, ...) keeps its blocks (``sparse-iter-check-whole-blocks`` checks
    at run time that its shape divides into them); a storage query of a type
    held unblocked is an error. A layout with no upstream form
    (``mma.sp`` metadata, composable layouts) or another sparse_iter op in a
    marked function is an error where the type or op is defined. Unmarked
    functions are left alone; the CPU driver compiles the marked ones with
    the upstream sparsifier.

    Before (a CSR matrix times a COO one, which sparse_iter does not co-iterate):

    ```mlir
    func.func @mul(%a: tensor<?x?xf32, #csr>, %b: tensor<?x?xf32, #coo>,
                   %o: tensor<?x?xf32>) -> tensor<?x?xf32> {
      %r = linalg.generic {...} ins(%a, %b : tensor<?x?xf32, #csr>, tensor<?x?xf32, #coo>)
                                outs(%o : tensor<?x?xf32>) {...}
    ```

    After:

    ```mlir
    #CSR = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : dense, d1 : compressed),
                                     posWidth = 32, crdWidth = 32 }>
    #COO = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 : compressed(nonunique),
                                     d1 : singleton(soa)), posWidth = 32, crdWidth = 32 }>
    func.func @mul(%a: tensor<?x?xf32, #CSR>, %b: tensor<?x?xf32, #COO>,
                   %o: tensor<?x?xf32>) -> tensor<?x?xf32>
        attributes {sparse_iter.upstream = "has a linalg.generic at line 7 that ..."} {
      %r = linalg.generic {...} ins(%a, %b : tensor<?x?xf32, #CSR>, tensor<?x?xf32, #COO>) ...
    ```
    """

    NAME = "sparse-iter-mark-upstream"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        funcs = functions(op)
        reasons = {}
        for func in funcs:
            if UPSTREAM_ATTR in func.attributes:
                reasons[name_of(func)] = ir.StringAttr(func.attributes[UPSTREAM_ATTR]).value
            elif (why := _refusal(func)) is not None:
                reasons[name_of(func)] = why
        marked = close_over_calls(funcs, reasons)
        todo = [f for f in funcs if name_of(f) in marked]
        export = _Exporter(whole_blocks.unblocked_types(todo))
        if not all([export.check(f, marked[name_of(f)]) for f in todo]):
            pass_.signal_pass_failure()
            return
        for func in todo:
            export.rewrite(func)
            func.attributes[UPSTREAM_ATTR] = ir.StringAttr.get(marked[name_of(func)])
