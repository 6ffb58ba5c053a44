"""The dialect library and its generated artifacts come from sparse_iter.td and stay fresh."""

from __future__ import annotations

import json
import re
import runpy
import subprocess
import sys
import textwrap

import pytest

from sparsecomp.errors import ToolchainError
from sparsecomp.ir import context, odsgen


@pytest.fixture(scope="module")
def build(repo):  # dialects/build.py's functions (mlir-tblgen is a runtime dependency too)
    return runpy.run_path(str(repo / "dialects" / "build.py"))


def test_td_is_the_single_source(repo):
    assert odsgen.td_path() == (repo / "dialects" / "sparse_iter.td").resolve()


def test_docs_dialect_is_fresh(repo):
    committed = (repo / "docs" / "dialect.md").read_text()
    assert committed == odsgen.generate_doc(), (
        "docs/dialect.md is stale: python -m sparsecomp.ir.odsgen --doc docs/dialect.md"
    )


def test_check_doc_flags_a_stale_file(tmp_path):
    stale = tmp_path / "dialect.md"
    stale.write_text("# outdated\n")
    assert odsgen.main(["--check-doc", str(stale)]) == 1
    odsgen.main(["--doc", str(stale)])
    assert odsgen.main(["--check-doc", str(stale)]) == 0


def test_library_is_built_from_these_sources(build):
    stamp = json.loads((context.GENERATED / context.STAMP_FILE).read_text())
    assert stamp["source"] == context.source_hash() == build["td_hash"]()


def test_editing_the_td_makes_the_library_stale(repo, tmp_path, monkeypatch):
    edited = tmp_path / "sparse_iter.td"
    text = odsgen.td_path().read_text()
    edited.write_text(text.replace("Attach a sparse_iter encoding", "Attach an encoding"))
    cpp = repo / "dialects" / "SparseIterDialect.cpp"
    monkeypatch.setattr(context, "_SOURCES", (edited, cpp))
    with pytest.raises(ToolchainError, match="stale") as err:
        context.generated(context.PY_FILE)
    assert "pip install -e ." in str(err.value.hint)


def test_generated_python_is_fresh(build):
    assert (context.GENERATED / context.PY_FILE).read_text() == build["python_ops"]()


def test_every_op_is_registered(ctx):
    td = odsgen.td_path().read_text()
    ops = re.findall(r'SparseIter_Op<"(\w+)"', td)
    assert len(ops) >= 9
    for name in ops:
        assert ctx.is_registered_operation(f"sparse_iter.{name}"), name


def test_python_bindings_import_absolutely():
    text = (context.GENERATED / context.PY_FILE).read_text()
    assert "from mlir.dialects._ods_common import" in text
    assert "from ._ods_common" not in text


def test_library_exports_only_its_entry_point(build):
    lib = context.GENERATED / context.LIBRARY
    nm = subprocess.run(
        [str(odsgen.tool("llvm-nm")), "-D", "--defined-only", str(lib)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    exported = {line.split()[-1] for line in nm.stdout.splitlines() if " T " in line}
    assert "sparsecompRegisterSparseIter" in exported
    assert not {s for s in exported if "SparseIterDialect" in s}  # -fvisibility=hidden


def test_one_mlir_in_the_process():
    """Loading the library beside the bindings does not load a second libMLIR."""
    code = textwrap.dedent(
        """
        from sparsecomp.ir.context import make_context
        make_context()
        maps = open("/proc/self/maps").read()
        print(sorted({l.split("/")[-1] for l in maps.splitlines() if "libMLIR" in l}))
        print(sorted({l.split("/")[-1] for l in maps.splitlines() if "libLLVM" in l}))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    mlir, llvm = done.stdout.splitlines()
    assert mlir == "['libMLIRPythonCAPI.so', 'libMLIRPythonSupport-mlir.so']"  # no libMLIR.so
    assert llvm == "['libLLVM.so']"
