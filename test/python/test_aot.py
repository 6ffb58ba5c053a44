"""The CPU back end end to end: stage-III kernels -> kernel.so -> ctypes calls.

The kernels are the lit inputs of test/lit/pipelines/sparsecomp-cpu-backend.mlir
(CSR SpMV, CSR SpMM, CSR SpMM accumulating into a dense input, a mix of other
stage-III dialects, a function returning its argument), lowered with
the ``sparsecomp-cpu-backend`` pipeline, built by ``build_shared_library`` and
called through ``_mlir_ciface_*`` with memref descriptors made here by hand.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import sparsecomp
from sparsecomp.compiler.aot import (
    TAIL_FOLDING,
    build_shared_library,
    codegen_flags,
    link_command,
    optimizer_flags,
    runtime_needs,
)
from sparsecomp.errors import SparsecompError, TargetError, ToolchainError
from sparsecomp.ir import odsgen
from sparsecomp.runtime.libs import RuntimeLibraryError, library_path
from sparsecomp.targets.cpu import CpuTarget, detect_host

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

KERNELS = Path(__file__).resolve().parents[1] / "lit" / "pipelines" / "sparsecomp-cpu-backend.mlir"
LIBC = ctypes.CDLL(ctypes.util.find_library("c"))
LIBC.free.argtypes = [ctypes.c_void_p]


def memref_type(rank: int) -> type[ctypes.Structure]:
    class MemRef(ctypes.Structure):
        _fields_ = [
            ("allocated", ctypes.c_void_p),
            ("aligned", ctypes.c_void_p),
            ("offset", ctypes.c_int64),
            ("sizes", ctypes.c_int64 * rank),
            ("strides", ctypes.c_int64 * rank),
        ]

    return MemRef


MEMREF = {1: memref_type(1), 2: memref_type(2)}


def descriptor(array: np.ndarray) -> ctypes.Structure:
    assert array.flags.c_contiguous
    d = MEMREF[array.ndim]()
    d.allocated = d.aligned = array.ctypes.data
    d.sizes[:] = array.shape
    d.strides[:] = [s // array.itemsize for s in array.strides]
    return d


def take_result(d: ctypes.Structure, rank: int) -> np.ndarray:
    """Copy a kernel-allocated f32 result out and free it, as the runtime does."""
    shape = tuple(d.sizes[:rank])
    size = int(np.prod(shape))
    if size:
        data = (ctypes.c_float * size).from_address(d.aligned + 4 * d.offset)
        out = np.frombuffer(data, dtype=np.float32, count=size).reshape(shape).copy()
    else:
        out = np.zeros(shape, np.float32)
    LIBC.free(d.allocated)
    return out


def stage_iii_module() -> str:
    chunks = KERNELS.read_text().split("// -----")
    return "\n".join(chunks)


@pytest.fixture(scope="module")
def kernel(tmp_path_factory) -> ctypes.CDLL:
    from mlir import ir

    from sparsecomp.ir.context import make_context
    from sparsecomp.transforms.pipeline import build_pass_manager

    ctx = make_context()
    with ctx:
        module = ir.Module.parse(stage_iii_module())
        build_pass_manager("sparsecomp-cpu-backend", ctx).run(module.operation)
        needs = runtime_needs(module)
        assert needs == ["omp", "c_runner_utils"]  # memrefCopy in @mixed
        path = build_shared_library(module, tmp_path_factory.mktemp("aot"), detect_host(), needs)
    assert (path.parent / "kernel.ll").is_file()
    library = ctypes.CDLL(str(path))
    for name in ("spmv", "spmm", "spmm_acc", "mixed", "identity"):
        getattr(library, f"_mlir_ciface_{name}").restype = None
    return library


def csr_args(a: sp.csr_matrix) -> list[np.ndarray]:
    return [a.indptr.astype(np.int32), a.indices.astype(np.int32), a.data.astype(np.float32)]


def call(kernel, name: str, a: sp.csr_matrix, dense: list[np.ndarray], rank: int) -> np.ndarray:
    arrays = [*csr_args(a), *dense]
    before = [x.copy() for x in arrays]
    descriptors = [descriptor(x) for x in arrays]
    result = MEMREF[rank]()
    pointers = [ctypes.byref(d) for d in descriptors]
    m, k = (ctypes.c_int64(s) for s in a.shape)
    getattr(kernel, f"_mlir_ciface_{name}")(
        ctypes.byref(result), *pointers[:3], m, k, *pointers[3:]
    )
    for x, y in zip(arrays, before, strict=True):  # inputs are read-only
        np.testing.assert_array_equal(x, y)
    return take_result(result, rank)


MATRICES = {
    "random": (200, 150, 0.05),
    "empty": (7, 5, 0.0),
    "no_rows": (0, 4, 0.0),
    "single_row": (1, 300, 0.2),
    "dense_rows": (33, 17, 1.0),
}


def random_csr(shape: tuple[int, int], density: float, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    return sp.random(*shape, density=density, format="csr", dtype=np.float32, random_state=rng)


@pytest.mark.parametrize("case", MATRICES)
def test_spmv(kernel, case: str) -> None:
    m, n, density = MATRICES[case]
    a = random_csr((m, n), density, seed=1)
    x = np.random.default_rng(2).standard_normal(n).astype(np.float32)
    y = call(kernel, "spmv", a, [x], rank=1)
    np.testing.assert_allclose(y, a @ x, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", MATRICES)
@pytest.mark.parametrize("cols", [1, 8, 13, 64])
def test_spmm(kernel, case: str, cols: int) -> None:
    m, n, density = MATRICES[case]
    a = random_csr((m, n), density, seed=3)
    rng = np.random.default_rng(4)
    b = rng.standard_normal((n, cols)).astype(np.float32)
    c = call(kernel, "spmm", a, [b], rank=2)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    c_in = rng.standard_normal((m, cols)).astype(np.float32)
    d = call(kernel, "spmm_acc", a, [b, c_in], rank=2)  # checks c_in is left alone
    np.testing.assert_allclose(d, c_in + a @ b, rtol=1e-5, atol=1e-5)


def test_mixed_dialects(kernel) -> None:
    class Results(ctypes.Structure):
        _fields_ = [("exp", MEMREF[1]), ("table", MEMREF[2]), ("sum", ctypes.c_float)]

    x = np.linspace(-1, 1, 20, dtype=np.float32)
    out = Results()
    m, n = ctypes.c_int64(20), ctypes.c_int64(6)
    kernel._mlir_ciface_mixed(ctypes.byref(out), ctypes.byref(descriptor(x)), m, n)
    np.testing.assert_allclose(take_result(out.exp, 1), np.exp(x), rtol=1e-6)
    expected = np.add.outer(np.arange(20), np.arange(6)).astype(np.float32)
    expected[1:3, 1:5] = expected[0:2, 0:4].copy()
    np.testing.assert_array_equal(take_result(out.table, 2), expected)
    assert out.sum == pytest.approx(np.exp(x[:16]).sum(), rel=1e-5)


def test_returned_argument_is_a_fresh_buffer(kernel) -> None:
    x = np.arange(5, dtype=np.float32)
    out = MEMREF[1]()
    kernel._mlir_ciface_identity(ctypes.byref(out), ctypes.byref(descriptor(x)))
    assert out.allocated != x.ctypes.data
    np.testing.assert_array_equal(take_result(out, 1), x)


def test_library_finds_libomp_next_to_itself_first(kernel) -> None:
    readelf = subprocess.run(
        [odsgen.tool("llvm-readelf"), "-d", kernel._name], capture_output=True, text=True
    ).stdout
    runpath = next(ln for ln in readelf.splitlines() if "RUNPATH" in ln or "RPATH" in ln)
    assert "[$ORIGIN:" in runpath
    assert "libomp.so" in readelf


def test_codegen_flags_follow_the_target() -> None:
    target = CpuTarget("x86_64", ("avx2", "fma", "avx512f"), 256, 0)
    assert codegen_flags(target) == [
        "-mtriple=x86_64-unknown-linux-gnu",
        "-mcpu=x86-64",
        "-mattr=+avx2,+fma,+avx512f,+prefer-256-bit",
    ]
    assert codegen_flags(CpuTarget("aarch64", ("neon",), 128, 0))[-1] == "-mattr=+neon"


def test_masked_tails_on_avx512_targets_only() -> None:
    """opt folds loop remainders into masked iterations where AVX-512 has mask registers."""
    avx512 = CpuTarget("x86_64", ("avx2", "fma", "avx512f", "avx512vl"), 256, 0)
    assert optimizer_flags(avx512) == [*codegen_flags(avx512), TAIL_FOLDING]
    avx2 = CpuTarget("x86_64", ("avx2", "fma"), 256, 0)
    assert optimizer_flags(avx2) == codegen_flags(avx2)
    arm = CpuTarget("aarch64", ("neon",), 128, 0)
    assert TAIL_FOLDING not in optimizer_flags(arm)
    # AMD's cores run a short row's masked gather at a whole gather's cost
    amd = CpuTarget("x86_64", ("avx2", "fma", "avx512f", "avx512vl"), 256, 0, "amd")
    assert optimizer_flags(amd) == codegen_flags(amd)
    intel = CpuTarget("x86_64", ("avx2", "fma", "avx512f", "avx512vl"), 256, 0, "intel")
    assert optimizer_flags(intel) == [*codegen_flags(intel), TAIL_FOLDING]


def test_the_pinned_opt_takes_the_tail_folding_flag(tmp_path) -> None:
    """SpMV built for an AVX-512 target: the pinned opt accepts the flag (a build error
    otherwise); where this machine has AVX-512 the kernel also runs and matches scipy."""
    target = CpuTarget("x86_64", ("avx2", "fma", "avx512f", "avx512vl"), 256, 2)
    program = (Path(__file__).resolve().parents[2] / "examples" / "spmv.mlir").read_text()
    a = sp.random(300, 200, density=0.02, format="csr", dtype=np.float32, random_state=3)
    x = np.random.default_rng(4).standard_normal(200).astype(np.float32)
    if target.missing_on(detect_host()):
        with pytest.raises(sparsecomp.SparsecompError, match="avx512"):  # built, not run here
            sparsecomp.compile(program, target)
        return
    np.testing.assert_allclose(sparsecomp.compile(program, target)(a, x), a @ x, rtol=1e-5,
                               atol=1e-5)  # fmt: skip


def test_link_command_uses_origin_rpath(tmp_path) -> None:
    command = link_command(tmp_path / "k.o", tmp_path / "k.so", [library_path("omp")])
    assert "-lomp" in command
    assert command.index("-Wl,-rpath,$ORIGIN") < command.index(
        f"-Wl,-rpath,{library_path('omp').parent}"
    )


#: Kernels named as functions every process has (libc's abs and qsort).
LIBC_NAMED = """
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed)}>
#rows = {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
         iterator_types = ["parallel", "reduction"]}
func.func @abs(%A: tensor<?x?xf32, #csr>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %A, %c0 : tensor<?x?xf32, #csr>
  %e = tensor.empty(%m) : tensor<?xf32>
  %y0 = linalg.fill ins(%zero : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %y = linalg.generic #rows ins(%A : tensor<?x?xf32, #csr>) outs(%y0 : tensor<?xf32>) {
    ^bb0(%a: f32, %acc: f32):
      %s = arith.addf %acc, %a : f32
      linalg.yield %s : f32
  } -> tensor<?xf32>
  return %y : tensor<?xf32>
}
func.func @qsort(%A: tensor<?x?xf32, #csr>, %x: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = tensor.dim %A, %c0 : tensor<?x?xf32, #csr>
  %e = tensor.empty(%m) : tensor<?xf32>
  %y0 = linalg.fill ins(%zero : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  %y = linalg.matvec ins(%A, %x : tensor<?x?xf32, #csr>, tensor<?xf32>)
                     outs(%y0 : tensor<?xf32>) -> tensor<?xf32>
  return %y : tensor<?xf32>
}
"""


def test_kernels_named_like_libc_functions_run_their_own_code(tmp_path) -> None:
    """A kernel named ``@floor`` once called libm's ``floor`` from its C interface
    wrapper (the call went through the PLT to the process's first definition): a
    garbage result descriptor and a crash freeing it. Linked ``-Bsymbolic`` now;
    names of functions compiled code itself calls are refused (next test)."""
    program = tmp_path / "libc_named.mlir"
    program.write_text(LIBC_NAMED)
    exe = sparsecomp.compile(program)
    a = sp.random(70, 50, density=0.1, format="csr", dtype=np.float32, random_state=2)
    x = np.random.default_rng(2).standard_normal(50, dtype=np.float32)
    for _ in range(2):  # the first call takes the Python path, the next the C path
        np.testing.assert_allclose(exe.abs(a), np.asarray(a.sum(axis=1)).ravel(), rtol=1e-5)
        np.testing.assert_allclose(exe.qsort(a, x), a @ x, rtol=1e-5, atol=1e-6)
    assert "-Wl,-Bsymbolic" in link_command(tmp_path / "k.o", tmp_path / "k.so", [])


def test_kernels_named_like_functions_compiled_code_calls_are_refused(tmp_path) -> None:
    """``@exp`` with ``math.exp`` on f64 in its body called itself until the stack
    ran out (segfault); ``@floor`` called libm's floor. Both are errors now."""
    program = tmp_path / "floor.mlir"
    program.write_text(LIBC_NAMED.replace("@abs", "@floor"))
    with pytest.raises(SparsecompError, match=r"function @floor has the name of the C library"):
        sparsecomp.compile(program)


def test_unknown_runtime_library_is_an_error(tmp_path) -> None:
    with pytest.raises(RuntimeLibraryError, match="unknown runtime library 'gomp'"):
        build_shared_library("module {}", tmp_path, detect_host(), ["gomp"])


def test_tool_failure_names_the_command(tmp_path) -> None:
    with pytest.raises(ToolchainError, match=r"mlir-translate failed .* --mlir-to-llvmir") as info:
        build_shared_library("func.func @f() { return }", tmp_path, detect_host(), [])
    assert "cannot be converted to LLVM IR" in info.value.message


def test_untranslatable_module_is_refused_before_translation(tmp_path) -> None:
    from mlir import ir

    from sparsecomp.ir.context import make_context

    with make_context():
        module = ir.Module.parse("func.func @f() { return }")
        with pytest.raises(ToolchainError, match=r"'func\.func' cannot be translated"):
            build_shared_library(module, tmp_path, detect_host(), [])


_ALLOC_HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
void *__wrap_malloc(size_t);
void __wrap_free(void *);
#define MIB ((size_t)1 << 20)
int main(void) {
  /* a large block freed is handed to the next allocation it fits */
  char *a = __wrap_malloc(4 * MIB);
  a[4 * MIB - 1] = 1;
  __wrap_free(a);
  char *b = __wrap_malloc(3 * MIB);
  printf("reused %d\n", a == b);
  /* not to one it would fit more than twice over, nor to one larger than it */
  char *c = __wrap_malloc(1 * MIB);
  char *d = __wrap_malloc(5 * MIB);
  printf("small %d large %d\n", c == b, d == b);
  /* small blocks go to malloc and free */
  char *s = __wrap_malloc(100);
  __wrap_free(s);
  __wrap_free(NULL);
  /* at most 8 blocks are kept: the ninth freed goes to free */
  char *many[10];
  for (int i = 0; i < 10; ++i) many[i] = __wrap_malloc(2 * MIB);
  for (int i = 0; i < 10; ++i) __wrap_free(many[i]);
  int kept = 0;
  char *again[10];
  for (int i = 0; i < 10; ++i) {
    again[i] = __wrap_malloc(2 * MIB);
    for (int j = 0; j < 10; ++j) kept += again[i] == many[j];
  }
  printf("kept %d\n", kept);
  /* a block of plain malloc is taken like any other */
  char *plain = malloc(2 * MIB);
  __wrap_free(plain);
  for (int i = 0; i < 10; ++i) __wrap_free(again[i]);
  __wrap_free(b);
  __wrap_free(c);
  __wrap_free(d);
  return 0;
}
"""


def test_kernel_allocator_keeps_large_blocks_for_the_next_call(tmp_path: Path) -> None:
    """kernel_alloc.c, linked as kernels link it (``--wrap``): a large block a kernel
    frees serves the next allocation it fits, within twice its size, at most 8 kept;
    small blocks and blocks of plain malloc pass through."""
    from sparsecomp.compiler.aot import WRAP, allocator_object

    harness = tmp_path / "harness.c"
    harness.write_text(_ALLOC_HARNESS)
    exe = tmp_path / "harness"
    build = ["cc", "-O1", "-pthread", str(harness), str(allocator_object()), WRAP, "-o", str(exe)]
    subprocess.run(build, check=True, capture_output=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    assert out.splitlines() == ["reused 1", "small 0 large 0", "kept 8"]


def test_a_result_larger_than_memory_stops_with_a_message(tmp_path: Path) -> None:
    """An SpMM of empty operands whose dense result is 4 TB: malloc refuses it, and the
    process stops with a message that says so (SIGABRT), where the kernel wrote through
    the NULL it got (a silent SIGSEGV)."""
    code = f"""
import numpy as np, scipy.sparse as sp, sparsecomp
spmm = sparsecomp.compile({str(EXAMPLES / "spmm.mlir")!r})
spmm(sp.csr_matrix((100_000, 0), dtype=np.float32), np.empty((0, 10_000_000), np.float32))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600, check=False)  # fmt: skip
    assert done.returncode == -signal.SIGABRT, done.stderr
    assert "sparsecomp: out of memory: a kernel could not allocate 4000000000064 bytes" in (
        done.stderr
    )


def test_kernels_allocate_through_the_wrapped_malloc() -> None:
    """A kernel that allocates calls the library's own malloc (no PLT call to libc's),
    and a product with large temporaries called again is still exact."""
    src = """
#csr = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed)}>
func.func @sq(%A: tensor<?x?xf64, #csr>, %m: index) -> tensor<?x?xf64, #csr> {
  %e = tensor.empty(%m, %m) : tensor<?x?xf64, #csr>
  %r = linalg.matmul ins(%A, %A : tensor<?x?xf64, #csr>, tensor<?x?xf64, #csr>)
                     outs(%e : tensor<?x?xf64, #csr>) -> tensor<?x?xf64, #csr>
  return %r : tensor<?x?xf64, #csr>
}
"""
    exe = sparsecomp.compile(src)
    a = sp.random(3000, 3000, density=0.01, format="csr", random_state=3)
    want = (a @ a).toarray()
    for _ in range(3):  # the second and third calls reuse the first's temporaries
        np.testing.assert_allclose(exe(a, 3000).to_dense(), want, rtol=1e-12, atol=1e-12)
    symbols = subprocess.run(["nm", str(exe.directory / "kernel.so")], capture_output=True,
                             text=True, check=True).stdout  # fmt: skip
    assert " t __wrap_malloc" in symbols
    assert "U malloc" in symbols  # the wrapper's own, for small blocks
    called = subprocess.run(["objdump", "-d", str(exe.directory / "kernel.so")],
                            capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert "<__wrap_malloc>" in called
    callers = {  # functions (objdump's "<name>:" headers) that call libc's malloc
        block.split(">:", 1)[0]
        for block in called.split("\n\n")
        if "<malloc@plt>" in block.split(">:", 1)[-1] and ">:" in block
    }
    assert callers
    own = ("__wrap_malloc", "out_of_memory")  # the allocator's (its retry when refused)
    assert all(any(f in c for f in own) for c in callers), callers


def test_another_architecture_is_a_target_error(tmp_path: Path) -> None:
    """A target of another architecture than this machine's is refused at the link
    with a TargetError that says why (it was cc's "file in wrong format")."""
    import platform

    other = "aarch64" if platform.machine().lower() in ("x86_64", "amd64") else "x86_64"
    target = f"#sparse_iter.cpu<{other}, features = [], vector_bits = 128, threads = 1>"
    with pytest.raises(TargetError, match=f"the kernels are for {other}, and this machine"):
        sparsecomp.compile(EXAMPLES / "spmv.mlir", target, cache_results=False)
