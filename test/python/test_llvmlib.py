"""The kernel's object built in process (:mod:`sparsecomp.compiler.llvmlib`).

Each check runs in a child process: loading LLVM's library and giving it
command-line options is for the whole process, which the test session's own
builds must not inherit.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import sparsecomp

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

#: Two functions: one with its own target-features (a module with several CPU
#: targets), one without; a loop the vectorizer widens for both.
TWO_TARGETS = """
define void @scale(ptr %x, i64 %n) #0 {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %loop ]
  %p = getelementptr float, ptr %x, i64 %i
  %v = load float, ptr %p
  %w = fmul float %v, 2.0
  store float %w, ptr %p
  %next = add i64 %i, 1
  %done = icmp eq i64 %next, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}

define void @plain(ptr %x, i64 %n) {
entry:
  call void @scale(ptr %x, i64 %n)
  ret void
}

attributes #0 = { "target-features"="+avx2,+fma" }
"""


def _child(script: str) -> str:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True,
                          text=True, check=False, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _same_as_opt(ll: Path, flags: list[str]) -> None:
    """The in-process pipeline's IR is ``opt -O3 -S``'s, line for line."""
    out = _child(f"""
        import subprocess
        from pathlib import Path
        from sparsecomp.compiler import llvmlib
        from sparsecomp.ir.odsgen import tool
        flags = {flags!r}
        named = dict(f[1:].split("=", 1) for f in flags[:3])
        assert llvmlib.enable()
        ir = []
        obj = llvmlib.compile_object(Path({str(ll)!r}).read_text(), named["mtriple"],
                                     named["mcpu"], named.get("mattr", ""), flags[3:], ir)
        assert obj[:4] == b"\\x7fELF", obj[:4]
        ref = subprocess.run([str(tool("opt")), "-O3", *flags, "-S", {str(ll)!r}, "-o", "-"],
                             capture_output=True, text=True, check=True).stdout
        skip = ("; ModuleID", "source_filename")
        body = lambda t: [l for l in t.splitlines() if not l.startswith(skip)]
        assert body(ir[0]) == body(ref), "\\n".join(
            __import__("difflib").unified_diff(body(ref), body(ir[0]), lineterm=""))
        print("same", len(body(ref)))
    """)
    assert out.startswith("same ")


def test_spmm_kernel_ir_is_opts(tmp_path: Path) -> None:
    """The SpMM example's kernel, with this machine's flags (on AVX-512 Intel cores
    including the tail-folding option)."""
    from sparsecomp.compiler.aot import optimizer_flags
    from sparsecomp.targets.cpu import detect_host

    exe = sparsecomp.compile(EXAMPLES / "spmm.mlir")
    flags = optimizer_flags(detect_host())
    if not any(f.startswith("-mattr=") for f in flags):
        flags.insert(2, "-mattr=")
    _same_as_opt(Path(exe.directory) / "kernel.ll", flags)


def test_functions_with_their_own_features_get_the_common_ones_appended(tmp_path) -> None:
    ll = tmp_path / "two.ll"
    ll.write_text(TWO_TARGETS)
    flags = ["-mtriple=x86_64-unknown-linux-gnu", "-mcpu=x86-64", "-mattr=+sse4.2"]
    _same_as_opt(ll, flags)


def test_a_kernel_built_in_process_runs(tmp_path: Path) -> None:
    """SpMV built with the library loaded (as in the daemon's children) matches scipy;
    a second target whose options the process does not have goes to the tools."""
    out = _child(f"""
        import os
        os.environ["SPARSECOMP_COMPILE_IN_PROCESS"] = "1"
        os.environ["SPARSECOMP_CACHE_DIR"] = {str(tmp_path / "cache")!r}
        import numpy as np, scipy.sparse as sp, sparsecomp
        from unittest import mock
        from sparsecomp.compiler import aot, llvmlib
        from sparsecomp.targets.cpu import CpuTarget
        assert llvmlib.enable()
        used = []
        real = llvmlib.compile_object
        def spy(*args, **kw):
            used.append(tuple(args[4] if len(args) > 4 else kw.get("cl_options", ())))
            return real(*args, **kw)
        a = sp.random(300, 200, density=0.03, format="csr", dtype=np.float32, random_state=1)
        x = np.random.default_rng(2).standard_normal(200).astype(np.float32)
        plain = CpuTarget("x86_64", ("sse4.2",), 128, 1)
        with mock.patch.object(llvmlib, "compile_object", spy):
            exe = sparsecomp.compile(open({str(EXAMPLES / "spmv.mlir")!r}).read(), plain)
            np.testing.assert_allclose(exe(a, x), a @ x, rtol=1e-5, atol=1e-5)
            assert used == [()], used
            # the tail-folding option is process-wide: this build takes the tools
            folded = CpuTarget("x86_64", ("avx2", "fma", "avx512f", "avx512vl"), 256, 1)
            assert not llvmlib.usable("x86_64-unknown-linux-gnu", [aot.TAIL_FOLDING])
            try:
                sparsecomp.compile(open({str(EXAMPLES / "spmv.mlir")!r}).read(), folded)
            except sparsecomp.SparsecompError as exc:
                assert "avx512" in str(exc), exc  # built, not run on this machine
            assert used == [()], used
        print("ran")
    """)
    assert out.strip() == "ran"


def test_the_daemon_loads_the_library_before_it_forks() -> None:
    out = _child("""
        from sparsecomp.compiler import llvmlib, zygote
        assert not llvmlib.enabled()
        zygote._warm()
        print(llvmlib.enabled())
    """)
    assert out.strip() == "True"

