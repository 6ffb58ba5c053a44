"""``cuda:sm_XX`` executables: the build, save/load, and the runtime's driver calls.

No GPU here: the driver calls are checked against a recording fake
(:class:`FakeDriver`, installed with ``use_driver``) that serves managed
memory from host memory and, at each launch, records the grid, the block and
the kernel's parameters, and writes a known pattern into the buffer the host
code allocated for the result. That checks what the runtime owns: inputs
copied into managed memory and passed to the kernel, the grid the host code
computes, module loading (cubin on the GPU it was built for, PTX elsewhere),
results read back with their shape, every buffer freed, driver errors raised
with the call's name. The kernels' own numerics are checked under
``cuda-emu`` (test_cuda_emulation.py and friends); a real launch needs
a driver (``test_real_gpu`` skips without one).
"""

from __future__ import annotations

import ctypes
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

import sparsecomp
from sparsecomp.compiler.cuda import ptxas
from sparsecomp.formats import SparseTensor
from sparsecomp.runtime import cuda
from sparsecomp.runtime.cuda import CudaError, CudaUnavailableError, DriverTable, use_driver
from sparsecomp.targets import CpuTarget, target_from_attr

ROOT = Path(__file__).resolve().parents[2]
SPMM = ROOT / "examples" / "spmm.mlir"
SPMV = ROOT / "examples" / "spmv.mlir"
HAS_PTXAS = ptxas() is not None


class FakeDriver:
    """A CUDA driver table whose memory is host memory and whose launches are recorded."""

    def __init__(self, sm: int = 80, fail_launch: int = 0) -> None:
        self.live: dict[int, Any] = {}  # address -> ctypes buffer, in allocation order
        self.freed: list[int] = []
        self.images: list[bytes] = []
        self.functions: list[str] = []
        self.launches: list[dict[str, Any]] = []
        self.module_ptx: list[str] = []  # per loaded module, its PTX
        self.function_params: list[list[int]] = []  # per function handle, its params' bytes
        self.fail_launch = fail_launch
        self.output_dtype: np.dtype[Any] = np.dtype(np.float32)
        #: (call, pointer, bytes, advice or device) of cuMemAdvise / cuMemPrefetchAsync
        self.advice: list[tuple[str, int, int, int]] = []
        self.read_mostly: set[int] = set()
        table = DriverTable()
        callbacks = {
            "load_module": self._load_module,
            "module_get_function": self._get_function,
            "launch_kernel": self._launch,
            "stream_synchronize": lambda stream: 0,
            "mem_alloc_managed": lambda out, size, flags: self._alloc(out, size),
            "mem_alloc": self._alloc,
            "mem_free": self._free,
            "memcpy": lambda dst, src, n: ctypes.memmove(dst, src, n) and 0,
            "memset_d32": lambda dst, value, n: 0,
            "memset_d16": lambda dst, value, n: 0,
            "mem_advise": self._advise,
            "mem_prefetch_async": lambda ptr, n, device, stream: (
                self.advice.append(("prefetch", ptr, n, device)) or 0
            ),
        }
        self.keep: list[Any] = []
        for name, fn in callbacks.items():
            wrapped = dict(DriverTable._fields_)[name](fn)
            self.keep.append(wrapped)
            setattr(table, name, wrapped)
        self.driver = cuda.Driver(table, sm=sm, name="fake", keep=self.keep)

    def _alloc(self, out: Any, size: int) -> int:
        buf = ctypes.create_string_buffer(size)
        self.live[ctypes.addressof(buf)] = buf
        out[0] = ctypes.addressof(buf)
        return 0

    def _advise(self, ptr: int, nbytes: int, advice: int, device: int) -> int:
        self.advice.append(("advise", ptr, nbytes, advice))
        (self.read_mostly.add if advice == 1 else self.read_mostly.discard)(ptr)
        return 0

    def _free(self, ptr: int) -> int:
        if ptr not in self.live:
            return 1  # CUDA_ERROR_INVALID_VALUE: not ours, or freed twice
        del self.live[ptr]
        self.freed.append(ptr)
        return 0

    def _load_module(self, out: Any, image: int, size: int) -> int:
        data = ctypes.string_at(image, size) if size else ctypes.string_at(image) + b"\0"
        self.images.append(self.driver.cubins.get(data, data))
        self.module_ptx.append(data.decode(errors="replace"))
        out[0] = 0x1000 + len(self.images)
        return 0

    def _get_function(self, out: Any, module: int, name: bytes) -> int:
        self.functions.append(name.decode())
        self.function_params.append(entry_params(self.module_ptx[module - 0x1001])[name.decode()])
        out[0] = 0x2000 + len(self.functions)
        return 0

    def _launch(self, fn: int, gx, gy, gz, bx, by, bz, smem, stream, params, extra) -> int:
        name = self.functions[fn - 0x2001]
        sizes = self.function_params[fn - 0x2001]
        slots = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
        kinds = {8: ctypes.c_uint64, 4: ctypes.c_uint32, 2: ctypes.c_uint16}
        values = [
            kinds[n].from_address(slots[i]).value if n in kinds else ctypes.string_at(slots[i], n)
            for i, n in enumerate(sizes)
        ]  # an aggregate parameter (.b8 x[32]) as its bytes
        buffers = {addr: bytes(buf) for addr, buf in self.live.items()}
        spans = [(addr, addr + len(buf)) for addr, buf in self.live.items()]
        # A 64-bit parameter in the user-space address range is a pointer: it must lie in
        # memory the driver allocated (host malloc is out of a real GPU's reach).
        strays = [
            v for v, n in zip(values, sizes, strict=True)
            if n == 8 and 2**40 <= v < 2**48 and not any(lo <= v <= hi for lo, hi in spans)
        ]  # fmt: skip
        self.launches.append(
            {
                "name": name,
                "grid": (gx, gy, gz),
                "block": (bx, by, bz),
                "smem": smem,
                "params": values,
                "buffers": buffers,
                "strays": strays,
            }
        )
        if self.fail_launch:
            return self.fail_launch
        newest = list(self.live)[-1]  # the host code's result buffer, allocated last
        buf = self.live[newest]
        n = len(buf) // self.output_dtype.itemsize
        pattern = np.arange(n, dtype=self.output_dtype)
        ctypes.memmove(newest, pattern.ctypes.data, pattern.nbytes)
        return 0


def entry_params(ptx: str) -> dict[str, list[int]]:
    """Kernel name -> its parameters' sizes in bytes, in one PTX module."""
    found = re.findall(r"\.entry (\w+)\(([^)]*)\)", ptx)
    return {entry: [_param_bytes(p) for p in params.split(",")] for entry, params in found}


def _param_bytes(declaration: str) -> int:
    """``.param .u64 x`` -> 8, ``.param .align 8 .b8 x[8]`` -> 8."""
    bits = re.search(r"\.[bsuf](\d+)\s", declaration)
    count = re.search(r"\[(\d+)\]", declaration)
    assert bits is not None, declaration
    return int(bits.group(1)) // 8 * (int(count.group(1)) if count else 1)


def kernel_names(directory: Path) -> set[str]:
    """The kernels of a saved executable's PTX files."""
    return {n for ptx in directory.glob("*.ptx") for n in entry_params(ptx.read_text())}


@pytest.fixture(scope="module")
def spmm_cuda() -> sparsecomp.Executable:
    return sparsecomp.compile(SPMM, target="cuda:sm_80")


@pytest.fixture
def fake(spmm_cuda: sparsecomp.Executable) -> Any:
    driver = FakeDriver()
    old = use_driver(driver.driver)
    yield driver
    use_driver(old)


def test_build_writes_ptx_cubin_and_manifest(spmm_cuda: sparsecomp.Executable) -> None:
    manifest = spmm_cuda.manifest
    assert manifest["device"] == "cuda:sm_80"
    (kernel,) = manifest["kernels"]
    ptx = (spmm_cuda.directory / kernel["ptx"]).read_text()
    assert f".entry {kernel['name']}" in ptx
    assert ".target sm_80" in ptx
    assert kernel["sm"] == 80
    if HAS_PTXAS:
        assert (spmm_cuda.directory / kernel["cubin"]).read_bytes()[:4] == b"\x7fELF"
    # the host code loads on any x86-64 with the GPU, not only on CPUs like this one
    host = target_from_attr(manifest["target"])
    assert isinstance(host, CpuTarget)
    assert host.features == ()
    # the library carries MLIR's GPU runtime ABI itself: no libmlir_cuda_runtime needed
    library = ctypes.CDLL(str(spmm_cuda.directory / "kernel.so"))
    for symbol in ("mgpuLaunchKernel", "mgpuMemAlloc", "mgpuModuleLoadJIT", "sparsecomp_cuda_bind"):
        assert hasattr(library, symbol)


def test_launch_through_the_driver(spmm_cuda: sparsecomp.Executable, fake: FakeDriver) -> None:
    m, n, k = 37, 21, 45
    A = sp.random(m, n, density=0.3, format="csr", dtype=np.float32, random_state=1)
    B = np.random.default_rng(2).random((n, k), dtype=np.float32)
    C = spmm_cuda(A, B)
    (launch,) = fake.launches
    assert launch["name"] == "spmm_kernel"
    # the SpMM schedule: 32 columns x 4 rows per block, the blocks on x
    assert launch["grid"] == (-(-k // 32) * -(-m // 4), 1, 1)
    assert launch["block"] == (32, 4, 1)
    # every input reached the kernel as a managed copy holding the caller's data
    copies = {bytes(a): addr for addr, a in launch["buffers"].items()}
    for array in (A.indptr, A.indices, A.data, B):
        data = np.ascontiguousarray(array).tobytes()
        assert copies.get(data) in launch["params"], "an input was not passed to the kernel"
    # the result is what the kernel wrote into the host code's buffer, row-major
    assert C.shape == (m, k)
    assert C.dtype == np.float32
    np.testing.assert_array_equal(C, np.arange(m * k, dtype=np.float32).reshape(m, k))
    assert not fake.live, "device memory leaked"
    assert fake.images[0][:4] == b"\x7fELF" if HAS_PTXAS else fake.images[0].startswith(b"//")


def _programs() -> dict[str, tuple[str | Path, Any]]:
    from test_cuda_mma import OURS, UPSTREAM

    rng = np.random.default_rng(6)
    A = sp.random(40, 24, density=0.2, format="csr", dtype=np.float32, random_state=7)
    blocks = sp.random(48, 32, density=0.5, format="csr", dtype=np.float32, random_state=8)
    dense = rng.random((24, 10), dtype=np.float32)
    X, Y = rng.random((40, 6), dtype=np.float32), rng.random((24, 6), dtype=np.float32)
    from test_cuda_emulation import _hyb_program
    from test_cuda_mma_sp import PROGRAM as NM_SP
    from test_cuda_mma_sp import _operands as nm_operands

    hyb = _hyb_program("hyb", "spmv")
    nm_a, nm_b, nm_c = nm_operands(32, 64, 16, 0)
    return {
        "hyb-spmv": (hyb, (A, rng.random(24, dtype=np.float32), np.zeros(40, np.float32))),
        "spmm": (SPMM, (A, dense)),
        "spmv": (SPMV, (A, rng.random(24, dtype=np.float32))),
        "sddmm": (ROOT / "examples" / "sddmm.mlir", (A, X, Y)),
        "bsr-mma": (OURS.format(r=16, c=8), (blocks, rng.random((32, 10), dtype=np.float32))),
        "upstream-bsr-outs": (UPSTREAM, (blocks, rng.random((32, 10), dtype=np.float32),
                                         np.zeros((48, 10), np.float32))),
        "nm-mma-sp": (NM_SP, (SparseTensor.from_dense(nm_a, "nm:2:4"), nm_b, nm_c)),
    }  # fmt: skip


@pytest.mark.parametrize("name", list(_programs()))
def test_every_schedule_runs_through_the_driver(name: str) -> None:
    """Each program form builds for the GPU and its host code drives the driver soundly."""
    source, args = _programs()[name]
    exe = sparsecomp.compile(source, target="cuda:sm_80")
    driver = FakeDriver()
    old = use_driver(driver.driver)
    try:
        result = exe(*args)
    finally:
        use_driver(old)
    assert driver.launches, "no kernel was launched"
    passed: set[int] = set()
    for launch in driver.launches:
        assert launch["name"] in kernel_names(exe.directory)  # a kernel of the saved PTX
        assert min(launch["grid"]) >= 1
        assert 32 <= np.prod(launch["block"]) <= 1024
        # the buffer allocated last (the result) reaches the kernel that writes it
        assert list(launch["buffers"])[-1] in launch["params"]
        # every buffer a kernel gets is device memory (managed or the inputs' copies)
        assert not launch["strays"], f"{launch['name']} got memory the driver did not allocate"
        passed |= set(launch["buffers"]) & set(launch["params"])
    # the inputs' copies reach the kernels (those the host code alone reads, such as a
    # part's row count, need not)
    assert len(passed) >= min(3, len(driver.launches[-1]["buffers"]))
    assert not driver.live, "device memory leaked"
    if isinstance(result, np.ndarray):
        assert result.shape == (args[0].shape[0], *args[1].shape[1:])
    else:  # SDDMM: the structure of A, copied by the host code, values from the kernel
        np.testing.assert_array_equal(result.to_scipy().indptr, args[0].indptr)
        np.testing.assert_array_equal(result.to_scipy().indices, args[0].indices)


@pytest.mark.parametrize("kernel", ["spmm", "spmv", "sddmm"])
def test_grids_of_many_rows_fit_the_driver_limits(kernel: str) -> None:
    """300000 rows (75000 blocks of 4 rows): every grid fits CUDA's limits (x < 2^31,
    y and z <= 65535), where SpMM once put its row blocks on y."""
    m, n = 300_000, 50
    A = sp.random(m, n, density=0.02, format="csr", dtype=np.float32, random_state=4)
    rng = np.random.default_rng(5)
    args: tuple[Any, ...] = {
        "spmm": (A, rng.random((n, 8), dtype=np.float32)),
        "spmv": (A, rng.random(n, dtype=np.float32)),
        "sddmm": (A, rng.random((m, 8), dtype=np.float32), rng.random((n, 8), dtype=np.float32)),
    }[kernel]
    exe = sparsecomp.compile(ROOT / "examples" / f"{kernel}.mlir", target="cuda:sm_80")
    driver = FakeDriver()
    old = use_driver(driver.driver)
    try:
        exe(*args)
    finally:
        use_driver(old)
    for launch in driver.launches:
        gx, gy, gz = launch["grid"]
        assert gx < 2**31, launch["grid"]
        assert max(gy, gz) <= 65535, launch["grid"]
        assert gx * gy * gz * np.prod(launch["block"]) >= m  # every row has a thread



#: SpMM on the tensor cores (BSR 4x4 f32: the packed mma.sync kernel; 16x8: the plain one).
BSR_MATMUL = """
#BSR = #sparse_tensor.encoding<{{map = (i, j) -> (i floordiv {r} : dense,
    j floordiv {c} : compressed, i mod {r} : dense, j mod {c} : dense)}}>
func.func @mm(%A: tensor<?x?xf32, #BSR>, %B: tensor<?x?xf32>, %C: tensor<?x?xf32>)
    -> tensor<?x?xf32> {{
  %r = linalg.matmul ins(%A, %B : tensor<?x?xf32, #BSR>, tensor<?x?xf32>)
                     outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}}
"""


@pytest.mark.parametrize("block", [(4, 4), (16, 8)])
def test_tensor_core_grids_of_many_columns_fit_the_driver_limits(block: tuple[int, int]) -> None:
    """B of 2.1M columns: the MMA kernels put a block per 32 columns on grid y, past
    CUDA's 65535 (the emulator ran it; a GPU refuses the launch). They now launch on
    one dimension, x."""
    r, c = block
    exe = sparsecomp.compile(BSR_MATMUL.format(r=r, c=c), target="cuda:sm_80")
    n = 2_100_000
    A = SparseTensor.from_dense(np.ones((r, c), np.float32), f"bsr:{r}x{c}")
    B, C = np.ones((c, n), np.float32), np.zeros((r, n), np.float32)
    driver = FakeDriver()
    old = use_driver(driver.driver)
    try:
        exe(A, B, C)
    finally:
        use_driver(old)
    assert driver.launches
    for launch in driver.launches:
        gx, gy, gz = launch["grid"]
        assert gx < 2**31, launch["grid"]
        assert max(gy, gz) <= 65535, launch["grid"]

def test_functions_are_looked_up_once(spmm_cuda: sparsecomp.Executable, fake: FakeDriver) -> None:
    """The host code asks for the kernel before every launch; the driver is asked once."""
    A = sp.random(20, 10, density=0.3, format="csr", dtype=np.float32, random_state=1)
    B = np.ones((10, 3), np.float32)
    for _ in range(3):
        spmm_cuda(A, B)
    assert len(fake.launches) == 3
    assert fake.functions == ["spmm_kernel"]


def test_ptx_where_the_gpu_is_not_the_cubins(spmm_cuda: sparsecomp.Executable) -> None:
    driver = FakeDriver(sm=90)
    old = use_driver(driver.driver)
    try:
        spmm_cuda(sp.eye(3, format="csr", dtype=np.float32), np.ones((3, 2), np.float32))
    finally:
        use_driver(old)
    ptx = (spmm_cuda.directory / "spmm_kernel.ptx").read_bytes()
    assert driver.images == [ptx + b"\0"]


def test_a_failed_launch_names_the_call_and_frees_everything(
    spmm_cuda: sparsecomp.Executable,
) -> None:
    driver = FakeDriver(fail_launch=700)
    old = use_driver(driver.driver)
    try:
        with pytest.raises(CudaError, match="spmm: cuLaunchKernel failed"):
            spmm_cuda(sp.eye(4, format="csr", dtype=np.float32), np.ones((4, 2), np.float32))
    finally:
        use_driver(old)
    assert not driver.live
    assert len(driver.freed) == 5


class GpuArray:
    """A stand-in for a CuPy array: ``__cuda_array_interface__`` over memory the fake serves."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array
        self.__cuda_array_interface__ = {
            "version": 3, "shape": array.shape, "typestr": array.dtype.str, "strides": None,
            "data": (array.ctypes.data, False),
        }  # fmt: skip


def test_gpu_arrays_in_and_out_without_copies(
    spmm_cuda: sparsecomp.Executable, fake: FakeDriver
) -> None:
    m, n, k = 9, 7, 5
    A = sp.random(m, n, density=0.5, format="csr", dtype=np.float32, random_state=4)
    B = GpuArray(np.random.default_rng(5).random((n, k), dtype=np.float32))
    C = spmm_cuda(A, B)
    (launch,) = fake.launches
    assert B.array.ctypes.data in launch["params"], "the GPU array was not passed as it is"
    assert len(launch["buffers"]) == 4  # A's three buffers copied, the result; B not copied
    assert isinstance(C, cuda.device_arrays.DeviceArray)
    assert C.shape == (m, k)
    np.testing.assert_array_equal(C.get(), np.arange(m * k, dtype=np.float32).reshape(m, k))
    assert len(fake.live) == 1, "the result's memory lives as long as the result"
    del C
    assert not fake.live


def test_sparse_results_stay_on_the_gpu_where_a_gpu_array_came_in() -> None:
    """SDDMM with GPU dense operands: its sparse result is a DeviceTensor over the
    result's GPU buffers (none copied back), A's structure, the kernel's values; its
    memory lives as long as it does."""
    exe = sparsecomp.compile(ROOT / "examples" / "sddmm.mlir", target="cuda:sm_80")
    fake = FakeDriver()
    old = use_driver(fake.driver)
    try:
        m, n, k = 12, 9, 4
        A = sp.random(m, n, density=0.4, format="csr", dtype=np.float32, random_state=2)
        rng = np.random.default_rng(3)
        X, Y = GpuArray(rng.random((m, k), np.float32)), GpuArray(rng.random((n, k), np.float32))
        S = exe(A, X, Y)
        assert isinstance(S, cuda.device_arrays.DeviceTensor)
        assert S.shape == (m, n)
        host = S.to_scipy()
        np.testing.assert_array_equal(host.indptr, A.indptr)
        np.testing.assert_array_equal(host.indices, A.indices)
        # the values are what the (fake) kernel wrote into the buffer it got last
        np.testing.assert_array_equal(host.data, np.arange(A.nnz, dtype=np.float32))
        assert fake.live, "the result's buffers live while it does"
        del S, host
        assert not fake.live
    finally:
        use_driver(old)


def test_sddmm_shares_its_device_tensors_structure() -> None:
    """SDDMM's result has the structure of its sampling matrix: on a GPU it returns that
    DeviceTensor's positions and coordinates (``sparse-iter-forward-returned-arguments``)
    instead of copying them each call (a cuMemcpy that waits for the device, each); the
    result keeps them alive after the input is gone, and nothing is freed twice."""
    exe = sparsecomp.compile(ROOT / "examples" / "sddmm.mlir", target="cuda:sm_80")
    assert "mgpuMemcpy" not in (exe.directory / "device.mlir").read_text()  # was 2 a call
    fake = FakeDriver()
    old = use_driver(fake.driver)
    try:
        m, n, k = 12, 9, 4
        A = sp.random(m, n, density=0.4, format="csr", dtype=np.float32, random_state=2)
        rng = np.random.default_rng(3)
        X, Y = GpuArray(rng.random((m, k), np.float32)), GpuArray(rng.random((n, k), np.float32))
        on_gpu = cuda.to_device(A, exe.sddmm.signature.args[0].layout)
        before = set(fake.live)
        S = exe(on_gpu, X, Y)
        (values,) = set(fake.live) - before  # only the values are new
        mine = {name: ptr for name, _, _, ptr in on_gpu.buffers}
        theirs = {name: ptr for name, _, _, ptr in S.buffers}
        assert theirs["pos1"] == mine["pos1"]
        assert theirs["crd1"] == mine["crd1"]
        assert theirs["values"] == values
        del on_gpu
        host = S.to_scipy()  # A's memory outlives the input: S holds it
        np.testing.assert_array_equal(host.indptr, A.indptr)
        np.testing.assert_array_equal(host.indices, A.indices)
        del S, host
        assert not fake.live
        assert len(fake.freed) == len(set(fake.freed))  # none twice
    finally:
        use_driver(old)


@pytest.mark.parametrize("name", ["spmv", "spmm", "sddmm"])
def test_the_gpu_fast_path_passes_what_the_careful_path_passes(name: str) -> None:
    """A call whose operands are all on the GPU skips flatten (runtime/gpu_fastpath.py):
    the kernel gets the very parameters the careful path gives it, and the results are
    the same; an operand the fast path does not take goes the careful way."""
    exe = sparsecomp.compile(ROOT / "examples" / f"{name}.mlir", target="cuda:sm_80")
    fn = getattr(exe, name)
    fake = FakeDriver()
    old = use_driver(fake.driver)
    try:
        m, n, k = 14, 11, 5
        rng = np.random.default_rng(5)
        A = sp.random(m, n, density=0.4, format="csr", dtype=np.float32, random_state=6)
        on_gpu = cuda.to_device(A, fn.signature.args[0].layout)
        dense = {
            "spmv": [GpuArray(rng.random(n, np.float32))],
            "spmm": [GpuArray(rng.random((n, k), np.float32))],
            "sddmm": [GpuArray(rng.random((m, k), np.float32)),
                      GpuArray(rng.random((n, k), np.float32))],
        }[name]  # fmt: skip
        caller = fn._get_caller()
        taken = []
        emit = caller.gpu_fast.emit
        caller.gpu_fast.emit = lambda *a: taken.append(emit(*a)) or taken[-1]
        fast = fn(on_gpu, *dense)
        assert taken[-1] is dense[0]  # the fast path took it
        caller.gpu_fast.emit = lambda *a: taken.append(None)  # the careful path only
        careful = fn(on_gpu, *dense)
        first, second = fake.launches[-2:]

        def params(launch: dict[str, Any]) -> list[Any]:  # the new result's buffer: "out"
            newest = list(launch["buffers"])[-1]
            return ["out" if p == newest else p for p in launch["params"]]

        assert params(first) == params(second)
        assert "out" in params(first)
        assert first["grid"] == second["grid"]
        got = [r.to_scipy().toarray() if hasattr(r, "to_scipy") else r.get()
               for r in (fast, careful)]  # fmt: skip
        np.testing.assert_array_equal(got[0], got[1])
        caller.gpu_fast.emit = emit
        with pytest.raises(sparsecomp.SparsecompError, match="expected a float32 array"):
            fn(on_gpu, *[GpuArray(np.ones(d.array.shape, np.float64)) for d in dense])
    finally:
        use_driver(old)


class DlpackArray:
    """A stand-in for a JAX array: DLPack only, on device type 2 (CUDA)."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __dlpack__(self, stream: Any = None) -> Any:
        return self.array.__dlpack__()

    def __dlpack_device__(self) -> tuple[int, int]:
        return (2, 0)


def test_dlpack_arrays_in_without_copies(
    spmm_cuda: sparsecomp.Executable, fake: FakeDriver
) -> None:
    m, n, k = 6, 8, 3
    A = sp.random(m, n, density=0.5, format="csr", dtype=np.float32, random_state=2)
    B = DlpackArray(np.random.default_rng(1).random((n, k), dtype=np.float32))
    iface = cuda.device_arrays.interface(B)
    assert iface is not None
    assert iface["data"][0] == B.array.ctypes.data
    assert (iface["shape"], iface["typestr"]) == ((n, k), "<f4")
    assert iface["strides"] in (None, (k * 4, 4))
    C = spmm_cuda(A, B)
    (launch,) = fake.launches
    assert B.array.ctypes.data in launch["params"], "the DLPack array was not passed as it is"
    assert len(launch["buffers"]) == 4  # A's three buffers copied, the result; B not copied
    assert isinstance(C, cuda.device_arrays.DeviceArray)
    # a view with an offset and a host-only DLPack array
    view = DlpackArray(B.array[2:])
    assert cuda.device_arrays.interface(view)["data"][0] == B.array[2:].ctypes.data
    assert cuda.device_arrays.interface(B.array) is None
    wrong = DlpackArray(np.ones((n, k), np.float64))
    with pytest.raises(sparsecomp.SparsecompError, match="expected a float32 array of rank 2"):
        spmm_cuda(A, wrong)


def test_device_tensor_is_copied_once(spmm_cuda: sparsecomp.Executable, fake: FakeDriver) -> None:
    A = sp.random(30, 12, density=0.3, format="csr", dtype=np.float32, random_state=9)
    on_gpu = cuda.to_device(A, spmm_cuda.spmm.signature.args[0].layout)
    pointers = {ptr for *_, ptr in on_gpu.buffers}
    for _ in range(2):
        before = len(fake.live)
        spmm_cuda(on_gpu, np.ones((12, 4), np.float32))
        launch = fake.launches[-1]
        assert pointers <= set(launch["params"])
        assert len(launch["buffers"]) == before + 2  # B's copy and the result: A not copied
        assert len(fake.live) == 3  # A's buffers stay on the GPU between calls
    host = dict(SparseTensor.from_scipy(A, on_gpu.layout).buffers())
    for name, _, length, ptr in on_gpu.buffers:
        assert bytes(fake.live[ptr]) == host[name].tobytes()
        assert length == host[name].size
    with pytest.raises(sparsecomp.SparsecompError, match="DeviceTensor of float32 in layout"):
        spmm_cuda(cuda.to_device(A, "csc"), np.ones((12, 4), np.float32))
    del on_gpu
    assert not fake.live


def test_device_tensors_are_read_mostly_on_the_gpu(spmm_cuda: sparsecomp.Executable) -> None:
    """A DeviceTensor's buffers are advised read-mostly and prefetched to the GPU (host
    reads of a grid size then copy a page instead of moving it), and the advice is taken
    back before the pool hands a block to anything else (a result the GPU writes)."""
    driver = FakeDriver()
    pool, hooks = cuda.device_pool.pooled(driver.driver.table)
    driver.driver = cuda.Driver(driver.driver.table, sm=80, name="fake",
                                keep=driver.keep + hooks, pool=pool)  # fmt: skip
    old = cuda.use_driver(driver.driver)
    try:
        A = sp.random(30, 12, density=0.3, format="csr", dtype=np.float32, random_state=9)
        on_gpu = cuda.to_device(A, spmm_cuda.spmm.signature.args[0].layout)
        buffers = {ptr: length * dtype.itemsize for _, dtype, length, ptr in on_gpu.buffers}
        advised = {(p, n) for call, p, n, a in driver.advice if call == "advise" and a == 1}
        fetched = {(p, n) for call, p, n, d in driver.advice if call == "prefetch" and d == 0}
        assert advised == fetched == set(buffers.items())
        assert driver.read_mostly == set(buffers)
        spmm_cuda(on_gpu, np.ones((12, 4), np.float32))
        result_blocks = {launch_ptr for launch_ptr in driver.launches[-1]["buffers"]}
        assert not (result_blocks - set(buffers)) & driver.read_mostly
        del on_gpu
        assert not driver.read_mostly  # unset before the blocks went back to the pool
        # the pool reuses them for the next call's copies and result, plain managed
        spmm_cuda(A, np.ones((12, 4), np.float32))
        assert not driver.read_mostly
    finally:
        cuda.use_driver(old)
        pool.release()


def test_a_refused_advice_leaves_plain_managed_memory(
    spmm_cuda: sparsecomp.Executable, caplog: pytest.LogCaptureFixture
) -> None:
    """The read-mostly advice is a hint: a driver that refuses it (CUresult 1) gets no
    more of it, says so once at INFO, and every call still runs."""
    import logging

    driver = FakeDriver()
    refused = []

    def refuse(ptr: int, nbytes: int, advice: int, device: int) -> int:
        refused.append(advice)
        return 1

    hook = cuda.MemAdvise(refuse)
    driver.keep.append(hook)
    driver.driver.table.mem_advise = hook
    old = cuda.use_driver(driver.driver)
    try:
        A = sp.random(30, 12, density=0.3, format="csr", dtype=np.float32, random_state=9)
        with caplog.at_level(logging.INFO, logger="sparsecomp"):
            first = cuda.to_device(A, spmm_cuda.spmm.signature.args[0].layout)
            second = cuda.to_device(A, spmm_cuda.spmm.signature.args[0].layout)
        assert refused == [1]  # asked once, for the first buffer; never again
        assert not driver.driver.advise
        assert any("device tensors stay plain managed memory" in r.getMessage()
                   for r in caplog.records)  # fmt: skip
        got = spmm_cuda(second, np.ones((12, 4), np.float32))
        assert got.shape == (30, 4)
        del first, second
        assert not driver.live
    finally:
        cuda.use_driver(old)


def test_a_table_without_advice_entries_still_runs(spmm_cuda: sparsecomp.Executable) -> None:
    """Tables filled by an older build (no cuMemAdvise entry) skip the advice."""
    driver = FakeDriver()
    driver.driver.table.mem_advise = cuda.MemAdvise()
    driver.driver.table.mem_prefetch_async = cuda.MemPrefetchAsync()
    old = cuda.use_driver(driver.driver)
    try:
        A = sp.random(30, 12, density=0.3, format="csr", dtype=np.float32, random_state=9)
        on_gpu = cuda.to_device(A, spmm_cuda.spmm.signature.args[0].layout)
        spmm_cuda(on_gpu, np.ones((12, 4), np.float32))
        assert not driver.advice
        del on_gpu
        assert not driver.live
    finally:
        cuda.use_driver(old)


def test_gpu_arrays_must_be_dense_and_contiguous(
    spmm_cuda: sparsecomp.Executable, fake: FakeDriver
) -> None:
    B = GpuArray(np.ones((4, 3), np.float32))
    with pytest.raises(sparsecomp.SparsecompError, match="GPU arrays are taken for dense"):
        spmm_cuda(B, B)
    B.__cuda_array_interface__["strides"] = (4, 16)
    with pytest.raises(sparsecomp.SparsecompError, match="C-contiguous"):
        spmm_cuda(sp.eye(4, format="csr", dtype=np.float32), B)
    assert not fake.launches
    assert not fake.live


def test_empty_grid_launches_nothing(spmm_cuda: sparsecomp.Executable, fake: FakeDriver) -> None:
    C = spmm_cuda(sp.csr_matrix((0, 5), dtype=np.float32), np.ones((5, 3), np.float32))
    assert C.shape == (0, 3)
    assert not fake.launches
    assert not fake.live


def test_saved_executable_runs_without_mlir(
    spmm_cuda: sparsecomp.Executable, tmp_path: Path
) -> None:
    from test_runtime_save import run_blocked

    saved = spmm_cuda.save(tmp_path / "spmm")
    names = sorted(p.name for p in saved.iterdir())
    assert {"kernel.so", "manifest.json", "spmm_kernel.ptx"} <= set(names)
    assert json.loads((saved / "manifest.json").read_text())["device"] == "cuda:sm_80"
    code = (
        "import numpy as np, scipy.sparse as sp, sparsecomp\n"
        "exe = sparsecomp.load(sys.argv[1])\n"
        "try:\n"
        "    exe(sp.eye(3, format='csr', dtype=np.float32), np.ones((3, 2), np.float32))\n"
        "except sparsecomp.SparsecompError as exc:\n"
        "    print(type(exc).__name__, exc.message)\n"
        "print(sorted(m for m in sys.modules if m == 'mlir' or m.startswith('mlir.')))\n"
    )
    proc = run_blocked(code, str(saved), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    if _driver_present():
        pytest.skip("a CUDA driver is present: the no-driver message does not apply")
    assert proc.stdout.startswith("CudaUnavailableError "), proc.stdout
    assert proc.stdout.splitlines()[-1] == "[]"


def _driver_present() -> bool:
    try:
        cuda._real_driver()
    except CudaUnavailableError:
        return False
    return True


def test_no_driver_says_so(spmm_cuda: sparsecomp.Executable) -> None:
    if _driver_present():
        pytest.skip("a CUDA driver is present")
    old = use_driver(None)
    try:
        with pytest.raises(CudaUnavailableError, match=r"cuda-bindings|no CUDA driver") as info:
            spmm_cuda(sp.eye(3, format="csr", dtype=np.float32), np.ones((3, 2), np.float32))
    finally:
        use_driver(old)
    assert "cuda-emu:sm_80" in (info.value.hint or "")


def test_without_the_package_it_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)  # import fails
    with pytest.raises(CudaUnavailableError, match="cuda-bindings") as info:
        cuda._real_driver()
    assert "sparsecomp[cuda]" in (info.value.hint or "")


def test_driver_calls_fit_the_installed_bindings() -> None:
    """The entry points are asked for with arguments cuda-bindings accepts (a str name was
    a TypeError on the first real GPU); without a driver the call fails past them."""
    cu = pytest.importorskip("cuda.bindings.driver")
    present = _driver_present()
    for _, symbol in cuda._ENTRY_POINTS:
        failure: Exception | None = None
        try:
            cuda.entry_point(cu, symbol)
        except TypeError:
            raise
        except Exception as exc:  # no driver here: the arguments were converted first
            failure = exc
        assert present == (failure is None), failure


def test_real_gpu_matches_scipy() -> None:
    """On a machine with a CUDA driver: SpMM and SpMV on the GPU equal scipy."""
    if not _driver_present():
        pytest.skip("no CUDA driver on this machine")
    rng = np.random.default_rng(0)
    A = sp.random(300, 200, density=0.05, format="csr", dtype=np.float32, random_state=3)
    B = rng.random((200, 40), dtype=np.float32)
    exe = sparsecomp.compile(SPMM, target=f"cuda:sm_{cuda.driver().sm}")
    np.testing.assert_allclose(exe(A, B), A @ B, rtol=1e-5, atol=1e-5)
    spmv = sparsecomp.compile(SPMV, target=f"cuda:sm_{cuda.driver().sm}")
    x = rng.random(200, dtype=np.float32)
    np.testing.assert_allclose(spmv(A, x), A @ x, rtol=1e-5, atol=1e-5)


def test_cli_compiles_for_cuda(tmp_path: Path) -> None:
    out = tmp_path / "spmm.kernel"
    proc = subprocess.run(
        [sys.executable, "-m", "sparsecomp.tools.compile", str(SPMM), "--target", "cuda:sm_90",
         "-o", str(out)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["device"] == "cuda:sm_90"
    assert ".target sm_90" in (out / "spmm_kernel.ptx").read_text()
