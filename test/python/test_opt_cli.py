"""Tests of the ``sparsecomp-opt`` command line, driven in-process through ``main``."""

from __future__ import annotations

import dataclasses
import inspect
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sparsecomp.tools.opt import main
from sparsecomp.transforms import get_all_passes
from sparsecomp.transforms.base import kebab
from sparsecomp.transforms.pipeline import build_pass_manager, named_pipelines

LIT = Path(__file__).resolve().parents[1] / "lit"
ROUNDTRIP = LIT / "dialect" / "roundtrip.mlir"
SEPARATOR = "// -----"

CSR = (
    "#sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), "
    "posWidth = 32, crdWidth = 32}>"
)
#: Parses, and fails the verifier (a singleton level needs a nonunique parent).
BAD_LEVELS = CSR.replace("j : compressed", "j : singleton")
SINGLETON = (
    "singleton level 1 must follow a nonunique compressed, loose_compressed or singleton level"
)

FOLDABLE = f"""#csr = {CSR}
func.func @fold(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {{
  %0 = "sparse_iter.set_encoding"(%x) : (tensor<?x?xf32>) -> tensor<?x?xf32, #csr>
  %1 = "sparse_iter.unset_encoding"(%0) : (tensor<?x?xf32, #csr>) -> tensor<?x?xf32>
  return %1 : tensor<?x?xf32>
}}
"""
SIMPLE = "func.func @simple(%a: i32) -> i32 {\n  return %a : i32\n}\n"
#: A verifier error on line 2 (the ``func.func`` line).
INVALID = f"// comment\nfunc.func private @bad(tensor<?x?xf32, {BAD_LEVELS}>)\n"


@dataclasses.dataclass
class Result:
    rc: int
    out: str
    err: str

    @property
    def err_lines(self) -> list[str]:
        return self.err.splitlines()

    def failed(self) -> Result:
        """Assert a clean failure: exit 1 and no Python traceback anywhere."""
        assert self.rc == 1, (self.rc, self.err)
        assert "Traceback" not in self.out + self.err
        return self

    def single_error(self) -> str:
        """Assert a clean failure with one line on stderr; return that line."""
        self.failed()
        assert len(self.err_lines) == 1, self.err
        return self.err_lines[0]


def opt(capture, *args: str | Path) -> Result:
    rc = main([str(a) for a in args])
    out, err = capture.readouterr()
    return Result(rc, out, err)


def write(tmp_path: Path, text: str, name: str = "input.mlir") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture
def stdin(monkeypatch):
    def feed(text: str) -> None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(text))

    return feed


def registered_passes() -> dict[str, type]:
    return {name: load() for name, load in get_all_passes().items()}


# -- printing and round trips --------------------------------------------------


def test_round_trip_is_stable(capsys, tmp_path) -> None:
    first = opt(capsys, ROUNDTRIP)
    assert (first.rc, first.err) == (0, "")
    assert "#sparse_iter.layout<" in first.out
    again = opt(capsys, write(tmp_path, first.out))
    assert (again.rc, again.err) == (0, "")
    assert again.out == first.out


def test_generic_form_round_trips(capsys, tmp_path) -> None:
    pretty = opt(capsys, ROUNDTRIP).out
    generic = opt(capsys, ROUNDTRIP, "--mlir-print-op-generic")
    assert generic.rc == 0
    assert '"func.func"()' in generic.out
    assert "func.func @" not in generic.out
    assert opt(capsys, write(tmp_path, generic.out)).out == pretty


def test_output_file(capsys, tmp_path) -> None:
    expected = opt(capsys, ROUNDTRIP).out
    target = tmp_path / "out.mlir"
    result = opt(capsys, ROUNDTRIP, "-o", target)
    assert (result.rc, result.out, result.err) == (0, "", "")
    assert target.read_text() == expected


def test_output_file_that_cannot_be_written(capsys, tmp_path) -> None:
    target = tmp_path / "missing-dir" / "out.mlir"
    line = opt(capsys, ROUNDTRIP, "-o", target).single_error()
    assert "cannot write output file" in line
    assert str(target) in line


def test_pass_runs(capsys, tmp_path) -> None:
    path = write(tmp_path, FOLDABLE)
    unchanged = opt(capsys, path)
    assert unchanged.out.count("= sparse_iter.") == 2
    for args in (
        ["--sparse-iter-fold-encodings"],
        ["--pass-pipeline=builtin.module(cse, sparse-iter-fold-encodings)"],
    ):
        result = opt(capsys, path, *args)
        assert (result.rc, result.err) == (0, "")
        assert "= sparse_iter." not in result.out
        assert "return %arg0 : tensor<?x?xf32>" in result.out


# -- input handling --------------------------------------------------------------


@pytest.mark.parametrize("args", [[], ["-"]])
def test_stdin_input(capsys, stdin, tmp_path, args: list[str]) -> None:
    expected = opt(capsys, write(tmp_path, FOLDABLE)).out
    stdin(FOLDABLE)
    result = opt(capsys, *args)
    assert (result.rc, result.err) == (0, "")
    assert result.out == expected


@pytest.mark.parametrize("args", [[], ["-"]])
def test_stdin_is_named_in_diagnostics(capsys, stdin, args: list[str]) -> None:
    stdin(INVALID)
    line = opt(capsys, *args).single_error()
    assert line == f"<stdin>:2:1: error: {SINGLETON}"
    stdin("func.func @f() {\n  return\n}\n%%% garbage\n")
    assert opt(capsys, *args).single_error().startswith("<stdin>:4:")


def test_missing_input_file(capsys, tmp_path) -> None:
    path = tmp_path / "does-not-exist.mlir"
    line = opt(capsys, path).single_error()
    assert str(path) in line
    assert "error" in line
    assert "No such file" in line


def test_undecodable_input_file(capsys, tmp_path) -> None:
    path = tmp_path / "binary.mlir"
    path.write_bytes(b"\xff\xfe\x00garbage")
    line = opt(capsys, path).single_error()
    assert str(path) in line


def test_empty_input_is_an_empty_module(capsys, tmp_path) -> None:
    result = opt(capsys, write(tmp_path, ""))
    assert (result.rc, result.err) == (0, "")
    assert result.out.split() == ["module", "{", "}"]


def test_directory_as_input_file(capsys, tmp_path) -> None:
    line = opt(capsys, tmp_path).single_error()
    assert str(tmp_path) in line


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("this is not mlir\n", 1),
        (SIMPLE + "\nfunc.func @g( {\n", 5),
        ("func.func @f() -> i32 {\n  %0 = arith.constant 1 : i64\n  return %0 : i32\n}\n", 3),
    ],
)
def test_garbage_input_is_a_located_error(capsys, tmp_path, text: str, line: int) -> None:
    path = write(tmp_path, text)
    result = opt(capsys, path).failed()
    assert result.out == ""
    assert re.match(rf"{re.escape(str(path))}:{line}:\d+: error: ", result.err_lines[0])


def test_verifier_error_is_located_in_the_file(capsys, tmp_path) -> None:
    path = write(tmp_path, INVALID)
    line = opt(capsys, path).single_error()
    assert line == f"{path}:2:1: error: {SINGLETON}"


# -- pipeline errors -------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["--pass-pipeline=builtin.module(no-such-pass)"],
        ["--pass-pipeline", "builtin.module(cse, no-such-pass)"],
        ["--no-such-pass"],
        ["--cse", "--no-such-pass=x=1"],
    ],
)
def test_unknown_pass(capsys, tmp_path, args: list[str]) -> None:
    line = opt(capsys, write(tmp_path, SIMPLE), *args).single_error()
    assert "unknown pass 'no-such-pass'" in line
    for name in registered_passes():
        assert name in line


def test_unknown_pass_suggests_a_close_name(capsys, tmp_path) -> None:
    line = opt(capsys, write(tmp_path, SIMPLE), "--sparse-iter-fold-encoding").single_error()
    assert "did you mean 'sparse-iter-fold-encodings'" in line


def test_unknown_pass_column_in_pipeline(capsys, tmp_path) -> None:
    pipeline = "builtin.module(cse, no-such-pass)"
    line = opt(capsys, write(tmp_path, SIMPLE), f"--pass-pipeline={pipeline}").single_error()
    assert line.startswith(f"<pass-pipeline>:1:{pipeline.index('no-such-pass') + 1}: error: ")


def test_a_named_pipeline_nested_under_a_function_is_placed_and_explained(
    capsys, tmp_path
) -> None:
    """Its first module pass failed at column 72 of the pipeline's own file, past the
    25 characters written."""
    pipeline = "func.func(sparsecomp-cpu)"
    result = opt(capsys, write(tmp_path, SIMPLE), f"--pass-pipeline={pipeline}").failed()
    line = result.err_lines[0]
    assert line.startswith(f"<pass-pipeline>:1:{pipeline.index('sparsecomp-cpu') + 1}: error: ")
    assert "write builtin.module(sparsecomp-cpu)" in result.err


@pytest.mark.parametrize(
    ("args", "value"),
    [
        (["--sparse-iter-fold-encodings=max-iterations=abc"], "abc"),
        (["--pass-pipeline=builtin.module(sparse-iter-fold-encodings{max-iterations=x1})"], "x1"),
        (["--sparse-iter-fold-encodings=test-convergence=perhaps"], "perhaps"),
        (["--pass-pipeline=builtin.module(canonicalize{max-iterations=abc})"], "abc"),
        (["--pass-pipeline=builtin.module(func.func(canonicalize{max-iterations=abc}))"], "abc"),
        (["--canonicalize=max-iterations=abc"], "abc"),
    ],
)
def test_bad_option_value_is_one_line(capfd, tmp_path, args: list[str], value: str) -> None:
    # capfd: LLVM's option parser writes to file descriptor 2; none of that may leak.
    result = opt(capfd, write(tmp_path, SIMPLE), *args)
    line = result.single_error()
    assert f"'{value}'" in line
    assert re.search(r"max-iterations|test-convergence", line)
    assert result.out == ""


def test_bad_option_name_for_our_pass(capsys, tmp_path) -> None:
    cls = registered_passes()["sparse-iter-fold-encodings"]
    path = write(tmp_path, SIMPLE)
    line = opt(capsys, path, "--sparse-iter-fold-encodings=iterations=2").single_error()
    assert "no option 'iterations'" in line
    for field in dataclasses.fields(cls):
        assert kebab(field.name) in line


def test_pass_pipeline_and_pass_flag_conflict(capsys, tmp_path) -> None:
    path = write(tmp_path, SIMPLE)
    line = opt(capsys, path, "--pass-pipeline=builtin.module(cse)", "--canonicalize").single_error()
    assert "--pass-pipeline" in line


def test_malformed_pipeline(capsys, tmp_path) -> None:
    pipeline = "builtin.module(cse"
    line = opt(capsys, write(tmp_path, SIMPLE), "--pass-pipeline", pipeline).single_error()
    assert line.startswith(f"<pass-pipeline>:1:{len(pipeline) + 1}: error: expected ')'")


@pytest.mark.parametrize("args", [["-x"], ["a.mlir", "b.mlir"], ["-o"]])
def test_bad_tool_arguments(capsys, args: list[str]) -> None:
    line = opt(capsys, *args).single_error()
    assert line.startswith("sparsecomp-opt: error: ")


def test_help_returns_zero(capsys) -> None:
    result = opt(capsys, "--help")
    assert result.rc == 0
    assert "--pass-pipeline" in result.out


# -- --split-input-file ----------------------------------------------------------


CHUNKS = [FOLDABLE, SIMPLE, "func.func @third() {\n  return\n}\n"]


def test_split_input_file_joins_outputs(capsys, tmp_path) -> None:
    separate = []
    for i, chunk in enumerate(CHUNKS):
        result = opt(capsys, write(tmp_path, chunk, f"chunk{i}.mlir"), "--cse")
        assert result.rc == 0
        separate.append(result.out)
    whole = write(tmp_path, f"\n{SEPARATOR}\n".join(CHUNKS))
    result = opt(capsys, whole, "--split-input-file", "--cse")
    assert (result.rc, result.err) == (0, "")
    assert result.out.split(f"\n{SEPARATOR}\n") == separate
    assert result.out.count(SEPARATOR) == len(CHUNKS) - 1


def test_without_split_input_file_chunks_form_one_module(capsys, tmp_path) -> None:
    result = opt(capsys, write(tmp_path, f"\n{SEPARATOR}\n".join(CHUNKS)))
    assert result.rc == 0
    assert SEPARATOR not in result.out
    assert result.out.count("module {") == 1
    for name in ("@fold", "@simple", "@third"):
        assert name in result.out


def test_split_input_file_keeps_line_numbers(capsys, tmp_path) -> None:
    text = f"{SIMPLE}{SEPARATOR}\n{INVALID}"
    path = write(tmp_path, text)
    bad_line = text.splitlines().index(INVALID.splitlines()[1]) + 1
    result = opt(capsys, path, "--split-input-file")
    line = result.single_error()
    assert line == f"{path}:{bad_line}:1: error: {SINGLETON}"
    assert "@simple" in result.out


def test_split_input_file_with_custom_marker(capsys, tmp_path) -> None:
    path = write(tmp_path, "\n// ==== cut\n".join(CHUNKS))
    result = opt(capsys, path, "--split-input-file=// ==== cut")
    assert result.rc == 0
    parts = result.out.split("\n// ==== cut\n")
    assert len(parts) == len(CHUNKS)
    assert ["@third" in p for p in parts] == [False, False, True]


def test_split_input_file_with_an_empty_marker_splits_at_the_default(capsys, tmp_path) -> None:
    """``--split-input-file=`` is mlir-opt's default marker (it split at every blank
    line, and the chunks lost their aliases)."""
    path = write(tmp_path, "\n\n// -----\n\n".join(CHUNKS))
    result = opt(capsys, path, "--split-input-file=")
    assert result.rc == 0
    assert len(result.out.split("\n// -----\n")) == len(CHUNKS)


# -- --verify-diagnostics --------------------------------------------------------


def test_verify_diagnostics_matching(capsys, tmp_path) -> None:
    text = (
        f"// expected-error@+1 {{{{{SINGLETON}}}}}\n"
        f"func.func private @bad(tensor<?x?xf32, {BAD_LEVELS}>)\n"
        f"{SEPARATOR}\n"
        "// expected-error@+1 {{custom op 'func.func' expected valid '@'-identifier}}\n"
        "func.func nope\n"
        f"{SEPARATOR}\n{SIMPLE}"
    )
    result = opt(capsys, write(tmp_path, text), "--split-input-file", "--verify-diagnostics")
    assert (result.rc, result.err) == (0, "")


def test_verify_diagnostics_missing_expected(capsys, tmp_path) -> None:
    text = f"// expected-error@+1 {{{{this never happens}}}}\n{SIMPLE}"
    path = write(tmp_path, text)
    line = opt(capsys, path, "--verify-diagnostics").single_error()
    assert line.startswith(f"{path}:1:")
    assert 'expected error "this never happens" was not produced' in line


def test_verify_diagnostics_unexpected(capsys, tmp_path) -> None:
    path = write(tmp_path, INVALID)
    line = opt(capsys, path, "--verify-diagnostics").single_error()
    assert line == f"{path}:2:1: error: unexpected error: {SINGLETON}"


def test_verify_diagnostics_of_a_pass(capsys, tmp_path) -> None:
    text = (
        f"#csr = {CSR}\n"
        "func.func @f(%x: tensor<4x4xf32>) -> tensor<?x?xf32, #csr> {\n"
        "  // expected-error@+1 {{must keep shape and element type}}\n"
        '  %0 = "sparse_iter.set_encoding"(%x) : (tensor<4x4xf32>) -> tensor<?x?xf32, #csr>\n'
        "  return %0 : tensor<?x?xf32, #csr>\n"
        "}\n"
    )
    path = write(tmp_path, text)
    result = opt(capsys, path, "--verify-diagnostics", "--sparse-iter-fold-encodings")
    assert (result.rc, result.err) == (0, "")
    assert opt(capsys, path, "--sparse-iter-fold-encodings").single_error().startswith(f"{path}:4:")


# -- listings --------------------------------------------------------------------


def test_list_upstream_passes_names_passes_the_pipeline_parser_takes(capsys, ctx) -> None:
    result = opt(capsys, "--list-upstream-passes")
    assert (result.rc, result.err) == (0, "")
    listed = dict(re.findall(r"^  ([\w.-]+): (.*)$", result.out, re.M))
    assert {"canonicalize", "cse", "sparsifier", "sparse-reinterpret-map"} <= set(listed)
    build_pass_manager("builtin.module(canonicalize,cse)", ctx)  # names as listed


def test_list_passes_matches_the_registry(capsys) -> None:
    result = opt(capsys, "--list-passes")
    assert (result.rc, result.err) == (0, "")
    listed = re.findall(r"^  ([\w.-]+): (.*)$", result.out, re.M)
    passes = registered_passes()
    pipelines = named_pipelines()
    assert [name for name, _ in listed] == [*passes, *pipelines]
    summaries = dict(listed)
    for name, cls in passes.items():
        assert summaries[name] == inspect.getdoc(cls).splitlines()[0]
        for field in dataclasses.fields(cls):
            assert f"--{kebab(field.name)}:" in result.out
    for name, path in pipelines.items():
        assert summaries[name]
        comment = " ".join(
            w for ln in path.read_text().splitlines() if ln.startswith("#") for w in ln[1:].split()
        )
        assert summaries[name] in comment
        assert summaries[name].endswith(".")  # whole sentences, never cut mid-way


def test_show_dialects(capsys) -> None:
    result = opt(capsys, "--show-dialects")
    assert (result.rc, result.err) == (0, "")
    head, _, names = result.out.strip().partition(":")
    assert head == "Available Dialects"
    dialects = {n.strip() for n in names.split(",")}
    assert {"sparse_iter", "func", "linalg", "builtin", "tensor"} <= dialects


# -- printing flags --------------------------------------------------------------


def test_print_debuginfo_uses_the_file_name(capsys, tmp_path) -> None:
    path = write(tmp_path, FOLDABLE)
    result = opt(capsys, path, "--mlir-print-debuginfo")
    assert result.rc == 0
    assert f'loc("{path}":2:1)' in result.out
    assert f'loc("{path}":3:' in result.out
    assert 'loc("-"' not in result.out
    assert "loc(" not in opt(capsys, path).out


def test_print_debuginfo_from_stdin(capsys, stdin) -> None:
    stdin(FOLDABLE)
    result = opt(capsys, "--mlir-print-debuginfo")
    assert result.rc == 0
    assert 'loc("<stdin>":2:1)' in result.out
    assert 'loc("-"' not in result.out


def test_print_ir_after_all(capfd, tmp_path) -> None:
    path = write(tmp_path, FOLDABLE)
    args = [str(path), "--mlir-print-ir-after-all", "--sparse-iter-fold-encodings", "--cse"]
    # LLVM aborts the process if IR printing is misconfigured: look in a child first.
    script = "import sys; from sparsecomp.tools.opt import main; sys.exit(main(sys.argv[1:]))"
    child = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120
    )
    if child.returncode != 0:
        pytest.fail(f"exit {child.returncode}: {child.stderr[-2000:]}")
    capfd.readouterr()
    rc = main(args)
    out, err = capfd.readouterr()
    assert rc == 0
    assert err.count("IR Dump After") == 2
    assert err.index("(sparse-iter-fold-encodings)") < err.index("(cse)")
    after_fold = err.split("(sparse-iter-fold-encodings)")[1].split("IR Dump After")[0]
    assert "func.func @fold" in after_fold
    assert "= sparse_iter." not in after_fold
    assert "IR Dump" not in out
    assert "= sparse_iter." not in out
    assert child.stdout == out
