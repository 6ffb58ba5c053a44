"""Semantic verification of ``sparse_iter`` that IRDL cannot express.

IRDL checks that attribute parameters and operands have the right *kind*
(an array, an integer, a tensor); the rules here check their *values*: level
names, bit widths, map arities, n <= m, and that ``set_encoding`` and
``unset_encoding`` change only the encoding. Each violation is reported once,
at the location of the first op whose types carry the faulty attribute.

``sparsecomp-opt`` runs this after parsing (as mlir-opt runs the verifier),
and every sparsecomp pass runs it on its input.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from mlir import ir

from sparsecomp.ir.attrs import encoding_of, mnemonic, params

SPARSITY_KINDS = {"unstructured": 0, "nm": 2, "block": 2, "ragged": 0}
LEVEL_FORMATS = {
    "dense_fixed",
    "dense_varied",
    "compressed_fixed",
    "compressed_varied",
    "singleton",
}
BIT_WIDTHS = {0, 8, 16, 32, 64}

Problem = str


def _check_sparsity(p: dict[str, ir.Attribute]) -> Iterator[Problem]:
    kind = ir.StringAttr(p["kind"]).value
    if kind not in SPARSITY_KINDS:
        yield f"unknown sparsity kind '{kind}'; expected one of {', '.join(SPARSITY_KINDS)}"
        return
    if not isinstance(p["params"], ir.DenseI64ArrayAttr):
        yield f"sparsity params must be an array<i64: ...>, got {p['params']}"
        return
    values = list(p["params"])
    if len(values) != SPARSITY_KINDS[kind]:
        yield f"sparsity '{kind}' takes {SPARSITY_KINDS[kind]} params, got {len(values)}"
    elif kind == "nm" and not 0 < values[0] <= values[1]:
        yield f"n:m sparsity needs 0 < n <= m, got {values[0]}:{values[1]}"
    elif kind == "block" and min(values) <= 0:
        yield f"block sizes must be positive, got {values[0]}x{values[1]}"
    density = ir.FloatAttr(p["density"]).value
    if not 0.0 <= density <= 1.0:
        yield f"density must lie in [0, 1], got {density}"


def _check_encoding(p: dict[str, ir.Attribute]) -> Iterator[Problem]:
    yield from check_attr(p["sparsity"])
    index = ir.IntegerAttr(p["operand_index"]).value
    types = list(ir.ArrayAttr(p["element_types"]))
    maps = list(ir.ArrayAttr(p["indexing_maps"]))
    if index < 0:
        yield f"operand_index must be non-negative, got {index}"
    if not all(isinstance(t, ir.TypeAttr) for t in types):
        yield "element_types must be an array of types"
    if not all(isinstance(m, ir.AffineMapAttr) for m in maps):
        yield "indexing_maps must be an array of affine maps"
    elif maps and index >= len(maps):
        yield f"operand_index {index} is out of range for {len(maps)} indexing maps"


def _check_layout(p: dict[str, ir.Attribute]) -> Iterator[Problem]:
    levels = list(ir.ArrayAttr(p["levels"]))
    if not levels:
        yield "a layout needs at least one level"
    for level in levels:
        if not isinstance(level, ir.StringAttr):
            yield f"level formats must be strings, got {level}"
        elif (name := ir.StringAttr(level).value) not in LEVEL_FORMATS:
            valid = ", ".join(sorted(LEVEL_FORMATS))
            yield f"unknown level format '{name}'; expected one of {valid}"
    dim_to_lvl = ir.AffineMapAttr(p["dim_to_lvl"]).value
    n_results = len(dim_to_lvl.results)
    if levels and n_results != len(levels):
        yield f"dim_to_lvl has {n_results} results but the layout has {len(levels)} levels"
    for key in ("pos_width", "crd_width"):
        width = ir.IntegerAttr(p[key]).value
        if width not in BIT_WIDTHS:
            yield f"{key} must be one of 0, 8, 16, 32, 64, got {width}"


_CHECKERS: dict[str, Callable[[dict[str, ir.Attribute]], Iterator[Problem]]] = {
    "sparsity": _check_sparsity,
    "encoding": _check_encoding,
    "layout": _check_layout,
}


def check_attr(attr: ir.Attribute) -> Iterator[Problem]:
    """Problems with one ``#sparse_iter`` attribute (nothing for other attributes)."""
    name = mnemonic(attr)
    if name in _CHECKERS:
        yield from _CHECKERS[name](params(attr))


def check_tensor_type(ty: ir.Type) -> Iterator[Problem]:
    """Problems with the encoding of a tensor type, including its rank."""
    enc = encoding_of(ty)
    if enc is None:
        return
    problems = list(check_attr(enc))
    yield from problems
    if not problems and mnemonic(enc) == "layout":
        dims = ir.AffineMapAttr(params(enc)["dim_to_lvl"]).value.n_dims
        rank = ir.RankedTensorType(ty).rank
        if dims != rank:
            yield f"layout maps {dims} dimensions but the tensor {ty} has rank {rank}"


def _strip(ty: ir.RankedTensorType) -> tuple[list[int], str]:
    return list(ty.shape), str(ty.element_type)


def check_encoding_op(op: ir.Operation) -> Iterator[Problem]:
    """``set_encoding`` adds an encoding, ``unset_encoding`` drops it; nothing else changes."""
    source, result = op.operands[0].type, op.results[0].type
    plain, encoded = (source, result) if op.name.endswith(".set_encoding") else (result, source)
    verb = "set_encoding result" if plain is source else "unset_encoding source"
    if encoding_of(encoded) is None:
        yield f"{verb} must carry a #sparse_iter encoding, got {encoded}"
    elif ir.RankedTensorType(plain).encoding is not None:
        other = "source" if plain is source else "result"
        yield f"{op.name} {other} must not carry an encoding, got {plain}"
    elif _strip(ir.RankedTensorType(plain)) != _strip(ir.RankedTensorType(encoded)):
        yield f"{op.name} must keep shape and element type: {source} vs {result}"


def _types_of(op: ir.Operation) -> Iterator[ir.Type]:
    yield from (r.type for r in op.results)
    for region in op.regions:
        for block in region.blocks:
            yield from (a.type for a in block.arguments)
    if "function_type" in op.attributes:
        fty = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
        yield from fty.inputs
        yield from fty.results


def verify(root: ir.Operation) -> bool:
    """Report every problem under ``root`` as an error diagnostic; True if none."""
    seen: set[str] = set()
    ok = True

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal ok
        problems = []
        if op.name in ("sparse_iter.set_encoding", "sparse_iter.unset_encoding"):
            problems += list(check_encoding_op(op))
        for ty in _types_of(op):
            if str(ty) not in seen:
                seen.add(str(ty))
                problems += list(check_tensor_type(ty))
        for problem in problems:
            op.location.emit_error(problem)
            ok = False
        return ir.WalkResult.ADVANCE

    root.walk(visit, ir.WalkOrder.PRE_ORDER)
    return ok
