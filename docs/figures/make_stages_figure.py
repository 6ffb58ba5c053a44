"""The stages of one compile, measured: a table in docs/design.md and docs/figures/stages.png.

Compiles ``examples/spmm.mlir`` for an AVX2 CPU (:data:`TARGET`) with no
cache (``sparsecomp-compile -v``), then counts the operations of each stage's IR
(the files a kernel folder keeps: ``layouts.mlir`` ... ``llvm.mlir``, then
the LLVM IR's instructions and the library's bytes) and takes each stage's
time from the ``-v`` report. ``--write`` puts the table into docs/design.md
between the ``stages`` markers and draws the figure, whose PNG
``Description`` is the SHA-256 of that table; a test checks the figure
against the table and the operation counts against a fresh compile (the
times are this machine's, once). Run from the repository root::

    .venv/bin/python docs/figures/make_stages_figure.py [--write]
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mdtable

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"
OUT = Path(__file__).resolve().parent / "stages.png"
EXAMPLE = "examples/spmm.mlir"
#: A fixed target, so that the counts do not depend on the machine (one with AVX2)
TARGET = (
    "#sparse_iter.cpu<x86_64, features = [sse4.2, avx, avx2, fma], vector_bits = 256, threads = 0>"
)
BEGIN, END = "<!-- stages:begin -->", "<!-- stages:end -->"
#: (stage, the file holding its IR, what it is) in compile order
STAGES = (
    ("source", EXAMPLE, "the program as written"),
    ("layouts", "layouts.mlir", "I: every sparse tensor has a layout"),
    ("upstream", "upstream.mlir", "functions marked for MLIR's sparsifier lowered"),
    ("loops", "loops.mlir", "II: loops over stored entries"),
    ("buffers", "buffers.mlir", "III: flat buffers at function boundaries"),
    ("llvm", "llvm.mlir", "LLVM dialect: vectorized, OpenMP, C interface"),
    ("so", "kernel.ll", "LLVM IR, compiled and linked into kernel.so"),
)


def operations(path: Path) -> int:
    """Operations in an MLIR file (every nested one), or instructions in LLVM IR."""
    if path.suffix == ".ll":
        body = [ln for ln in path.read_text().splitlines() if ln.startswith("  ")]
        return sum(1 for ln in body if not ln.lstrip().startswith(("!", ";")))
    from mlir import ir

    from sparsecomp.ir.context import make_context

    with make_context():
        module = ir.Module.parse(path.read_text())
        count = 0

        def visit(_: ir.Operation) -> ir.WalkResult:
            nonlocal count
            count += 1
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)
    return count - 1  # not the module itself


def measure() -> list[dict[str, str]]:
    """One row per stage: operations, lines and time (ms; the source has none)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "kernel"
        done = subprocess.run(
            [Path(sys.executable).parent / "sparsecomp-compile", EXAMPLE, "-o", out,
             "--target", TARGET, "--no-cache", "-v"],
            cwd=ROOT, capture_output=True, text=True, check=True,
        )  # fmt: skip
        times = dict(re.findall(r"sparsecomp: (\w+)\s+([\d.]+) ms", done.stderr))
        rows = []
        for stage, name, what in STAGES:
            path = ROOT / name if stage == "source" else out / name
            rows.append({
                "stage": stage,
                "IR": what,
                "operations": str(operations(path)),
                "lines": str(len(path.read_text().splitlines())),
                "ms": times.get(stage, "-"),
            })  # fmt: skip
        rows.append({"stage": "total", "IR": f"kernel.so, {(out / 'kernel.so').stat().st_size} "
                     "bytes (the total includes reaching the compile daemon, started if none ran)",
                     "operations": "-", "lines": "-", "ms": times["total"]})  # fmt: skip
    return rows


def read_table(markdown: str) -> list[dict[str, str]]:
    """The rows of the table between the markers of ``markdown``."""
    return mdtable.parse(markdown.split(BEGIN, 1)[1].split(END, 1)[0].splitlines())


def fingerprint(rows: list[dict[str, str]]) -> str:
    return hashlib.sha256(mdtable.render(rows).encode()).hexdigest()


def draw(rows: list[dict[str, str]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stages = [r for r in rows if r["stage"] != "total"]
    names = [r["stage"] for r in stages][::-1]
    fig, (ops, ms) = plt.subplots(1, 2, figsize=(11, 3.6), sharey=True)
    ops.barh(names, [int(r["operations"]) for r in stages][::-1], color="tab:blue")
    ops.set_xlabel("operations (LLVM IR: instructions)")
    ops.set_title("IR size after each stage", fontsize=10)
    timed = [float(r["ms"]) if r["ms"] != "-" else 0.0 for r in stages][::-1]
    ms.barh(names, timed, color="tab:orange")
    ms.set_xlabel("milliseconds")
    ms.set_title("time of each stage (so: llc, cc -shared)", fontsize=10)
    fig.suptitle(f"Compiling {EXAMPLE} (total {rows[-1]['ms']} ms)")
    fig.tight_layout()
    fig.savefig(out, dpi=90, metadata={"Description": fingerprint(rows)})
    plt.close(fig)


def main(argv: list[str]) -> int:
    rows = measure()
    print(mdtable.render(rows))
    if "--write" in argv:
        text = DESIGN.read_text()
        before, rest = text.split(BEGIN, 1)
        after = rest.split(END, 1)[1]
        DESIGN.write_text(f"{before}{BEGIN}\n{mdtable.render(rows)}\n{END}{after}")
        draw(rows, OUT)
        print(OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
