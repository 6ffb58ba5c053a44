"""Printing is a fixed point: ``sparsecomp-opt f.mlir | sparsecomp-opt`` reprints the same text.

Every chunk of every lit input that parses and verifies (chunks that expect
diagnostics are skipped: they are not valid programs) is printed, parsed
back and printed again; the two texts must be byte-identical. This holds
the dialect's parsers and printers to each other.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sparsecomp.tools.opt import Options, run_chunk, split_chunks

LIT = Path(__file__).resolve().parents[1] / "lit"
INPUTS = sorted(p for p in LIT.rglob("*.mlir") if not {"Output", "Inputs"} & set(p.parts))


def _chunks(path: Path) -> list[str]:
    text = path.read_text()
    marker = "// -----" if "--split-input-file" in text else None
    return [c for c in split_chunks(text, marker) if "expected-" not in c]


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: str(p.relative_to(LIT)))
def test_reprinting_is_a_fixed_point(path: Path) -> None:
    chunks = _chunks(path)
    printed = 0
    for chunk in chunks:
        first, _ = run_chunk(chunk, Options(pipeline="", filename=str(path)))
        if first is None:
            continue  # an input that only a pass's diagnostics make sense of
        second, diagnostics = run_chunk(first, Options(pipeline="", filename="<printed>"))
        assert second == first, f"{path}: reprinting changed the text ({diagnostics})"
        printed += 1
    assert printed or not chunks, f"{path}: no chunk parsed"


def test_inputs_found() -> None:
    assert len(INPUTS) > 40
