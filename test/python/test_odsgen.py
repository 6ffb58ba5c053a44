"""The dialect's generated artifacts come from dialects/sparse_iter.td and stay fresh."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sparsecomp.errors import ToolchainError
from sparsecomp.ir import odsgen
from sparsecomp.ir.irdlgen import irdl_from_records


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


def test_editing_the_td_makes_docs_stale(repo, tmp_path, monkeypatch):
    edited = tmp_path / "sparse_iter.td"
    text = odsgen.td_path().read_text()
    edited.write_text(text.replace("Attach a sparse_iter encoding", "Attach an encoding"))
    monkeypatch.setattr(odsgen, "td_path", lambda: edited)
    assert odsgen.generate_doc() != (repo / "docs" / "dialect.md").read_text()
    assert odsgen.cache_key() != _key_of_original(monkeypatch)


def _key_of_original(monkeypatch) -> str:
    monkeypatch.undo()
    return odsgen.cache_key()


def test_generated_irdl_covers_every_def():
    irdl = odsgen.generate_irdl()
    records = json.loads(odsgen._tblgen("llvm-tblgen", "--dump-json"))
    for name in records["!instanceof"]["AttrDef"]:
        assert f"irdl.attribute @{records[name]['mnemonic']}" in irdl
    for name in records["!instanceof"]["Op"]:
        assert f"irdl.operation @{records[name]['opName']}" in irdl


def test_params_table_matches_td():
    table = json.loads(odsgen.generate_params())
    assert table["layout"] == ["levels", "dim_to_lvl", "pos_width", "crd_width", "options"]
    assert set(table) == {
        *("sparsity", "encoding", "layout", "part", "composable"),
        *("cpu", "cuda", "sparsifier"),
    }


def test_python_bindings_import_absolutely():
    text = odsgen.generate_python()
    assert "from ._ods_common" not in text
    assert "class SetEncodingOp" in text


def test_unsupported_parameter_names_td_location():
    records = json.loads(odsgen._tblgen("llvm-tblgen", "--dump-json"))
    attr = records["SparseIter_LayoutAttr"]
    param = attr["parameters"]["args"][0][0]["def"]
    records[param]["cppType"] = "::llvm::APFloat"
    with pytest.raises(ToolchainError, match=r"sparse_iter\.td:\d+: error: .*APFloat"):
        irdl_from_records(records, odsgen.DIALECT_DEF)


def test_unsupported_type_constraint_is_refused():
    records = json.loads(odsgen._tblgen("llvm-tblgen", "--dump-json"))
    op = records["SparseIter_SetEncodingOp"]
    op["arguments"]["args"][0][0]["def"] = "AnyComplex"
    with pytest.raises(ToolchainError, match="type constraint 'AnyComplex'"):
        irdl_from_records(records, odsgen.DIALECT_DEF)


def test_cache_regenerates_missing_outputs(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARSECOMP_CACHE_DIR", str(tmp_path))
    out = odsgen.ensure_generated()
    assert out.is_relative_to(tmp_path)
    (out / odsgen.IRDL_FILE).unlink()
    assert (odsgen.ensure_generated() / odsgen.IRDL_FILE).exists()


def test_out_dir_cli(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "sparsecomp.ir.odsgen", "--out-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(odsgen._OUTPUTS)


def test_op_attributes_become_irdl_attributes():
    irdl = odsgen.generate_irdl()
    body = irdl[irdl.index("irdl.operation @sparsify") :]
    body = body[: body.index("\n  }\n")]
    assert "irdl.base @sparse_iter::@sparsifier" in body
    assert 'irdl.attributes {"sparsifier" = %a0}' in body
    assert "irdl.operands(source: %o0)" in body  # the attribute is not an operand


def test_op_attribute_of_a_foreign_kind_is_refused():
    records = json.loads(odsgen._tblgen("llvm-tblgen", "--dump-json"))
    op = records["SparseIter_SparsifyOp"]
    op["arguments"]["args"][1][0]["def"] = "F64Attr"
    with pytest.raises(ToolchainError, match="op attribute constraint 'F64Attr'"):
        irdl_from_records(records, odsgen.DIALECT_DEF)
