"""Contexts load sparse_iter exactly once; a second load must not abort the process."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from sparsecomp.ir.context import is_loaded, load_sparse_iter, make_context


def test_make_context_loads_dialect():
    ctx = make_context()
    assert is_loaded(ctx)
    assert ctx.is_registered_operation("sparse_iter.unset_encoding")
    assert ctx.is_registered_operation("linalg.matmul")


def test_second_load_is_a_no_op_in_a_subprocess():
    # Registering twice must be a no-op; run it where an abort cannot take pytest down.
    code = textwrap.dedent(
        """
        from sparsecomp.ir.context import make_context, load_sparse_iter
        ctx = make_context()
        load_sparse_iter(ctx)
        load_sparse_iter(ctx)
        print("alive")
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "alive"


def test_fresh_contexts_are_independent():
    from mlir import ir

    first, second = make_context(), make_context()
    load_sparse_iter(first)
    assert is_loaded(second)
    assert first is not second
    assert not is_loaded(ir.Context())


def test_opview_is_the_generated_class(ctx):
    from mlir import ir

    from sparsecomp.dialects import sparse_iter

    src = """
    #l = #sparse_iter.layout<{map = (i) -> (i : compressed), posWidth = 32, crdWidth = 32}>
    func.func @f(%x: tensor<?xf32>) -> tensor<?xf32, #l> {
      %0 = "sparse_iter.set_encoding"(%x) : (tensor<?xf32>) -> tensor<?xf32, #l>
      return %0 : tensor<?xf32, #l>
    }
    """
    with ctx:
        module = ir.Module.parse(src)
        func = module.body.operations[0]
        op = func.regions[0].blocks[0].operations[0]
        assert isinstance(op, sparse_iter.SetEncodingOp)
        assert op.source.type == func.regions[0].blocks[0].arguments[0].type


_FIRST_IMPORTS = """
import threading
from sparsecomp.ir import context
barrier, errors = threading.Barrier(8), []
def first() -> None:
    barrier.wait()
    try:
        context.ops()
    except Exception as exc:
        errors.append(exc)
threads = [threading.Thread(target=first) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert not errors, errors
"""


def test_threads_importing_the_op_classes_at_once() -> None:
    """Threads making their first calls together both imported the generated op classes;
    the second raised "Dialect namespace 'sparse_iter' is already registered"."""
    for _ in range(3):
        done = subprocess.run(
            [sys.executable, "-c", _FIRST_IMPORTS], capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-2000:]
