"""One module for a CPU and a GPU (compiler/parts.py): each public function built for
its own device, layouts resolved per device, one executable; the GPU part run
under emulation (``target="cuda-emu"``) and built for the GPU (``target="host"``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import sparsecomp
from sparsecomp.compiler import cache
from sparsecomp.compiler.cuda import ptxas
from sparsecomp.errors import CompileError
from sparsecomp.runtime import cuda
from sparsecomp.runtime.cuda import CudaUnavailableError
from sparsecomp.runtime.plan import Transfer

WIDE = "#sparse_iter.cpu<x86_64, features = [avx2, fma], vector_bits = 256, threads = 2>"
SM90 = "#sparse_iter.cuda<sm_90, mma_shapes = [m16n8k8, m16n8k16], sparse_mma_shapes = [m16n8k32]>"
T = "tensor<?x?xf32, #sp>, tensor<?x?xf32>, tensor<?x?xf32>"

#: docs/multi-device.md's example with its second target a GPU
EXAMPLE = f"""
#sp = #sparse_iter.sparsity<unstructured, density = 0.1>
module attributes {{sparse_iter.targets = {{wide = {WIDE}, narrow = {SM90}}}}} {{
  func.func private @helper(%a: tensor<?x?xf32, #sp>, %b: tensor<?x?xf32>,
                            %c: tensor<?x?xf32>) -> tensor<?x?xf32> {{
    %0 = linalg.matmul ins(%a, %b : tensor<?x?xf32, #sp>, tensor<?x?xf32>)
                       outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
    return %0 : tensor<?x?xf32>
  }}
  func.func @on_wide(%a: tensor<?x?xf32, #sp>, %b: tensor<?x?xf32>, %c: tensor<?x?xf32>)
      -> tensor<?x?xf32> attributes {{sparse_iter.target = "wide"}} {{
    %0 = call @helper(%a, %b, %c) : ({T}) -> tensor<?x?xf32>
    return %0 : tensor<?x?xf32>
  }}
  func.func @on_narrow(%a: tensor<?x?xf32, #sp>, %b: tensor<?x?xf32>, %c: tensor<?x?xf32>)
      -> tensor<?x?xf32> attributes {{sparse_iter.target = "narrow"}} {{
    %0 = call @helper(%a, %b, %c) : ({T}) -> tensor<?x?xf32>
    return %0 : tensor<?x?xf32>
  }}
}}
"""

#: ``C + A^T B`` on each device: the CPU reads A^T as CSC, the GPU as CSR
TRANSPOSED = f"""
#sp = #sparse_iter.sparsity<unstructured>
#tr = [affine_map<(m, n, k) -> (k, m)>, affine_map<(m, n, k) -> (k, n)>,
       affine_map<(m, n, k) -> (m, n)>]
module attributes {{sparse_iter.targets = {{cpu = {WIDE}, gpu = {SM90}}}}} {{
  func.func @{{name}}(%a: tensor<?x?xf32, #sp>, %b: tensor<?x?xf32>, %c: tensor<?x?xf32>)
      -> tensor<?x?xf32> attributes {{sparse_iter.target = "{{target}}"}} {{
    %0 = linalg.matmul indexing_maps = #tr ins(%a, %b : tensor<?x?xf32, #sp>, tensor<?x?xf32>)
                       outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
    return %0 : tensor<?x?xf32>
  }}
}}
"""


def _transposed(*functions: tuple[str, str]) -> str:
    head, _, rest = TRANSPOSED.partition("  func.func")
    body, _, tail = ("  func.func" + rest).rpartition("}")
    funcs = "".join(body.replace("{name}", n).replace("{target}", t) for n, t in functions)
    return head + funcs + "}" + tail


def _operands(rows: int, inner: int, cols: int, density: float, seed: int) -> tuple:
    rng = np.random.default_rng(seed)
    a = sp.random(rows, inner, density=density, format="csr", random_state=seed, dtype=np.float32)
    b = rng.standard_normal((inner, cols)).astype(np.float32)
    c = rng.standard_normal((rows, cols)).astype(np.float32)
    return a, b, c


@pytest.fixture(scope="module")
def example() -> sparsecomp.Executable:
    return sparsecomp.compile(EXAMPLE, "cuda-emu")


def test_the_documented_example_equals_scipy(example: sparsecomp.Executable) -> None:
    a, b, c = _operands(70, 50, 9, 0.1, 0)
    expected = c + a @ b
    for name in ("on_wide", "on_narrow"):
        np.testing.assert_allclose(example.functions[name](a, b, c), expected, rtol=1e-5, atol=1e-5)
    # the GPU part is its own build, emulating sm_90; the CPU's holds only its function
    assert sorted(example.functions) == ["on_narrow", "on_wide"]
    assert list(example.parts) == ["narrow"]
    part = example.parts["narrow"]
    assert part.manifest["emulates"] == "cuda:sm_90"
    assert sorted(part.manifest["functions"]) == ["on_narrow"]
    assert sorted(example.manifest["functions"]) == ["on_wide"]
    assert "gpu.launch" in (part.directory / "gpu.mlir").read_text()
    assert "gpu.launch" not in (example.directory / "llvm.mlir").read_text()


def test_plan_lists_the_functions_on_the_gpu(example: sparsecomp.Executable) -> None:
    plan = example.plan()
    assert plan.transfers == (Transfer("on_narrow", "cuda:sm_90", True),)
    assert "'on_narrow' runs on cuda:sm_90, emulated on this CPU" in str(plan)


def test_saved_and_loaded_whole(example: sparsecomp.Executable, tmp_path: Path) -> None:
    saved = example.save(tmp_path / "both")
    assert (saved / "part-1" / "manifest.json").is_file()
    loaded = sparsecomp.load(saved)
    assert cache.intact(saved)
    a, b, c = _operands(30, 20, 4, 0.2, 1)
    np.testing.assert_allclose(loaded.on_narrow(a, b, c), c + a @ b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(loaded.on_wide(a, b, c), c + a @ b, rtol=1e-5, atol=1e-5)
    (saved / "part-1" / "kernel.so").write_bytes(b"cut")  # a damaged part: not intact
    assert not cache.intact(saved)


def test_layouts_are_resolved_per_device() -> None:
    exe = sparsecomp.compile(_transposed(("on_cpu", "cpu"), ("on_gpu", "gpu")), "cuda-emu")
    on_cpu, on_gpu = exe.functions["on_cpu"], exe.functions["on_gpu"]
    assert str(on_cpu.signature.args[0].layout) == "csc"
    assert str(on_gpu.signature.args[0].layout) == "csr"
    a, b, c = _operands(40, 60, 5, 0.15, 2)  # A^T B: A is 40x60, B 40x5, C 60x5
    b, c = c, b[:, :5].copy()
    expected = c + a.T @ b
    for f in (on_cpu, on_gpu):
        np.testing.assert_allclose(f(a, b, c), expected, rtol=1e-5, atol=1e-5)


def test_a_module_of_one_gpu_target() -> None:
    """A module whose targets are one GPU: its part is the executable's top."""
    exe = sparsecomp.compile(_transposed(("only", "gpu")), "cuda-emu")
    assert exe.manifest["emulates"] == "cuda:sm_90"
    assert not exe.parts
    a, b, c = _operands(10, 12, 3, 0.3, 4)  # A^T B: B 10x3, C 12x3
    b, c = c, b.copy()
    np.testing.assert_allclose(exe(a, b, c), c + a.T @ b, rtol=1e-5, atol=1e-5)


def test_prepare_and_index_width_variants_of_the_gpu_function(
    example: sparsecomp.Executable,
) -> None:
    a, b, c = _operands(64, 48, 6, 0.2, 5)
    prepared = example.prepare(a, function="on_narrow", k=6)
    np.testing.assert_allclose(example.on_narrow(prepared, b, c), c + a @ b, rtol=1e-5, atol=1e-5)
    wide = a.copy()
    wide.indices, wide.indptr = wide.indices.astype(np.int64), wide.indptr.astype(np.int64)
    np.testing.assert_allclose(example.on_narrow(wide, b, c), c + a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(ptxas() is None, reason="ptxas is not installed")
def test_built_for_the_gpu() -> None:
    """``target="host"``: the CPU part for this CPU, the GPU part as cuda:sm_90 builds it."""
    exe = sparsecomp.compile(EXAMPLE)
    part = exe.parts["narrow"]
    assert part.manifest["device"] == "cuda:sm_90"
    ptx = [p.read_text() for p in part.directory.glob("*.ptx")]
    assert ptx
    assert all(".target sm_90" in text for text in ptx)
    assert exe.plan().transfers == (Transfer("on_narrow", "cuda:sm_90", False),)
    a, b, c = _operands(20, 10, 3, 0.3, 6)
    np.testing.assert_allclose(exe.on_wide(a, b, c), c + a @ b, rtol=1e-5, atol=1e-5)
    try:
        cuda._real_driver()
    except CudaUnavailableError:
        with pytest.raises(CudaUnavailableError):
            exe.on_narrow(a, b, c)
        return
    if cuda.driver().sm == 90:
        np.testing.assert_allclose(exe.on_narrow(a, b, c), c + a @ b, rtol=1e-5, atol=1e-5)


def test_cli_builds_the_parts(tmp_path: Path) -> None:
    source = tmp_path / "both.mlir"
    source.write_text(EXAMPLE)
    out = tmp_path / "both.kernel"
    proc = subprocess.run(
        [sys.executable, "-m", "sparsecomp.tools.compile", str(source), "--target", "cuda-emu",
         "-o", str(out)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["parts"] == [
        {"directory": "part-1", "target": "narrow", "functions": ["on_narrow"]}
    ]
    a, b, c = _operands(9, 7, 2, 0.4, 7)
    loaded = sparsecomp.load(out)
    np.testing.assert_allclose(loaded.on_narrow(a, b, c), c + a @ b, rtol=1e-5, atol=1e-5)


@settings(max_examples=12, deadline=None)
@given(
    rows=st.integers(1, 70),
    inner=st.integers(1, 50),
    cols=st.integers(1, 40),
    density=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**16),
)
def test_both_devices_equal_scipy(
    rows: int, inner: int, cols: int, density: float, seed: int
) -> None:
    exe = sparsecomp.compile(EXAMPLE, "cuda-emu")
    a, b, c = _operands(rows, inner, cols, density, seed)
    expected = c + a @ b
    np.testing.assert_allclose(exe.on_wide(a, b, c), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(exe.on_narrow(a, b, c), expected, rtol=1e-5, atol=1e-5)


# -- what is refused, where ---------------------------------------------------------------


def _step_example() -> str:
    """docs/multi-device.md's ``@step``: one matmul on the CPU, two marked for the GPU."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "multi-device.md").read_text()
    start = text.index("#sp = #sparse_iter.sparsity<unstructured>\n#tr")
    return text[start : text.index("\n}\n", start) + 3]


def test_ops_marked_for_the_gpu_in_a_cpu_function_run_there(tmp_path: Path) -> None:
    """The documented ``@step`` compiles: cut into a CPU part (A^T read as CSC) and a GPU
    part (CSR) called in turn; its result is scipy's."""
    exe = sparsecomp.compile(_step_example(), "cuda-emu")
    step = exe.step
    assert step.parts == [("step__part0", "host"), ("step__part1", "cuda:sm_80")]
    assert str(exe.functions["step__part0"].signature.args[0].layout) == "csc"
    assert str(exe.functions["step__part1"].signature.args[0].layout) == "csr"
    a = sp.random(30, 20, density=0.2, format="csr", dtype=np.float32, random_state=1)
    rng = np.random.default_rng(0)
    b = rng.standard_normal((30, 6)).astype(np.float32)
    c = rng.standard_normal((20, 6)).astype(np.float32)
    expected = c + 3 * (a.T @ b)
    np.testing.assert_allclose(step(a, b, c), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(exe(a, b, c), expected, rtol=1e-5, atol=1e-5)  # the only one
    assert "'step' runs in 2 parts: 'step__part0' on host, then 'step__part1' on" in str(exe.plan())
    loaded = sparsecomp.load(exe.save(tmp_path / "step"))
    np.testing.assert_allclose(loaded.step(a, b, c), expected, rtol=1e-5, atol=1e-5)


MIX = f"""
#sp = #sparse_iter.sparsity<unstructured>
module attributes {{sparse_iter.targets = {{cpu = {WIDE}, gpu = {SM90}}}}} {{
  func.func @mix(%a: tensor<?x?xf32, #sp>, %b: tensor<?x?xf32>) -> tensor<?x?xf32>
      attributes {{sparse_iter.target = "cpu"}} {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %m = tensor.dim %a, %c0 : tensor<?x?xf32, #sp>
    %n = tensor.dim %b, %c1 : tensor<?x?xf32>
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty(%m, %n) : tensor<?x?xf32>
    %z = linalg.fill ins(%zero : f32) outs(%e : tensor<?x?xf32>) -> tensor<?x?xf32>
    %0 = linalg.matmul ins(%a, %b : tensor<?x?xf32, #sp>, tensor<?x?xf32>)
                       outs(%z : tensor<?x?xf32>) -> tensor<?x?xf32>
    %1 = linalg.matmul {{sparse_iter.target = "gpu"}}
         ins(%a, %b : tensor<?x?xf32, #sp>, tensor<?x?xf32>) outs(%0 : tensor<?x?xf32>)
         -> tensor<?x?xf32>
    %2 = linalg.matmul ins(%a, %b : tensor<?x?xf32, #sp>, tensor<?x?xf32>)
                       outs(%1 : tensor<?x?xf32>) -> tensor<?x?xf32>
    return %2 : tensor<?x?xf32>
  }}
}}
"""


@settings(max_examples=8, deadline=None)
@given(rows=st.integers(1, 60), inner=st.integers(1, 40), cols=st.integers(1, 20),
       density=st.floats(0.0, 1.0), seed=st.integers(0, 2**16))  # fmt: skip
def test_three_parts_pass_values_on(rows, inner, cols, density, seed) -> None:
    """CPU, GPU, CPU: each part's result is the next one's ``outs``; the constants, sizes
    and empty tensor the first part reads are copied into it."""
    exe = sparsecomp.compile(MIX, "cuda-emu")
    assert [d for _, d in exe.mix.parts] == ["host", "cuda:sm_90", "host"]
    a, b, _ = _operands(rows, inner, cols, density, seed)
    np.testing.assert_allclose(exe.mix(a, b), 3 * (a @ b), rtol=1e-4, atol=1e-4)


def test_an_op_for_the_gpu_in_a_loop_of_a_cpu_function() -> None:
    """A mark inside a loop: data would cross devices inside compiled code: refused."""
    source = MIX.replace(
        """    %1 = linalg.matmul {sparse_iter.target = "gpu"}
         ins(%a, %b : tensor<?x?xf32, #sp>, tensor<?x?xf32>) outs(%0 : tensor<?x?xf32>)
         -> tensor<?x?xf32>""",
        """    %1 = scf.for %i = %c0 to %c1 step %c1 iter_args(%t = %0) -> tensor<?x?xf32> {
      %u = linalg.matmul {sparse_iter.target = "gpu"}
           ins(%a, %b : tensor<?x?xf32, #sp>, tensor<?x?xf32>) outs(%t : tensor<?x?xf32>)
           -> tensor<?x?xf32>
      scf.yield %u : tensor<?x?xf32>
    }""",
    )
    assert "scf.for" in source
    with pytest.raises(CompileError) as info:
        sparsecomp.compile(source, "cuda-emu")
    assert (
        "<source>:16:12: 'linalg.matmul' is marked for CUDA target 'gpu' inside 'mix', "
        "a function for the CPU"
    ) in str(info.value)
    assert "at the top level of a function's body" in (info.value.hint or "")


def test_a_call_from_the_cpu_to_the_gpu() -> None:
    source = _transposed(("g", "gpu"), ("f", "cpu")).replace(
        "%0 = linalg.matmul indexing_maps = #tr ins(%a, %b : tensor<?x?xf32, #sp>, "
        "tensor<?x?xf32>)\n                       outs(%c : tensor<?x?xf32>) -> "
        "tensor<?x?xf32>\n    return %0 : tensor<?x?xf32>\n  }\n}",
        f"%0 = call @g(%a, %b, %c) : ({T}) -> tensor<?x?xf32>\n    return %0 : "
        "tensor<?x?xf32>\n  }\n}",
    )
    assert "call @g" in source
    with pytest.raises(CompileError, match=r"<source>:\d+:10: 'f' \(the CPU\) calls 'g' "
                       r"\(CUDA target 'gpu'\)"):  # fmt: skip
        sparsecomp.compile(source, "cuda-emu")


def test_a_public_function_without_a_target() -> None:
    source = _transposed(("f", "cpu")).replace(' attributes {sparse_iter.target = "cpu"}', "")
    with pytest.raises(CompileError, match=r"<source>:6:3: no sparse_iter.target on 'f' and "
                       r"the module has several targets \(cpu, gpu\)"):  # fmt: skip
        sparsecomp.compile(source, "cuda-emu")


def test_cuda_emu_needs_cuda_targets() -> None:
    source = _transposed(("f", "cpu")).replace(f", gpu = {SM90}", "")
    with pytest.raises(CompileError, match="target 'cuda-emu' emulates the CUDA targets") as e:
        sparsecomp.compile(source, "cuda-emu")
    assert "cuda-emu:sm_80" in (e.value.hint or "")


def test_the_gpu_parts_remarks_are_logged(caplog) -> None:
    """A product in the GPU part that the tensor cores do not take is remarked (the
    ``sparsecomp`` logger), as for a module of one GPU."""
    import logging

    source = (
        _transposed(("f", "cpu"), ("g", "gpu"))
        .replace(
            "#sp = #sparse_iter.sparsity<unstructured>", "#sp = #sparse_iter.sparsity<block[4, 12]>"
        )
        .replace("indexing_maps = #tr ", "")
    )
    with caplog.at_level(logging.INFO, logger="sparsecomp"):
        exe = sparsecomp.compile(source, "cuda-emu", cache_results=False)
    said = [r.getMessage() for r in caplog.records if "scalar schedule" in r.getMessage()]
    assert said, [r.getMessage() for r in caplog.records]
    assert exe.parts["gpu"].manifest["remarks"]


def test_a_gpu_part_with_no_launch_is_remarked() -> None:
    """``@step``'s GPU part reads A^T as CSR, a scatter no launch takes: its work stays in
    host code, and the compile says so at the product (no silent fallback)."""
    exe = sparsecomp.compile(_step_example(), "cuda-emu")
    (said,) = exe.parts["gpu"].manifest["remarks"]
    assert said.startswith("<source>:10:10: remark: in 'step__part1': no loop runs on the GPU")
    assert not exe.manifest["remarks"]  # the CPU part is no GPU build
    assert exe.remarks == (said,)


_COLUMN_SUM = """
#sp = #sparse_iter.sparsity<unstructured>
func.func @colsum(%A: tensor<?x?xf32, #sp>, %y: tensor<?xf32>) -> tensor<?xf32> {
  %0 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>],
                       iterator_types = ["reduction", "parallel"]}
      ins(%A : tensor<?x?xf32, #sp>) outs(%y : tensor<?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
"""


def test_a_host_loop_beside_a_launch_is_remarked() -> None:
    """A column sum whose output's fill launches on the GPU while its reduction over
    CSR (a scatter) stays in host code: the loop gets a remark (none said so: the
    remark was only for a function of which no loop launched)."""
    filled = _COLUMN_SUM.replace(
        "func.func @colsum(%A: tensor<?x?xf32, #sp>, %y: tensor<?xf32>) -> tensor<?xf32> {",
        "func.func @colsum(%A: tensor<?x?xf32, #sp>, %y0: tensor<?xf32>) -> tensor<?xf32> {\n"
        "  %zero = arith.constant 0.0 : f32\n"
        "  %y = linalg.fill ins(%zero : f32) outs(%y0 : tensor<?xf32>) -> tensor<?xf32>",
    )
    exe = sparsecomp.compile(filled, "cuda-emu:sm_80")
    assert "gpu.launch" in (exe.directory / "gpu.mlir").read_text()  # the fill
    (said,) = exe.remarks
    assert "in 'colsum': this loop's arithmetic stays in the host code" in said
    a = sp.random(30, 20, density=0.2, format="csr", dtype=np.float32, random_state=0)
    np.testing.assert_allclose(exe(a, np.ones(20, np.float32)), a.sum(axis=0).A1, rtol=1e-5)


def test_sparsecomp_compile_prints_the_remarks(tmp_path: Path, capsys) -> None:
    """A column sum over CSR for a GPU runs in host code: ``sparsecomp-compile`` prints
    the remark on stderr, as a compiler does (it was only logged at INFO, unseen), at
    the file compiled, also where the cache holds the kernel built from another file
    (it named that file)."""
    from sparsecomp.tools import compile as compile_tool

    for name in ("colsum.mlir", "again.mlir"):
        source = tmp_path / name
        source.write_text(_COLUMN_SUM)
        out = str(tmp_path / name.replace(".mlir", ""))
        assert compile_tool.main([str(source), "--target", "cuda:sm_80", "-o", out]) == 0
        err = capsys.readouterr().err
        assert err.startswith(f"{source}:4:8: remark: in 'colsum': no loop runs on the GPU")
