"""Which argument sizes a kernel assumes equal (checked by the runtime before a call).

Lowering a ``linalg.generic`` to loops drops the op's implicit promise that
every operand dimension indexed by the same loop has the same size; a call
with mismatched shapes would then read out of bounds. Before the op goes,
``record`` notes each such pair of *function argument* dimensions in the
function's ``sparse_iter.same_sizes`` attribute (``[arg, dim, arg, dim]``
entries), each argument dimension a loop shares with a static size
(``[arg, dim, CONSTANT, size]``: an operand or output of static shape) and each
one it shares with the value of a scalar ``index`` argument (``[arg, dim, n,
VALUE]``: an output of ``tensor.empty(%n)``);
``sparse-iter-lower-buffers`` turns the classes into the size symbols of
``sparse_iter.abi``, and a class with a static size into that size, which
the runtime checks as it checks a static argument's (a scalar's value too).
"""

from __future__ import annotations

import itertools
from typing import Any

from mlir import ir

from sparsecomp.ir.calls import functions, name_of
from sparsecomp.ir.walk import preorder
from sparsecomp.lowering.plan import Plan
from sparsecomp.lowering.rowplan import RowPlan

ATTR = "sparse_iter.same_sizes"
#: The names a function's author gave its sizes (``{N = array<i64: arg, dim>}``: a
#: Python kernel's size symbols), which :func:`size_symbols` gives the classes they
#: belong to, so that a call's size error says ``'N'`` where the author wrote ``N``.
NAMES = "sparse_iter.size_names"
#: The "dimension" of a scalar ``index`` argument in an entry: ``[arg, dim, n, VALUE]``
#: says that argument dimension must equal the value of argument ``n`` (an output
#: built as ``tensor.empty(%m)`` of a function argument ``%m``).
VALUE = -1
#: The "argument" of a static size in an entry: ``[arg, dim, CONSTANT, size]`` says
#: that argument dimension must be ``size`` (a dynamic matrix reduced into a
#: ``tensor<5xf64>``: a call with another row count wrote past its end).
CONSTANT = -1


def _function(op: ir.Operation) -> ir.Operation | None:
    parent = op.parent
    while parent is not None and parent.name != "func.func":
        parent = parent.parent
    return parent


def _arg_number(value: ir.Value, entry: ir.Block) -> int | None:
    if not isinstance(value, ir.BlockArgument):
        return None
    arg = ir.BlockArgument(value)
    return arg.arg_number if arg.owner == entry else None


def record(plan: Plan | RowPlan) -> None:
    """Add the plan's equal-size argument dimensions to its function's attribute.

    An operand's dimension counts where it is an argument's: the argument
    itself, or a value of its size (through ``tensor.cast``, as static-size
    variants pass an argument on; a ``tensor.empty`` sized by ``tensor.dim``
    of one; destination-style ops: :func:`result_dims`' rules).
    """
    _record(plan.op, [(acc.value, acc.dims) for acc in [*plan.inputs, plan.output]])


def record_generic(op: ir.Operation) -> None:
    """:func:`record` for a ``linalg.generic`` that no plan lowers (one on dense
    tensors, which upstream's passes lower; a product the GPU's tensor cores take):
    its indexing maps say which operand dimensions one loop indexes (a dense
    ``X[i, k] * W[k, j]`` called with ``X`` 2 x 1000 and ``W`` 3 x 2 read past
    ``W``'s end, as a 2:4 ``mma.sp`` product did with a short ``B``)."""
    maps = [ir.AffineMapAttr(m).value for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
    accesses: list[tuple[ir.Value, list[int | None]]] = []
    for value, amap in zip(op.operands, maps, strict=False):
        dims = [e.position if isinstance(e, ir.AffineDimExpr) else None for e in amap.results]
        accesses.append((value, dims))
    _record(op, accesses)


def _record(op: ir.Operation, accesses: Any) -> None:
    """Record the argument dimensions of ``accesses`` (operand, loop per dimension)
    that one loop indexes, in ``op``'s function."""
    func = _function(op)
    if func is None:
        return
    entry = func.regions[0].blocks[0]
    by_loop: dict[int, list[tuple[int, int]]] = {}
    for value, loop_dims in accesses:
        if not isinstance(value.type, ir.RankedTensorType):
            continue
        for pos, dim in enumerate(loop_dims):
            if dim is None:
                continue
            at = _dim(value, pos, entry, 0)
            if isinstance(at, int):  # a static size (an output of tensor<5xf64>)
                at = (CONSTANT, at)
            members = by_loop.setdefault(dim, [])
            if isinstance(at, tuple) and at not in members:  # (an output sized by an input)
                members.append(at)
    pairs = [
        ir.DenseI64ArrayAttr.get([*members[0], *other])
        for members in by_loop.values()
        for other in members[1:]
    ]
    if not pairs:
        return
    old = list(func.attributes[ATTR]) if ATTR in func.attributes else []
    func.attributes[ATTR] = ir.ArrayAttr.get(old + pairs)


def drop_names(module: ir.Operation) -> None:
    """Remove the size names of ``module``'s functions (:data:`NAMES`): IR compared
    with what a printer re-emits, which makes its own names up."""
    for op in preorder(module):
        if op.name == "func.func" and NAMES in op.attributes:
            del op.attributes[NAMES]


def size_symbols(func: ir.Operation, n_args: int) -> dict[tuple[int, int], str]:
    """``(arg, dim) -> symbol`` for argument dimensions that must be equal; a class
    with a static size has ``(CONSTANT, size)`` among its keys (:func:`fixed_sizes`)."""
    parent: dict[tuple[int, int], tuple[int, int]] = {}

    def find(x: tuple[int, int]) -> tuple[int, int]:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    entries: list[Any] = list(func.attributes[ATTR]) if ATTR in func.attributes else []
    for entry in entries:
        a, da, b, db = list(ir.DenseI64ArrayAttr(entry))
        ra, rb = find((a, da)), find((b, db))
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    classes: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for key in {k for e in entries for k in _keys(e)}:
        classes.setdefault(find(key), []).append(key)
    named: dict[tuple[int, int], str] = {}
    if NAMES in func.attributes:
        for attr in ir.DictAttr(func.attributes[NAMES]):
            arg, dim = list(ir.DenseI64ArrayAttr(attr.attr))
            named.setdefault((arg, dim), attr.name)
    names: dict[tuple[int, int], str] = {}
    for root in sorted(classes):
        given = sorted({named[k] for k in classes[root] if k in named})
        if given and given[0] not in names.values():
            names[root] = given[0]
    synthetic = (f"s{n}" for n in itertools.count())
    symbols = {}
    for root in sorted(classes):
        if root not in names:
            names[root] = next(s for s in synthetic if s not in names.values())
        for key in classes[root]:
            symbols[key] = names[root]
    return symbols


def with_result_sizes(
    func: ir.Operation, symbols: dict[tuple[int, int], str], keys: list[tuple[int, int]]
) -> dict[tuple[int, int], str]:
    """``symbols`` and a symbol for each argument dimension in ``keys`` (those a
    result's sizes come from) that has none: the name the source gave it
    (``"N"``), else the next free ``s<k>``; existing names are kept."""
    extended = dict(symbols)
    used = set(symbols.values())
    named: dict[tuple[int, int], str] = {}
    if NAMES in func.attributes:
        for attr in ir.DictAttr(func.attributes[NAMES]):
            arg, dim = list(ir.DenseI64ArrayAttr(attr.attr))
            named.setdefault((arg, dim), attr.name)
    synthetic = (f"s{n}" for n in itertools.count())
    for key in keys:
        if key in extended:
            continue
        name = named.get(key)
        if name is None or name in used:
            name = next(s for s in synthetic if s not in used)
        extended[key] = name
        used.add(name)
    return extended


def fixed_sizes(symbols: dict[tuple[int, int], str]) -> dict[str, int]:
    """``symbol -> size`` for the classes of :func:`size_symbols` with a static size."""
    return {name: size for (arg, size), name in symbols.items() if arg == CONSTANT}


def _keys(entry: Any) -> list[tuple[int, int]]:
    a, da, b, db = list(ir.DenseI64ArrayAttr(entry))
    return [(a, da), (b, db)]


#: Ops whose tensor result has the shape of one operand: name -> that operand's position.
_SHAPED_LIKE = {
    "vector.transfer_write": 1,
    "tensor.insert": 1,
    "tensor.insert_slice": 1,
    "tensor.parallel_insert_slice": 1,
    "bufferization.materialize_in_destination": 1,
    "linalg.fill": 1,
}

#: A result dimension: an argument's ``(arg, dim)``, a constant, or None (unknown).
Size = tuple[int, int] | int | None


def result_dims(func: ir.Operation, value: ir.Value) -> list[Size]:
    """The sizes of tensor ``value`` (returned by ``func``) in terms of its arguments.

    Follows ``value`` back through ops whose result has an operand's shape
    (destination-style ops, ``scf.for``/``scf.if`` results whose yields are
    built from their inits) to a function argument or a ``tensor.empty``
    whose sizes are argument dimensions (``tensor.dim``) or constants.
    """
    ty = ir.RankedTensorType(value.type)
    entry = func.regions[0].blocks[0]
    return [
        ty.shape[d] if not ty.is_dynamic_dim(d) else _dim(value, d, entry, 0)
        for d in range(ty.rank)
    ]


def _dim(value: ir.Value, d: int, entry: ir.Block, depth: int) -> Size:
    if depth > 64:
        return None
    if isinstance(value, ir.BlockArgument):
        number = _arg_number(value, entry)
        return None if number is None else (number, d)
    ty = ir.RankedTensorType(value.type)
    if not ty.is_dynamic_dim(d):
        return ty.shape[d]
    op = value.owner
    name = op.name
    if name == "tensor.empty":
        dynamic = sum(1 for k in range(d) if ty.is_dynamic_dim(k))
        return _size(op.operands[dynamic], entry, depth + 1)
    if name in ("tensor.cast", "sparse_iter.get_part"):  # a part has its whole's shape
        return _dim(op.operands[0], d, entry, depth + 1)
    if name in _SHAPED_LIKE:
        return _dim(op.operands[_SHAPED_LIKE[name]], d, entry, depth + 1)
    number = ir.OpResult(value).result_number
    if name.startswith("linalg.") and "operandSegmentSizes" in op.attributes:
        ins = next(iter(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])))
        return _dim(op.operands[ins + number], d, entry, depth + 1)
    if name == "scf.for" and _keeps_shape(op, number):
        return _dim(op.operands[3 + number], d, entry, depth + 1)
    if name == "scf.if":
        found = {_dim(_yielded(r, number), d, entry, depth + 1) for r in op.regions}
        return found.pop() if len(found) == 1 else None
    if name == "func.call":  # the callee's result size, in terms of what it was passed
        return _through_call(op, number, d, entry, depth + 1)
    return None


def _callee(call: ir.Operation) -> ir.Operation | None:
    """The ``func.func`` a ``func.call`` calls, with a body; None if none."""
    name = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
    module = call.parent
    while module is not None and module.name != "builtin.module":
        module = module.parent
    found = [f for f in functions(module) if name_of(f) == name] if module is not None else []
    return found[0] if found and len(found[0].regions[0].blocks) else None


def _through_call(call: ir.Operation, number: int, d: int, entry: ir.Block, depth: int) -> Size:
    """Dimension ``d`` of result ``number`` of ``call``, as the caller's argument
    dimension, scalar argument or constant it comes to."""
    callee = _callee(call)
    if callee is None or depth > 64:
        return None
    returns = [op for op in callee.regions[0].blocks[-1].operations if op.name == "func.return"]
    if len(callee.regions[0].blocks) != 1 or len(returns) != 1:
        return None
    inner = _dim(returns[0].operands[number], d, callee.regions[0].blocks[0], depth + 1)
    return _outer(call, inner, entry, depth + 1)


def _outer(call: ir.Operation, inner: Size, entry: ir.Block, depth: int) -> Size:
    """A callee's size ``inner`` (its argument's dimension, a scalar argument's value,
    a constant) in the caller's terms, through the operands of ``call``."""
    if inner is None or isinstance(inner, int):
        return inner
    arg, dim = inner
    if arg >= len(call.operands):
        return None
    if dim == VALUE:
        return _size(call.operands[arg], entry, depth)
    return _dim(call.operands[arg], dim, entry, depth)


def record_calls(funcs: list[ir.Operation]) -> None:
    """Add to each function the equal sizes that the functions it calls require of
    what it passes them (their ``sparse_iter.same_sizes``, translated through each
    ``func.call``; callees first, so that requirements travel up any chain of
    calls). A public function that passes its arguments (or values sized by
    them, another call's result) to a private one was otherwise called
    unchecked: ``A x`` then ``A y`` with a 5 x 7 ``A`` read past the end of ``y``."""
    by_name = {name_of(f): f for f in funcs}
    done: set[str] = set()

    def visit(func: ir.Operation, path: set[str]) -> None:
        name = name_of(func)
        if name in done or name in path or not len(func.regions[0].blocks):
            return
        calls = [op for op in preorder(func) if op.name == "func.call"]
        for call in calls:
            callee = by_name.get(ir.FlatSymbolRefAttr(call.attributes["callee"]).value)
            if callee is not None:
                visit(callee, path | {name})
        entry = func.regions[0].blocks[0]
        pairs = []
        for call in calls:
            callee = by_name.get(ir.FlatSymbolRefAttr(call.attributes["callee"]).value)
            if callee is None or callee is func or ATTR not in callee.attributes:
                continue
            for item in callee.attributes[ATTR]:
                a, da, b, db = list(ir.DenseI64ArrayAttr(item))
                left = _outer(call, (a, da), entry, 0)
                right = db if b == CONSTANT else _outer(call, (b, db), entry, 0)
                if not _is_dim(left):
                    left, right = right, left
                if isinstance(left, tuple) and _is_dim(left) and right is not None:
                    other = [CONSTANT, right] if isinstance(right, int) else list(right)
                    if left != right:
                        pairs.append(ir.DenseI64ArrayAttr.get([*left, *other]))
        if pairs:
            old = list(func.attributes[ATTR]) if ATTR in func.attributes else []
            func.attributes[ATTR] = ir.ArrayAttr.get(old + pairs)
        done.add(name)

    for func in funcs:
        visit(func, set())


def _is_dim(size: Size) -> bool:
    """Whether ``size`` is an argument's dimension (not a constant, a scalar's value)."""
    return isinstance(size, tuple) and size[1] != VALUE


def _yielded(region: ir.Region, number: int) -> ir.Value:
    block = region.blocks[0]
    ops = list(block.operations)
    return ops[-1].operands[number]


def _keeps_shape(loop: ir.Operation, number: int) -> bool:
    """Whether the ``scf.for`` yields for iter_arg ``number`` a value built in that iter_arg."""
    carried = loop.regions[0].blocks[0].arguments[1 + number]
    return built_from(_yielded(loop.regions[0], number)) == carried


def built_from(value: ir.Value) -> ir.Value:
    """The tensor ``value`` was built in: followed back through destination-style ops
    (``linalg`` outs, ``vector.transfer_write``, ``tensor.insert``...), casts and ``scf.for``
    results whose loops build them in their iter_args, to the first other value."""
    for _ in range(256):
        if isinstance(value, ir.BlockArgument):
            return value
        op = value.owner
        number = ir.OpResult(value).result_number
        if op.name in _SHAPED_LIKE:
            value = op.operands[_SHAPED_LIKE[op.name]]
        elif op.name == "tensor.cast":
            value = op.operands[0]
        elif op.name == "scf.for" and _keeps_shape(op, number):
            value = op.operands[3 + number]
        elif op.name.startswith("linalg.") and "operandSegmentSizes" in op.attributes:
            ins = next(iter(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])))
            value = op.operands[ins + number]
        else:
            return value
    return value


def _size(value: ir.Value, entry: ir.Block, depth: int) -> Size:
    """An ``index`` value as an argument dimension, a scalar argument's value
    (``(arg, VALUE)``) or a constant."""
    if isinstance(value, ir.BlockArgument):
        number = _arg_number(value, entry)
        return None if number is None else (number, VALUE)
    op = value.owner
    if op.name == "arith.constant":
        return ir.IntegerAttr(op.attributes["value"]).value
    if op.name == "tensor.dim":
        index = op.operands[1]
        if isinstance(index, ir.BlockArgument) or index.owner.name != "arith.constant":
            return None
        d = ir.IntegerAttr(index.owner.attributes["value"]).value
        return _dim(op.operands[0], d, entry, depth + 1)
    return None
