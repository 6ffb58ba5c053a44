"""Semantic verification of ``sparse_iter`` beyond the dialect's ODS verifiers.

ODS checks that attribute parameters and operands have the right *kind*
(an array, an integer, a tensor); the rules here check their *values*. The
rules for layouts, targets and sparsifiers are not restated: they are the
host-side classes' own checks (:class:`sparsecomp.formats.Layout`,
:mod:`sparsecomp.targets`, :class:`sparsecomp.formats.sparsifiers.Sparsifier`),
applied to the attribute's text, so the compiler and the Python API accept
exactly the same things. Each violation is reported once, at the location of
the first op that carries the faulty attribute.

``sparsecomp-opt`` runs this after parsing (as mlir-opt runs the verifier),
and every sparsecomp pass runs it on its input.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from mlir import ir

from sparsecomp.errors import SparsecompError
from sparsecomp.ir.attrs import encoding_of, mnemonic
from sparsecomp.ir.verify_access import ACCESS_OPS, check_access_op
from sparsecomp.ir.verify_attrs import check_attr

TARGETS_ATTR = "sparse_iter.targets"
TARGET_ATTR = "sparse_iter.target"
ENCODINGS = ("sparsity", "encoding", "layout", "composable")
_ENCODING_OPS = ("sparse_iter.set_encoding", "sparse_iter.unset_encoding", "sparse_iter.sparsify")

Problem = str

_C = "malloc calloc realloc free aligned_alloc posix_memalign memcpy memmove memset madvise"
_LIBM = (
    "acos acosh asin asinh atan atan2 atanh cbrt ceil copysign cos cosh erf erfc exp exp2 "
    "expm1 fabs floor fma fmax fmin fmod hypot log log10 log1p log2 pow round roundeven sin "
    "sinh sqrt tan tanh trunc"
).split()
#: Functions of the C library that compiled code calls: the allocator, memory
#: copies, ``madvise`` (huge pages) and libm (math ops LLVM or
#: ``convert-math-to-libm`` turn into calls; double and float (``f``) names). A
#: function of the module named as one of them would take those calls (a kernel
#: named ``@exp`` whose body has ``math.exp`` called itself until the stack ran
#: out), or its own callers would reach the C function instead.
RESERVED_NAMES = frozenset([*_LIBM, *(f"{name}f" for name in _LIBM), *_C.split()])


def _layout_rank(enc: ir.Attribute) -> int | None:
    from sparsecomp.formats.names import layout_from_attr

    try:
        return layout_from_attr(str(enc)).rank
    except SparsecompError:
        return None


def check_tensor_type(ty: ir.Type) -> Iterator[Problem]:
    """Problems with the encoding of a tensor type, including its rank."""
    enc = encoding_of(ty)
    if enc is None:
        return
    name = mnemonic(enc)
    if name not in ENCODINGS:
        yield f"#sparse_iter.{name} is not a tensor encoding; use {', '.join(ENCODINGS)}"
        return
    problems = list(check_attr(enc))
    yield from problems
    element = ir.RankedTensorType(ty).element_type
    if _unsupported_element(element):  # (f80: an internal error deep in the lowering)
        yield (
            f"a sparse tensor's element type {element} is not supported: i1 to i64, f16, "
            "bf16, f32, f64 and complex ones are"
        )
    if not problems and name in ("layout", "composable"):
        rank, tensor_rank = _layout_rank(enc), ir.RankedTensorType(ty).rank
        if rank is not None and rank != tensor_rank:
            yield f"{name} maps {rank} dimensions but the tensor {ty} has rank {tensor_rank}"


def _unsupported_element(element: ir.Type) -> bool:
    """A float other than f16, bf16, f32 and f64 (f80, tf32, the f8 kinds), or an
    integer wider than 64 bits (types as the bindings print them)."""
    name = str(element)
    if match := re.fullmatch(r"[su]?i(\d+)", name):
        return int(match.group(1)) > 64
    floats = re.fullmatch(r"(b?f\d+\w*|tf32)", name)
    return floats is not None and name not in ("f16", "bf16", "f32", "f64")


def _strip(ty: ir.RankedTensorType) -> tuple[list[int], str]:
    return list(ty.shape), str(ty.element_type)


def check_encoding_op(op: ir.Operation) -> Iterator[Problem]:
    """``set_encoding``/``sparsify`` add or change an encoding, ``unset_encoding`` drops it.

    Nothing else changes. ``set_encoding`` from one ``#sparse_iter`` encoding to
    another (sparsity -> encoding, layout -> layout) is a change of encoding.
    """
    source, result = op.operands[0].type, op.results[0].type
    unset = op.name.endswith(".unset_encoding")
    plain, encoded = (result, source) if unset else (source, result)
    verb = "unset_encoding source" if unset else f"{op.name.split('.')[1]} result"
    if encoding_of(encoded) is None:
        yield f"{verb} must carry a #sparse_iter encoding, got {encoded}"
        return
    # sparsify may take an encoded source: it re-selects the nonzeros; set_encoding
    # may change one #sparse_iter encoding into another (a conversion).
    plain_encoding = ir.RankedTensorType(plain).encoding
    if unset and plain_encoding is not None:
        yield f"{op.name} result must not carry an encoding, got {plain}"
    elif op.name.endswith(".set_encoding") and source == result:
        yield f"{op.name} does not change the encoding of {source}"
    elif op.name.endswith(".set_encoding") and plain_encoding and encoding_of(plain) is None:
        yield f"{op.name} source must be plain or carry a #sparse_iter encoding, got {plain}"
    elif _strip(ir.RankedTensorType(plain)) != _strip(ir.RankedTensorType(encoded)):
        yield f"{op.name} must keep shape and element type: {source} vs {result}"


def types_of(op: ir.Operation) -> Iterator[ir.Type]:
    """The types ``op`` defines: results, its regions' block arguments, a function type."""
    yield from (r.type for r in op.results)
    for region in op.regions:
        for block in region.blocks:
            yield from (a.type for a in block.arguments)
    if "function_type" in op.attributes and op.name != "llvm.func":
        fty = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
        yield from fty.inputs
        yield from fty.results


def _dialect_attrs(attr: ir.Attribute) -> Iterator[ir.Attribute]:
    """``#sparse_iter`` attributes in ``attr``, looking into arrays and dictionaries."""
    if mnemonic(attr) is not None:
        yield attr
    elif isinstance(attr, ir.ArrayAttr):
        # Only arrays that hold one: iterating makes a Python object of each element,
        # and a `#linalg.iterator_type` one imports the OpDSL (ir/linalg_ops.py).
        if "#sparse_iter." in str(attr):
            for a in attr:
                yield from _dialect_attrs(a)
    elif isinstance(attr, ir.DictAttr):
        for i in range(len(attr)):
            yield from _dialect_attrs(attr[i].attr)


def check_op_attributes(op: ir.Operation) -> Iterator[Problem]:
    """The op's ``#sparse_iter`` attributes and the target attributes' structure."""
    attributes = op.attributes
    for named in (attributes[i] for i in range(len(attributes))):
        if named.name in (TARGETS_ATTR, TARGET_ATTR):
            yield from _check_target_attr(op, named.name, named.attr)
        for attr in _dialect_attrs(named.attr):
            yield from check_attr(attr)


def _check_target_attr(op: ir.Operation, name: str, attr: ir.Attribute) -> Iterator[Problem]:
    if name == TARGETS_ATTR:
        if not isinstance(attr, ir.DictAttr):
            yield f"'{TARGETS_ATTR}' must be a dictionary of named targets, got {attr}"
            return
        for i in range(len(attr)):
            if mnemonic(attr[i].attr) not in ("cpu", "cuda"):
                yield f"target '{attr[i].name}' must be #sparse_iter.cpu or #sparse_iter.cuda"
        return
    if not isinstance(attr, ir.StringAttr):
        yield f"'{TARGET_ATTR}' must name a target as a string, got {attr}"
        return
    known = _module_targets(op)
    if attr.value not in known:
        listed = ", ".join(sorted(known)) or "none"
        yield f"unknown target '{attr.value}'; the module's {TARGETS_ATTR} has: {listed}"


def _module_targets(op: ir.Operation) -> set[str]:
    parent = op.parent
    while parent is not None:
        attrs = parent.attributes
        if TARGETS_ATTR in attrs and isinstance(attrs[TARGETS_ATTR], ir.DictAttr):
            targets = attrs[TARGETS_ATTR]
            return {targets[i].name for i in range(len(targets))}
        parent = parent.parent
    return set()


def check_function_name(op: ir.Operation) -> Iterator[Problem]:
    """A function defined under a name of :data:`RESERVED_NAMES` (declarations, which
    stand for the C function, may use them)."""
    if op.name != "func.func" or not op.regions[0].blocks:
        return
    name = ir.StringAttr(op.attributes["sym_name"]).value
    if name in RESERVED_NAMES:
        yield (
            f"function @{name} has the name of the C library's {name}, which compiled "
            f"code calls; rename it (e.g. @{name}_kernel)"
        )


def check_sparse_buffer(op: ir.Operation) -> Iterator[Problem]:
    """``bufferization.to_buffer`` of a sparse tensor: it has no one buffer (MLIR's
    folder then asserted, killing the compiler)."""
    if op.name != "bufferization.to_buffer" or not len(op.operands):
        return
    ty = op.operands[0].type
    if isinstance(ty, ir.RankedTensorType) and ty.encoding is not None:
        yield (
            "bufferization.to_buffer of a sparse tensor: it is stored in several buffers; "
            "read them with sparse_tensor.values, sparse_tensor.positions and "
            "sparse_tensor.coordinates (or sparse_iter's), or convert it to a dense tensor first"
        )


def _problems(op: ir.Operation, seen: set[str]) -> list[Problem]:
    problems = list(check_op_attributes(op))
    problems += list(check_function_name(op))
    problems += list(check_sparse_buffer(op))
    if op.name in _ENCODING_OPS:
        problems += list(check_encoding_op(op))
    elif op.name in ACCESS_OPS:
        problems += list(check_access_op(op))
    for ty in types_of(op):
        if str(ty) not in seen:
            seen.add(str(ty))
            problems += list(check_tensor_type(ty))
    return problems


def verify(root: ir.Operation) -> bool:
    """Report every problem under ``root`` as an error diagnostic; True if none."""
    seen: set[str] = set()
    ok = True

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal ok
        try:
            problems = _problems(op, seen)
        except Exception as e:  # a verifier bug must not kill the process
            problems = [f"internal error in the sparse_iter verifier: {type(e).__name__}: {e}"]
        for problem in problems:
            op.location.emit_error(problem)
            ok = False
        return ir.WalkResult.ADVANCE

    root.walk(visit, ir.WalkOrder.PRE_ORDER)
    return ok
