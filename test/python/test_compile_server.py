"""Builds run in a compile server: its death is a CompileError, and the next build works."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import sparsecomp
from sparsecomp.compiler import server
from sparsecomp.errors import CompileError

SCALE = """
func.func @scale(%x: tensor<?xf64>) -> tensor<?xf64> {
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}
      ins(%x : tensor<?xf64>) outs(%x : tensor<?xf64>) {
  ^bb0(%a: f64, %o: f64):
    %s = arith.addf %a, %a : f64
    linalg.yield %s : f64
  } -> tensor<?xf64>
  return %r : tensor<?xf64>
}
"""
#: A worker that reads its job and aborts, as an assertion in MLIR would.
ABORTS = [sys.executable, "-c", "import os, sys; sys.stdin.readline(); "
          "print(\"Assertion `x' failed.\", file=sys.stderr, flush=True); os.abort()"]  # fmt: skip
#: Fails in a stage (the sparsifier refuses tensor.extract of a sparse tensor).
FAILS = """
#CSR = #sparse_tensor.encoding<{ map = (i, j) -> (i : dense, j : compressed) }>
func.func @pick(%a: tensor<?x?xf64, #CSR>, %i: index) -> f64
    attributes {sparse_iter.upstream = "asked"} {
  %v = tensor.extract %a[%i, %i] : tensor<?x?xf64, #CSR>
  return %v : f64
}
"""


def test_a_crashing_build_is_an_error_and_the_server_restarts(
    private_cache: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server, "COMMAND", ABORTS)
    server._shutdown()
    with pytest.raises(CompileError, match=r"<source>: the compiler crashed \(SIGABRT: Assert"):
        sparsecomp.compile(SCALE, cache_results=False)
    monkeypatch.undo()
    exe = sparsecomp.compile(SCALE, cache_results=False)
    x = np.arange(5.0)
    np.testing.assert_array_equal(exe(x), 2 * x)


def test_errors_keep_their_class_and_location(private_cache: None) -> None:
    with pytest.raises(CompileError, match=r"<source>:2:\d+: error"):
        sparsecomp.compile("\nfunc.func @f( {", cache_results=False)


def test_knobs_set_after_start_reach_the_server(
    private_cache: None, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sparsecomp.compile(SCALE, cache_results=False)  # the server is running
    monkeypatch.setenv("SPARSECOMP_REPRODUCER_DIR", str(tmp_path))
    with pytest.raises(CompileError, match="stage 'upstream' failed") as info:
        sparsecomp.compile(FAILS, cache_results=False)
    written = list(tmp_path.iterdir())
    assert len(written) == 1
    assert str(written[0]) in str(info.value)


def test_an_interrupted_exchange_does_not_answer_the_next_build(
    private_cache: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPARSECOMP_COMPILE_DAEMON=0: Ctrl-C while the worker built left its answer in the
    pipe, read as the next build's: every later compile in the process failed on another
    build's files (session 44)."""
    monkeypatch.setenv("SPARSECOMP_COMPILE_DAEMON", "0")
    sparsecomp.compile(SCALE + "\n// started\n")  # the worker runs
    real = server.daemon.read_answer

    def interrupted(*args: object, **kwargs: object) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(server.daemon, "read_answer", interrupted)
    with pytest.raises(KeyboardInterrupt):
        sparsecomp.compile(SCALE + "\n// interrupted\n")
    monkeypatch.setattr(server.daemon, "read_answer", real)
    x = np.arange(4.0)
    for n in range(2):
        exe = sparsecomp.compile(SCALE + f"\n// again {n}\n")
        np.testing.assert_array_equal(exe.scale(x), 2 * x)


def test_a_damaged_allocator_object_is_built_again(private_cache: None) -> None:
    """An empty objects/kernel_alloc-*.o in the cache was linked into every kernel built
    after it (kernels that then failed to load: undefined __wrap_malloc)."""
    from sparsecomp import knobs
    from sparsecomp.compiler import aot

    good = aot.allocator_object()
    good.write_bytes(b"")
    again = aot.allocator_object()
    assert again == good
    assert again.read_bytes()[:4] == b"\x7fELF"
    assert knobs.cache_dir() in again.parents


def test_a_nan_idle_time_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """SPARSECOMP_COMPILE_DAEMON_IDLE=nan passed max() and ended every daemon at its
    first wait."""
    from sparsecomp import knobs

    monkeypatch.setenv("SPARSECOMP_COMPILE_DAEMON_IDLE", "nan")
    assert knobs.compile_daemon_idle() == 600.0
