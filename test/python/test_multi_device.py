"""Modules with several CPU targets: shared helpers are copied per target and agree with scipy."""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import sparsecomp
from long_runs import strength
from sparsecomp.errors import ConversionWarning, TargetError
from sparsecomp.formats import SparseTensor
from sparsecomp.runtime import executable
from sparsecomp.targets import CpuTarget, target_from_attr

TARGETS = {
    "wide": "#sparse_iter.cpu<x86_64, features = [avx2, fma], vector_bits = 256, threads = 2>",
    "narrow": "#sparse_iter.cpu<x86_64, features = [sse4.2], vector_bits = 128, threads = 1>",
    "scalar": "#sparse_iter.cpu<x86_64, features = [], vector_bits = 0, threads = 1>",
}
T = "tensor<?x?xf32, #sp>, tensor<?x?xf32>, tensor<?x?xf32>"


def _module(targets: list[str], body: str) -> str:
    listed = ", ".join(f"{t} = {TARGETS[t]}" for t in targets)
    return f"""
#sp = #sparse_iter.sparsity<unstructured, density = 0.1>
module attributes {{sparse_iter.targets = {{{listed}}}}} {{
{body}
}}
"""


def _helper(name: str, callee: str | None) -> str:
    """``c + a @ b``, then (with a callee) the callee applied to that."""
    call, result = "", "%0"
    if callee:
        call, result = f"%1 = call @{callee}(%a, %b, %0) : ({T}) -> tensor<?x?xf32>\n    ", "%1"
    return f"""  func.func private @{name}(%a: tensor<?x?xf32, #sp>, %b: tensor<?x?xf32>,
                               %c: tensor<?x?xf32>) -> tensor<?x?xf32> {{
    %0 = linalg.matmul ins(%a, %b : tensor<?x?xf32, #sp>, tensor<?x?xf32>)
                       outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
    {call}return {result} : tensor<?x?xf32>
  }}"""


def _entry(name: str, target: str, callee: str) -> str:
    return f"""  func.func @{name}(%a: tensor<?x?xf32, #sp>, %b: tensor<?x?xf32>,
                     %c: tensor<?x?xf32>) -> tensor<?x?xf32>
      attributes {{sparse_iter.target = "{target}"}} {{
    %0 = call @{callee}(%a, %b, %c) : ({T}) -> tensor<?x?xf32>
    return %0 : tensor<?x?xf32>
  }}"""


def _operands(rows: int, inner: int, seed: int) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    a = sp.random(rows, inner, density=0.2, format="csr", random_state=seed, dtype=np.float32)
    rng = np.random.default_rng(seed)
    b = rng.standard_normal((inner, 5)).astype(np.float32)
    c = rng.standard_normal((rows, 5)).astype(np.float32)
    return a, b, c


ISSUE_EXAMPLE = _module(
    ["wide", "narrow"],
    "\n".join(
        [
            _helper("helper", None),
            _entry("on_wide", "wide", "helper"),
            _entry("on_narrow", "narrow", "helper"),
        ]
    ),
)


@pytest.fixture(scope="module")
def example() -> sparsecomp.Executable:
    return sparsecomp.compile(ISSUE_EXAMPLE)


@pytest.mark.parametrize("shape", [(0, 4), (5, 0), (1, 1), (33, 17), (64, 40)])
def test_shared_helper_on_two_targets(example, shape: tuple[int, int]) -> None:
    a, b, c = _operands(*shape, seed=shape[0])
    for name in ("on_wide", "on_narrow"):
        got = example.functions[name](a, b, c)
        np.testing.assert_allclose(got, c + a @ b, rtol=1e-5, atol=1e-5)


@st.composite
def call_graphs(draw: st.DrawFn) -> tuple[list[str], str, list[tuple[str, int]]]:
    """Targets, the module body, and each entry with its number of matmuls.

    Private helpers ``h0..`` compute ``c + a @ b`` and may pass that on to a
    later helper; public entries, each on a drawn target, call one helper.
    """
    targets = draw(st.lists(st.sampled_from(sorted(TARGETS)), min_size=2, max_size=3, unique=True))
    helpers = draw(st.integers(1, 3))
    calls = [draw(st.one_of(st.none(), st.integers(h + 1, helpers))) for h in range(helpers)]
    depth = {}
    for h in reversed(range(helpers)):
        nxt = calls[h]
        depth[h] = 1 + (depth[nxt] if nxt is not None and nxt < helpers else 0)
    entries = [
        (f"e{i}", draw(st.sampled_from(targets)), draw(st.integers(0, helpers - 1)))
        for i in range(draw(st.integers(1, 3)))
    ]
    funcs = [
        _helper(f"h{h}", f"h{calls[h]}" if calls[h] is not None and calls[h] < helpers else None)
        for h in range(helpers)
    ]
    funcs += [_entry(name, target, f"h{first}") for name, target, first in entries]
    return targets, "\n".join(funcs), [(n, depth[f]) for n, _, f in entries]


@settings(deadline=None, max_examples=strength(6, 15))
@given(graph=call_graphs(), rows=st.integers(0, 24), seed=st.integers(0, 100))
def test_random_call_graphs_match_scipy(graph, rows: int, seed: int) -> None:
    targets, body, entries = graph
    exe = sparsecomp.compile(_module(targets, body))
    a, b, c = _operands(rows, 9, seed)
    for name, depth in entries:
        got = exe.functions[name](a, b, c)
        np.testing.assert_allclose(got, c + depth * (a @ b), rtol=1e-4, atol=1e-4)


def _features(kernel_ll: str, function: str) -> str:
    """The ``target-features`` LLVM compiled ``function`` with."""
    define = re.search(rf"^define .*@{re.escape(function)}\(.*\) #(\d+)", kernel_ll, re.M)
    assert define is not None, function
    group = re.search(rf"^attributes #{define.group(1)} = {{(.*)}}", kernel_ll, re.M)
    assert group is not None
    found = re.search(r'"target-features"="([^"]*)"', group.group(1))
    return found.group(1) if found else ""


def test_each_copy_compiles_for_its_own_isa(example) -> None:
    """One library, each function built for its target: the narrow copy has no AVX."""
    kernel_ll = (example.directory / "kernel.ll").read_text()
    for function in ("helper__narrow", "on_narrow", "_mlir_ciface_on_narrow"):
        assert _features(kernel_ll, function) == "+sse4.2"
    for function in ("helper__wide", "on_wide", "_mlir_ciface_on_wide"):
        assert _features(kernel_ll, function) == "+avx2,+fma"
    manifest = example.manifest
    assert manifest["target"] == CpuTarget("x86_64", (), 128, 2).attr_text()  # shared by both
    assert manifest["targets"] == {"wide": TARGETS["wide"], "narrow": TARGETS["narrow"]}
    assert {n: e["target"] for n, e in manifest["functions"].items()} == {
        "on_wide": "wide",
        "on_narrow": "narrow",
    }


def test_load_refuses_a_target_this_machine_cannot_run(example, monkeypatch) -> None:
    """Compiling for any target works; loading on a machine without its ISA is an error."""
    old = CpuTarget("x86_64", ("sse4.2",), 128, 1)
    monkeypatch.setattr(executable, "_host", lambda: old)
    with pytest.raises(TargetError, match=r"'on_wide' \(target 'wide'\) need avx2, fma"):
        sparsecomp.load(example.directory)
    arm = CpuTarget("aarch64", ("neon",), 128, 1)
    monkeypatch.setattr(executable, "_host", lambda: arm)
    with pytest.raises(TargetError, match=r"its shared code.* need x86_64"):
        sparsecomp.load(example.directory)


def test_common_target() -> None:
    wide, narrow, scalar = (target_from_attr(TARGETS[n]) for n in ("wide", "narrow", "scalar"))
    assert CpuTarget.common([wide, narrow]) == CpuTarget("x86_64", (), 128, 2)
    assert CpuTarget.common([wide]) == wide
    assert CpuTarget.common([wide, scalar]).vector_bits == 0
    arm = CpuTarget("aarch64", ("neon",), 128, 0)
    with pytest.raises(TargetError, match="must share an architecture, got aarch64, x86_64"):
        CpuTarget.common([wide, arm])
    assert wide.missing_on(narrow) == ["avx2", "fma"]
    assert narrow.missing_on(wide) == ["sse4.2"]
    assert wide.missing_on(arm) == ["x86_64"]


CHAIN_TRANSPOSED = """
#sp = #sparse_iter.sparsity<unstructured>
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
#tr = [affine_map<(m, n, k) -> (k, m)>, affine_map<(m, n, k) -> (k, n)>,
       affine_map<(m, n, k) -> (m, n)>]
module attributes {sparse_iter.targets = {
    cpu = #sparse_iter.cpu<x86_64, features = [avx2, fma], vector_bits = 256, threads = 0>,
    gpu = #sparse_iter.cuda<sm_80, mma_shapes = [m16n8k16], sparse_mma_shapes = [m16n8k32]>}} {
  func.func @f(%s: tensor<?x?xf32, #sp>, %d: tensor<?xf32>, %b: tensor<?x?xf32>,
               %c: tensor<?x?xf32>) -> tensor<?x?xf32> attributes {sparse_iter.target = "cpu"} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %m = tensor.dim %s, %c0 : tensor<?x?xf32, #sp>
    %n = tensor.dim %s, %c1 : tensor<?x?xf32, #sp>
    %e = tensor.empty(%m, %n) : tensor<?x?xf32, #sp>
    %q = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel",
                         "parallel"], sparse_iter.target = "gpu"}
      ins(%s, %d : tensor<?x?xf32, #sp>, tensor<?xf32>) outs(%e : tensor<?x?xf32, #sp>) {
    ^bb0(%x: f32, %y: f32, %o: f32):
      %p = arith.mulf %x, %y : f32
      linalg.yield %p : f32
    } -> tensor<?x?xf32, #sp>
    %r = linalg.matmul indexing_maps = #tr ins(%q, %b : tensor<?x?xf32, #sp>, tensor<?x?xf32>)
                       outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
    return %r : tensor<?x?xf32>
  }
}
"""


def test_a_conversion_between_device_parts_is_planned_and_not_blamed_on_an_argument() -> None:
    """A GPU part's sparse result that the CPU part reads transposed (CSR there, CSC
    here): plan() listed no conversion, and the runtime's warning named argument 0 of
    'f__part1', which the caller never passes (session 44)."""
    import warnings

    exe = sparsecomp.compile(CHAIN_TRANSPOSED, "cuda-emu")
    plan = exe.plan()
    assert [c.location for c in plan.conversions] == ["between 'f__part0' and 'f__part1'"]
    rng = np.random.default_rng(3)
    s = sp.random(12, 9, density=0.3, format="csr", dtype=np.float32, random_state=3)
    d = rng.standard_normal(12).astype(np.float32)
    b = rng.standard_normal((12, 5)).astype(np.float32)
    c = rng.standard_normal((9, 5)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConversionWarning)
        got = exe.f(SparseTensor.from_scipy(s, "csr"), d, b, c)
    want = c + (sp.diags(d) @ s).T @ b
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
