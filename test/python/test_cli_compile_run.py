"""``sparsecomp-compile`` and ``sparsecomp-run`` from the command line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import sparsecomp
from sparsecomp.errors import TargetError
from sparsecomp.tools import compile as compile_tool
from sparsecomp.tools import run as run_tool

REPO = Path(__file__).parents[2]
PRINTS = """
func.func @main() {
  %c = arith.constant dense<[1.0, 2.5, 3.0]> : vector<3xf32>
  vector.print %c : vector<3xf32>
  return
}
"""


def test_compile_writes_a_loadable_directory(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("SPARSECOMP_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "spmv"
    assert compile_tool.main([str(REPO / "examples/spmv.mlir"), "-o", str(out)]) == 0
    assert "spmv" in capsys.readouterr().out
    assert {"kernel.so", "manifest.json", "buffers.mlir"} <= {p.name for p in out.iterdir()}
    exe = sparsecomp.load(out)
    A = sp.random(30, 20, density=0.2, format="csr", dtype=np.float32, random_state=0)
    x = np.arange(20, dtype=np.float32)
    np.testing.assert_allclose(exe(A, x), A @ x, rtol=1e-5)


def test_compile_onto_a_file_is_an_error(tmp_path: Path, monkeypatch, capsys) -> None:
    """-o naming an existing file: a one-line error (it was a FileExistsError traceback)."""
    monkeypatch.setenv("SPARSECOMP_CACHE_DIR", str(tmp_path / "cache"))
    taken = tmp_path / "taken"
    taken.write_text("not a directory")
    assert compile_tool.main([str(REPO / "examples/spmv.mlir"), "-o", str(taken)]) == 1
    err = capsys.readouterr().err
    assert f"cannot save the executable to {taken}: it is a file" in err
    assert "Traceback" not in err


def test_compile_reports_located_errors(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("SPARSECOMP_CACHE_DIR", str(tmp_path))
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @f() {\n  %x = arith.constant 1 : i32\n  return %x : i32\n}\n")
    assert compile_tool.main([str(bad), "-o", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:3:3: error:" in err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--vector-bits", "100"], "--vector-bits must be -1 (the target's), 0, 128, 256 or 512"),
        (["--unroll", "0"], "--unroll must be between 1 and 16, got 0"),
        (["--panel-bytes", "-1"], "--panel-bytes must be >= 0"),
    ],
)
def test_an_option_out_of_range_names_the_flag(flags: list[str], message: str, capsys) -> None:
    """It was placed at <pass-pipeline>:1:16 in a pass the user never named."""
    assert compile_tool.main([str(REPO / "examples/spmv.mlir"), "-o", "unused", *flags]) == 1
    err = capsys.readouterr().err
    assert message in err
    assert "pass-pipeline" not in err


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"unroll": True}, "compile option unroll= takes int, got True"),
        ({"unroll": "2"}, "compile option unroll= takes int, got '2'"),
        ({"vector_bits": 100}, "vector_bits= must be -1"),
        ({"gpu_balance": "cols"}, "gpu_balance= must be 'rows' or 'nonzeros'"),
        ({"gpu_tf32": 1}, "gpu_tf32= takes bool, got 1"),
    ],
)
def test_compile_options_are_checked_where_given(options: dict, message: str) -> None:
    with pytest.raises(sparsecomp.SparsecompError, match=re.escape(message)):
        sparsecomp.compile(str(REPO / "examples/spmv.mlir"), **options)


def test_a_target_of_another_type_is_a_target_error() -> None:
    """``target=None`` was an AttributeError from inside the driver."""
    with pytest.raises(TargetError, match="a target is text or a CpuTarget, not None"):
        sparsecomp.compile(str(REPO / "examples/spmv.mlir"), target=None)


def test_run_executes_a_printing_function(tmp_path: Path) -> None:
    program = tmp_path / "print.mlir"
    program.write_text(PRINTS)
    env = {"SPARSECOMP_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "sparsecomp.tools.run", str(program), "-e", "main"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "( 1, 2.5, 3 )"


def test_run_unknown_entry(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("SPARSECOMP_CACHE_DIR", str(tmp_path))
    program = tmp_path / "print.mlir"
    program.write_text(PRINTS)
    assert run_tool.main([str(program), "-e", "nope"]) == 1
    assert "no public function 'nope' (public functions: main)" in capsys.readouterr().err


def test_stage_failure_names_the_op_and_a_reproducer(tmp_path: Path, monkeypatch, capsys) -> None:
    from sparsecomp.tools import opt

    monkeypatch.setenv("SPARSECOMP_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("SPARSECOMP_REPRODUCER_DIR", str(tmp_path / "repro"))
    program = tmp_path / "add.mlir"
    # Sent upstream on request, but sparse_iter.values has no upstream counterpart.
    program.write_text(
        "#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), "
        "posWidth = 32, crdWidth = 32}>\n"
        "func.func @add(%A: tensor<?x?xf32, #csr>) -> tensor<?xf32>\n"
        '    attributes {sparse_iter.upstream = "requested"} {\n'
        '  %v = "sparse_iter.values"(%A) : (tensor<?x?xf32, #csr>) -> tensor<?xf32>\n'
        "  return %v : tensor<?xf32>\n}\n"
    )
    assert compile_tool.main([str(program), "-o", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert f"{program}:4:8: error: 'add' needs the upstream sparsifier (it requested)" in err
    (repro,) = (tmp_path / "repro").iterdir()
    assert f"--pass-pipeline='builtin.module(sparsecomp-cpu-layouts)' {repro}" in err
    pipeline = "--pass-pipeline=builtin.module(sparsecomp-cpu-layouts)"
    assert opt.main([str(repro), pipeline]) == 1
    assert "'sparse_iter.values' has no upstream counterpart" in capsys.readouterr().err


def test_verbose_on_a_cache_hit_says_cached(tmp_path: Path, monkeypatch, capsys) -> None:
    """``-v`` printed no stage times on a cache hit, and did not say it was one."""
    monkeypatch.setenv("SPARSECOMP_CACHE_DIR", str(tmp_path / "cache"))
    args = [str(REPO / "examples/spmv.mlir"), "-o", str(tmp_path / "k"), "-v"]
    assert compile_tool.main(args) == 0
    first = capsys.readouterr().err
    assert "sparsecomp: layouts" in first
    assert "sparsecomp: total" in first
    assert compile_tool.main(args) == 0
    again = capsys.readouterr().err
    assert "sparsecomp: cached" in again
    assert " (built in " in again
    assert "sparsecomp: layouts" not in again


def test_a_closed_pipe_ends_the_tools_quietly(tmp_path: Path) -> None:
    """``sparsecomp-opt --list-passes | head -2`` ended in a BrokenPipeError traceback;
    now it exits as a C tool killed by SIGPIPE does (141), saying nothing."""
    opt = Path(sys.executable).parent / "sparsecomp-opt"

    def piped(reader: str) -> subprocess.CompletedProcess[str]:
        script = f"'{opt}' --list-passes | {reader}; echo \"status ${{PIPESTATUS[0]}}\" >&2"
        return subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False)

    done = piped("head -2")  # whether the output fit in the pipe before head left is chance
    assert len(done.stdout.splitlines()) == 2
    assert done.stderr.strip() in ("status 0", "status 141"), done.stderr
    done = piped("true")  # a reader gone before the first write: always a closed pipe
    assert done.stderr.strip() == "status 141", done.stderr


def test_ctrl_c_while_a_tool_imports_ends_it_with_130(tmp_path: Path) -> None:
    """A KeyboardInterrupt raised inside MLIR's module initialization segfaulted
    sparsecomp-opt; the entry points take Ctrl-C over until the tool has imported.
    Here a tool module interrupts itself while it imports."""
    (tmp_path / "slow_tool.py").write_text(
        "import os, signal, time\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
        "time.sleep(30)\n"
        "def main():\n    return 0\n"
    )
    code = "import sys\nfrom sparsecomp.tools import launch\nsys.exit(launch._launch('slow_tool'))"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 130
    assert done.stderr == "interrupted\n"


def test_the_entry_points_launch_their_tools(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import sys\nfrom sparsecomp.tools import launch\n"
         "sys.argv = ['sparsecomp-run', sys.argv[1]]\nsys.exit(launch.run())",
         str(tmp_path / "p.mlir")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1
    assert "cannot read" in done.stderr
