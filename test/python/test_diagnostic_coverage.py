"""Every verifier message has an ``expected-error`` case in the lit suite.

The messages that ``sparsecomp-opt`` can report about ``#sparse_iter``
attributes and ops are the ``raise ...Error(f"...")`` and ``yield f"..."``
strings of the functions below. For each one, the longest literal piece of
the string must appear in some ``expected-error`` line under ``test/lit``,
so deleting a lit case (or adding a message without one) fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PKG = REPO / "python" / "sparsecomp"

#: module -> functions (``Class.method`` or ``function``) whose messages reach the verifier.
SCANNED = {
    # Level.parse, Layout.from_node and Part.from_node are left out: the
    # dialect's parsers reject such text first (layout-invalid.mlir has their
    # located errors); test_formats_attr checks the host messages on host text.
    "formats/levels.py": ["Level.check"],
    "formats/dimmap.py": ["DimMap.from_names", "DimMap.check", "_parse_expr"],
    "formats/layout.py": ["Layout.check", "Layout._check_structured"],
    "formats/composable.py": [
        "Part.__post_init__", "Composable.__post_init__", "Composable.from_node",
    ],
    "targets/cpu.py": ["CpuTarget.__post_init__"],
    "targets/cuda.py": ["CudaTarget.__post_init__"],
    "ir/verify.py": ["check_tensor_type", "check_encoding_op", "_check_target_attr"],
    "targets/resolve.py": [
        "Sparsity.__post_init__", "Encoding.parse", "select_target", "resolve", "_choose",
    ],
    "transforms/_specialize.py": [
        "Specializer.layout_type", "Specializer.rewrite", "Specializer._check_regions",
    ],
    "ir/verify_access.py": ["check_access_op", "_expect_rank1"],
    "lowering/analyze.py": ["make_plan", "_check_driver", "_shared_inputs", "_check_output"],
    "lowering/plan.py": ["_layout"],
    "lowering/parts.py": ["check_split"],
    "lowering/convert.py": ["check_conversion", "target_dims", "_source_layout"],
    "lowering/flatten.py": ["Flattener.rewrite", "layout_of"],
    "transforms/lower_iterations.py": ["LowerIterationsPass._lower"],
    "transforms/lower_buffers.py": ["LowerBuffersPass._check_no_encodings"],
    "transforms/mark_upstream.py": ["_Exporter.__call__"],
    "transforms/wrap_upstream.py": ["Storage.of", "groups", "_signatures"],
}  # fmt: skip

#: Messages the IR cannot trigger, with the reason.
UNREACHABLE = {
    "repeated dimension name": "the layout parser rejects repeated names first",
    "but the layout has": "the layout syntax pairs each map result with its level format",
    "must be one of 0, 8, 16, 32, 64, got": "the layout parser checks bit widths first",
    "not a #sparse_iter.sparsity or .encoding": "the verifier calls it on those two only",
    "an encoding starts with a #sparse_iter.sparsity": "the dialect's parser requires one",
    "op_name must be a string": "the dialect's parser requires a string",
    "uses an unknown dimension": "maps parsed from text only name their own dimensions",
    "malformed dimension-to-level map": "MLIR prints maps in the form DimMap parses",
    "unknown upstream level format": "MLIR has no other level formats",
    "must be split into its parts before planning": (
        "sparse-iter-lower-iterations splits composable operands (lowering/parts.py) first"
    ),
}


def _literal_pieces(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.Constant)]
    if isinstance(node, ast.BinOp):
        return _literal_pieces(node.left) + _literal_pieces(node.right)
    return []


def _message(node: ast.expr) -> str | None:
    pieces = [p for p in _literal_pieces(node) if p.strip()]
    return max(pieces, key=len).strip(" '\":,") if pieces else None


def _functions(tree: ast.Module) -> dict[str, ast.AST]:
    out: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            out[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    out[f"{node.name}.{item.name}"] = item
    return out


def verifier_messages() -> list[tuple[str, str]]:
    """``(where, longest literal piece)`` of every message in the scanned functions."""
    found = []
    for module, names in SCANNED.items():
        tree = ast.parse((PKG / module).read_text())
        funcs = _functions(tree)
        for name in names:
            assert name in funcs, f"{module}: no function {name} (update SCANNED)"
            for node in ast.walk(funcs[name]):
                arg = None
                if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                    arg = node.exc.args[0] if node.exc.args else None
                elif isinstance(node, ast.Yield):
                    arg = node.value
                if arg is not None and (msg := _message(arg)):
                    found.append((f"{module}:{name}:{node.lineno}", msg))
    return found


def expected_errors() -> str:
    lines = []
    for path in (REPO / "test" / "lit").rglob("*.mlir"):
        if "Output" in path.parts:
            continue
        lines += [ln for ln in path.read_text().splitlines() if "expected-error" in ln]
    return "\n".join(lines)


MESSAGES = verifier_messages()


def test_scan_finds_messages() -> None:
    assert len(MESSAGES) > 60


@pytest.mark.parametrize(("where", "message"), MESSAGES, ids=[w for w, _ in MESSAGES])
def test_message_has_expected_error_case(where: str, message: str) -> None:
    if any(key in message for key in UNREACHABLE):
        return
    assert message in expected_errors(), f"{where}: no expected-error for '{message}'"
