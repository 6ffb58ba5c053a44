"""Pass ``sparse-iter-check-narrow-indices``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import arith, memref, scf, tensor
from mlir.dialects import sparse_tensor as st
from mlir.passmanager import ExternalPass

from sparsecomp.ir import fatal
from sparsecomp.ir.calls import functions, name_of
from sparsecomp.ir.fatal import where
from sparsecomp.ir.walk import preorder
from sparsecomp.transforms.base import SparsecompPass

#: Level formats whose level has a positions buffer.
_POSITIONS = (int(st.LevelFormat.compressed), int(st.LevelFormat.loose_compressed))
#: Level formats whose level has a coordinates buffer.
_COORDINATES = (*_POSITIONS, int(st.LevelFormat.singleton))
#: Ops that compute a sparse result's index buffers (``linalg.*`` ops besides), and
#: calls (a public callee leaves what it returns to its callers, see below).
_BUILDERS = ("sparse_tensor.convert", "sparse_tensor.load", "sparse_tensor.reorder_coo",
             "func.call")  # fmt: skip


def _narrow(ty: ir.Type) -> st.EncodingAttr | None:
    """``ty``'s encoding if its positions or coordinates are narrower than 64 bits."""
    if not isinstance(ty, ir.RankedTensorType) or ty.encoding is None:
        return None
    try:
        enc = st.EncodingAttr(ty.encoding)
    except ValueError:  # a sparse_iter layout: not the sparsifier's
        return None
    return enc if 0 < enc.pos_width < 64 or 0 < enc.crd_width < 64 else None


def _bad(value: ir.Value, enc: st.EncodingAttr) -> list[tuple[ir.Value, ir.Value, str]]:
    """``(bad, size, what)`` for each narrow buffer of ``value``: ``bad`` (i1) where the
    level's ``size`` (entries, or level size) exceeds what the buffer holds."""
    index = ir.IndexType.get()
    checks = []
    for lvl, fmt in enumerate(int(f) for f in enc.lvl_formats_enum):
        found = []
        if fmt in _POSITIONS and 0 < enc.pos_width < 64:
            limit = (1 << enc.pos_width) - 1  # read unsigned: 2^w - 1 entries
            crd = st.ToCoordinatesOp(value, ir.IntegerAttr.get(index, lvl)).result
            count = memref.DimOp(crd, arith.ConstantOp(index, 0).result).result
            what = f"{{}} entries at level {lvl}, more than its {enc.pos_width}-bit positions"
            found.append((count, limit, what, "posWidth"))
        if fmt in _COORDINATES and 0 < enc.crd_width < 64:
            limit = 1 << enc.crd_width  # coordinates 0 .. 2^w - 1
            size = st.LvlOp(value, arith.ConstantOp(index, lvl).result).result
            what = f"level {lvl} of size {{}}, more than its {enc.crd_width}-bit coordinates"
            found.append((size, limit, what, "crdWidth"))
        for size, limit, what, key in found:
            bound = arith.ConstantOp(index, limit).result
            bad = arith.CmpIOp(arith.CmpIPredicate.ugt, size, bound).result
            checks.append((bad, size, f"{what} address (at most {limit}); declare a wider {key}"))
    return checks


def _nonzeros(source: ir.Value) -> ir.Value | None:
    """The nonzeros of a dense tensor (a loop nest over it), as an index; None for
    element types other than integers and floats."""
    ty = ir.RankedTensorType(source.type)
    element, index = ty.element_type, ir.IndexType.get()
    if isinstance(element, ir.FloatType):
        zero = arith.ConstantOp(element, 0.0).result

        def nonzero(x: ir.Value) -> ir.Value:
            return arith.CmpFOp(arith.CmpFPredicate.UNE, x, zero).result  # NaN counts
    elif isinstance(element, ir.IntegerType):
        zero = arith.ConstantOp(element, 0).result

        def nonzero(x: ir.Value) -> ir.Value:
            return arith.CmpIOp(arith.CmpIPredicate.ne, x, zero).result
    else:
        return None
    c0, c1 = (arith.ConstantOp(index, v).result for v in (0, 1))
    sizes = [tensor.DimOp(source, arith.ConstantOp(index, d).result).result for d in range(ty.rank)]

    def nest(d: int, at: list[ir.Value], count: ir.Value) -> ir.Value:
        if d == ty.rank:
            hit = arith.IndexCastUIOp(index, nonzero(tensor.ExtractOp(source, at).result))
            return arith.AddIOp(count, hit.result).result
        loop = scf.ForOp(c0, sizes[d], c1, [count])
        with ir.InsertionPoint(loop.body):
            scf.YieldOp([nest(d + 1, [*at, loop.induction_variable], loop.inner_iter_args[0])])
        return loop.results[0]

    return nest(0, [], c0)


def _check_before(op: ir.Operation, func: ir.Operation, module: ir.Operation) -> None:
    """Before a conversion of a dense tensor: fail where its nonzeros are more than the
    narrow positions of the target's last level address (that level holds every entry
    where no dense level follows it). After the conversion is too late: the
    sparsifier's inserts read the wrapped positions, and counted 254 entries of 256."""
    if op.name != "sparse_tensor.convert" or _narrow(op.operands[0].type) is not None:
        return
    if ir.RankedTensorType(op.operands[0].type).encoding is not None:
        return  # a sparse source: checked after, as the ops above
    enc = _narrow(op.results[0].type)
    if enc is None or not 0 < enc.pos_width < 64 or fatal.only_returned(op.results[0]):
        return
    formats = [int(f) for f in enc.lvl_formats_enum]
    last = max((n for n, f in enumerate(formats) if f in _POSITIONS), default=None)
    if last is None or any(f not in _COORDINATES for f in formats[last:]):
        return  # no positions, or dense levels (blocks) below them: not every entry
    with ir.InsertionPoint(op), op.location:
        count = _nonzeros(op.operands[0])
        if count is None:
            return
        limit = (1 << enc.pos_width) - 1
        bad = arith.CmpIOp(
            arith.CmpIPredicate.ugt, count, arith.ConstantOp(ir.IndexType.get(), limit).result
        ).result
        text = (
            f"{where(op.location)}error: '{name_of(func)}' converts {{}} nonzeros to "
            f"{op.results[0].type}, more than its {enc.pos_width}-bit positions address "
            f"(at most {limit}); declare a wider posWidth"
        )
        fatal.fail_if(bad, text, [count], module)


def check_op(op: ir.Operation, func: ir.Operation, module: ir.Operation) -> None:
    """Around ``op``: fail at run time where a narrow index buffer of its result
    would overflow (before a dense tensor's conversion) or overflowed (after)."""
    if op.name not in _BUILDERS and not op.name.startswith("linalg."):
        return
    _check_before(op, func, module)
    for result in op.results:
        enc = _narrow(result.type)
        if enc is None or fatal.only_returned(result):
            continue
        with ir.InsertionPoint.after(op), op.location:
            checks = _bad(result, enc)
            for bad, size, what in checks:
                text = (
                    f"{where(op.location)}error: '{name_of(func)}' builds {result.type} with "
                    + what
                )
                fatal.fail_if(bad, text, [size], module)


@dataclasses.dataclass(frozen=True)
class CheckNarrowIndicesPass(SparsecompPass):
    """Check at run time that a sparse tensor the sparsifier builds fits its narrow
    ``posWidth`` / ``crdWidth``.

    MLIR's sparsifier stores positions and coordinates in the encoding's
    widths and does not check them: a conversion to a ``posWidth = 8`` CSR
    matrix of 300 entries wraps its positions (silently, a wrong result
    or a read out of bounds). After each op that computes a sparse result's
    index buffers (``sparse_tensor.convert``, ``sparse_tensor.load``,
    ``sparse_tensor.reorder_coo``, ``linalg`` ops) of a type with widths
    below 64 bits, this pass checks each level with positions (its
    coordinate count, the ``sparse_tensor.coordinates`` buffer's size, at
    most ``2^w - 1``, as positions are read unsigned) and each level with
    coordinates (its size at most ``2^w``); if one does not fit, the
    program reports it with the op's location and exits with status 1
    (``sparsecomp.ir.fatal``; a call from Python raises ``KernelError``). Runs
    on the fallback's module before the sparsifier, which folds the checks of
    static sizes.

    Before:

    ```mlir
    %a = sparse_tensor.convert %d : tensor<?x?xf64> to tensor<?x?xf64, #CSR8>
    ```

    After:

    ```mlir
    %a = sparse_tensor.convert %d : tensor<?x?xf64> to tensor<?x?xf64, #CSR8>
    %crd = sparse_tensor.coordinates %a {level = 1 : index} : ...
    %n = memref.dim %crd, %c0 : memref<?xindex, strided<[?], offset: ?>>
    %bad = arith.cmpi ugt, %n, %c255 : index
    scf.if %bad {
      func.call @__sparsecomp_fatal_0(%n) : (index) -> ()  // dprintf, exit(1)
    }
    ```
    """

    NAME = "sparse-iter-check-narrow-indices"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        for func in functions(op):
            for inner in list(preorder(func)):
                check_op(inner, func, op)
