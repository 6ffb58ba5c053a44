"""Translate TableGen records of an ODS dialect into an IRDL module.

Input is the JSON that ``llvm-tblgen --dump-json`` prints for a ``.td`` file;
output is the textual ``irdl.dialect`` that ``mlir.dialects.irdl`` loads at run
time. Only what IRDL can express is translated: attribute parameters and op
operands/results with their base constraints. Semantic rules (value ranges,
type relations) live in :mod:`sparsecomp.ir.verify`.

Unsupported constraints are an error naming the ``.td`` location, so the
dialect never loads with a silently weaker definition.
"""

from __future__ import annotations

from typing import Any

from sparsecomp.errors import ToolchainError

Records = dict[str, Any]

#: C++ storage type of an attribute parameter -> IRDL constraint.
_PARAM_CONSTRAINTS = {
    "::mlir::StringAttr": 'irdl.base "#builtin.string"',
    "::mlir::IntegerAttr": 'irdl.base "#builtin.integer"',
    "::mlir::FloatAttr": 'irdl.base "#builtin.float"',
    "::mlir::ArrayAttr": 'irdl.base "#builtin.array"',
    "::mlir::DictionaryAttr": 'irdl.base "#builtin.dictionary"',
    "::mlir::DenseI64ArrayAttr": 'irdl.base "#builtin.dense_array"',
    "::mlir::DenseI32ArrayAttr": 'irdl.base "#builtin.dense_array"',
    "::mlir::DenseF64ArrayAttr": 'irdl.base "#builtin.dense_array"',
    "::mlir::AffineMapAttr": 'irdl.base "#builtin.affine_map"',
    "::mlir::TypeAttr": 'irdl.base "#builtin.type"',
    "::mlir::Attribute": "irdl.any",
}

#: ODS type constraint def name -> IRDL constraint.
_TYPE_CONSTRAINTS = {
    "AnyType": "irdl.any",
    "AnyRankedTensor": 'irdl.base "!builtin.tensor"',
    "AnyMemRef": 'irdl.base "!builtin.memref"',
    "Index": "irdl.is index",
    "I1": "irdl.is i1",
    "I32": "irdl.is i32",
    "I64": "irdl.is i64",
    "F32": "irdl.is f32",
    "F64": "irdl.is f64",
}

#: ODS builtin attribute constraints usable as op attributes -> IRDL constraint.
_BUILTIN_OP_ATTRS = {
    "I64Attr": 'irdl.base "#builtin.integer"',
    "StrAttr": 'irdl.base "#builtin.string"',
    "UnitAttr": 'irdl.base "#builtin.unit"',
}


def _ref(value: Any) -> str:
    """The def name of a ``{"def": ..., "kind": "def"}`` JSON reference."""
    return value["def"] if isinstance(value, dict) else str(value)


def _loc(record: dict[str, Any]) -> str:
    locs = record.get("!locs") or ["<unknown>"]
    return locs[0]


def _dag_args(record: dict[str, Any], field: str) -> list[tuple[str, str]]:
    """``(def name, $name)`` pairs of an ``(ins ...)``/``(outs ...)`` dag."""
    dag = record.get(field) or {"args": []}
    return [(_ref(arg), name) for arg, name in dag["args"]]


def _defs_of(records: Records, cls: str, dialect: str) -> list[dict[str, Any]]:
    names = records["!instanceof"].get(cls, [])
    key = "dialect" if cls == "AttrDef" else "opDialect"
    return [records[n] for n in names if _ref(records[n][key]) == dialect]


def _param_constraint(records: Records, param_def: str, local: dict[str, str]) -> str:
    param = records[param_def]
    cpp = param.get("cppType") or param_def
    bare = cpp.split("::")[-1]
    if bare in local:
        return f"irdl.base @{local[bare]}"
    if cpp in _PARAM_CONSTRAINTS:
        return _PARAM_CONSTRAINTS[cpp]
    raise ToolchainError(
        f"attribute parameter of C++ type '{cpp}' has no IRDL equivalent",
        location=_loc(param),
        hint="use a builtin attribute type (StringAttr, ArrayAttr, ...) or a dialect attribute",
    )


def _type_constraint(records: Records, def_name: str) -> str:
    if def_name in _TYPE_CONSTRAINTS:
        return _TYPE_CONSTRAINTS[def_name]
    raise ToolchainError(
        f"type constraint '{def_name}' has no IRDL equivalent",
        location=_loc(records.get(def_name, {})),
        hint=f"supported: {', '.join(sorted(_TYPE_CONSTRAINTS))}",
    )


def _emit_attr(records: Records, attr: dict[str, Any], local: dict[str, str]) -> str:
    lines = [f"  irdl.attribute @{attr['mnemonic']} {{"]
    names = []
    for i, (param_def, name) in enumerate(_dag_args(attr, "parameters")):
        constraint = _param_constraint(records, param_def, local)
        lines.append(f"    %p{i} = {constraint}")
        names.append(f"{name}: %p{i}")
    lines.append(f"    irdl.parameters({', '.join(names)})")
    lines.append("  }")
    return "\n".join(lines)


def _is_attr(records: Records, def_name: str) -> bool:
    return def_name in records["!instanceof"].get("Attr", [])


def _emit_attributes(records: Records, op: dict[str, Any], local: dict[str, str]) -> list[str]:
    """``irdl.attributes`` for the op's attribute arguments (dialect attributes only)."""
    attrs = [(d, n) for d, n in _dag_args(op, "arguments") if _is_attr(records, d)]
    lines = []
    for i, (def_name, _) in enumerate(attrs):
        cpp = records[def_name].get("cppClassName", "")
        if def_name in _BUILTIN_OP_ATTRS:
            lines.append(f"    %a{i} = {_BUILTIN_OP_ATTRS[def_name]}")
            continue
        if cpp not in local:
            raise ToolchainError(
                f"op attribute constraint '{def_name}' has no IRDL equivalent",
                location=_loc(op),
                hint=f"use a dialect attribute or one of {sorted(_BUILTIN_OP_ATTRS)}",
            )
        lines.append(f"    %a{i} = irdl.base @{local[cpp]}")
    if attrs:
        names = ", ".join(f'"{name}" = %a{i}' for i, (_, name) in enumerate(attrs))
        lines.append(f"    irdl.attributes {{{names}}}")
    return lines


def _variadic_base(records: Records, def_name: str) -> str | None:
    """The element constraint of a ``Variadic<...>`` def, else None."""
    record = records.get(def_name, {})
    if "Variadic" not in record.get("!superclasses", []):
        return None
    return _ref(record["baseType"])


def _emit_values(
    records: Records, op: dict[str, Any], field: str, keyword: str, prefix: str
) -> list[str]:
    args = [(d, n) for d, n in _dag_args(op, field) if not _is_attr(records, d)]
    lines = []
    names = []
    for i, (constraint_def, name) in enumerate(args):
        # IRDL binds a constraint variable once: every value of a variadic
        # group must have the same type (several groups need the op's
        # AttrSizedOperandSegments, i.e. an ``operandSegmentSizes`` attribute).
        base = _variadic_base(records, constraint_def)
        lines.append(f"    %{prefix}{i} = {_type_constraint(records, base or constraint_def)}")
        names.append(f"{name}: {'variadic ' if base else ''}%{prefix}{i}")
    if args:
        lines.append(f"    irdl.{keyword}({', '.join(names)})")
    return lines


def _emit_op(records: Records, op: dict[str, Any], local: dict[str, str]) -> str:
    lines = [f"  irdl.operation @{op['opName']} {{"]
    lines += _emit_values(records, op, "arguments", "operands", "o")
    lines += _emit_attributes(records, op, local)
    lines += _emit_values(records, op, "results", "results", "r")
    lines.append("  }")
    return "\n".join(lines)


def irdl_from_records(records: Records, dialect_def: str) -> str:
    """The IRDL module text for the dialect record ``dialect_def``."""
    name = records[dialect_def]["name"]
    attrs = _defs_of(records, "AttrDef", dialect_def)
    ops = _defs_of(records, "Op", dialect_def)
    # Dialect attributes may use each other as parameters; IRDL refers to
    # them by symbol, ``@dialect::@mnemonic``.
    local = {a["cppClassName"]: f"{name}::@{a['mnemonic']}" for a in attrs}
    body = [_emit_attr(records, a, local) for a in attrs]
    body += [_emit_op(records, o, local) for o in ops]
    header = "// Generated by sparsecomp.ir.odsgen from the dialect's .td; do not edit.\n"
    return header + f"irdl.dialect @{name} {{\n" + "\n".join(body) + "\n}\n"
