"""The printer's round trip (IR -> Python -> IR) over every example and lit input,
as written and at stage II.

The inputs: ``examples/*.mlir`` and each ``// -----`` chunk of every
``test/lit/**/*.mlir`` file that parses (a chunk that does not is an
expected-error input, not IR). Each is normalized (``linalg-generalize-named-ops``
and ``sparsecomp-cleanup``), printed with
:func:`sparsecomp.script.printer.to_python`, run (its last line assembles
the module again), normalized again and compared as text. Each is also
lowered to stage II (:data:`STAGE_II`: the position-space loops after
``sparse-iter-lower-iterations``) where the pipeline takes it and changes it,
and that IR goes round the same way (key ``path#chunk@II``).

``script_roundtrip_exceptions.txt`` lists the inputs that do not round trip
yet, one per line: ``path#chunk: reason`` (stage II and later IR, memref
functions, declarations...). The test checks that the list is exact, so it
shrinks as the subset grows. To write it again:

    python test/python/script_corpus.py > test/python/script_roundtrip_exceptions.txt
"""

from __future__ import annotations

import functools
import importlib.util
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
EXCEPTIONS = Path(__file__).with_name("script_roundtrip_exceptions.txt")
SPLIT = "\n// -----\n"


def inputs() -> Iterator[tuple[str, str]]:
    """``(key, text)`` of every example and lit chunk, in a fixed order."""
    for path in sorted((REPO / "examples").glob("*.mlir")):
        yield path.relative_to(REPO).as_posix(), path.read_text()
    for path in sorted((REPO / "test" / "lit").rglob("*.mlir")):
        for k, chunk in enumerate(path.read_text().split(SPLIT)):
            yield f"{path.relative_to(REPO).as_posix()}#{k}", chunk


def normalize(text: str) -> str | None:
    """The IR generalized and cleaned up, without the size names a Python kernel
    records (``sparse_iter.size_names``: the printer makes its own up); None if it
    does not parse."""
    from mlir import ir, passmanager

    from sparsecomp.ir.context import make_context
    from sparsecomp.lowering.sizes import drop_names

    with make_context():
        try:
            module = ir.Module.parse(text)
        except ir.MLIRError:
            return None
        pipeline = "builtin.module(linalg-generalize-named-ops,canonicalize,cse)"
        passmanager.PassManager.parse(pipeline).run(module.operation)
        drop_names(module.operation)
        return str(module)


#: stage II: what ``sparsecomp-cpu`` makes of a program before its buffers
STAGE_II = "sparsecomp-cpu-layouts,sparsecomp-cpu-loops,canonicalize,cse"


def lower(text: str) -> str | None:
    """The program at stage II (after ``sparse-iter-lower-iterations``, cleaned
    up); None where the pipeline refuses it (an expected-error input)."""
    from mlir import ir

    from sparsecomp.ir.context import make_context
    from sparsecomp.transforms.pipeline import build_pass_manager

    with make_context() as ctx:
        try:
            module = ir.Module.parse(text)
            build_pass_manager(STAGE_II, ctx).run(module.operation)
        except (ir.MLIRError, SparsecompErrorOrNone()):
            return None
        return str(module)


def SparsecompErrorOrNone() -> type[Exception]:
    from sparsecomp.errors import SparsecompError

    return SparsecompError


def import_file(path: Path) -> Any:
    """The Python module in ``path``, imported under its file's name."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def round_trip(ir_text: str, folder: Path, name: str) -> str:
    """``same``, or why the IR does not come back the same through Python."""
    from sparsecomp.errors import SparsecompError
    from sparsecomp.script.printer import to_python

    try:
        python = to_python(ir_text)
    except SparsecompError as e:
        return e.message
    path = folder / f"{name}.py"
    path.write_text(python)
    try:
        again = normalize(str(import_file(path).MODULE))
    except SparsecompError as e:
        return f"the printed Python does not build: {e.message.splitlines()[0]}"
    return "same" if again == ir_text else "the module differs after the round trip"


@functools.cache
def outcomes() -> dict[str, str]:
    """Every input's outcome (see :func:`round_trip`)."""
    found = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n, (key, text) in enumerate(inputs()):
            normal = normalize(text)
            if normal is None:
                continue
            found[key] = round_trip(normal, Path(tmp), f"roundtrip_{n}")
            lowered = lower(normal)
            lowered = normalize(lowered) if lowered is not None else None
            if lowered is not None and lowered != normal:
                found[f"{key}@II"] = round_trip(lowered, Path(tmp), f"roundtrip_{n}_ii")
    return found


def listed() -> dict[str, str]:
    """The checked-in exceptions: key -> reason."""
    out = {}
    for line in EXCEPTIONS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, reason = line.partition(": ")
            out[key] = reason
    return out


def main() -> None:
    found = outcomes()
    bad = {k: v for k, v in found.items() if v != "same"}
    print("# Inputs the printer does not round trip (see script_corpus.py; @II: at stage II).")
    print(f"# {len(found) - len(bad)} of {len(found)} inputs round trip; {len(bad)} listed.")
    for key, reason in bad.items():
        print(f"{key}: {reason}")


if __name__ == "__main__":
    sys.exit(main())
