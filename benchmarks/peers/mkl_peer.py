"""Intel oneMKL's sparse BLAS, two ways: as ``sparse_dot_mkl`` calls it, and optimized.

* ``mkl`` (naive): ``sparse_dot_mkl.dot_product_mkl(A, x)`` as a new user
  calls it (``pip install mkl sparse-dot-mkl``). Each call builds MKL's
  handle of A, computes and frees it.
* ``mkl-opt``: MKL's inspector-executor API as its documentation advises
  for repeated calls, through ``ctypes`` on the same ``libmkl_rt``. The handle
  (``mkl_sparse_s_create_csr`` over A's own arrays, LP64) is created once per
  case, with the hint of the operation and its calls
  (``mkl_sparse_set_mv_hint`` / ``mkl_sparse_set_mm_hint``, row-major B,
  ``mkl_sparse_set_memory_hint(SPARSE_MEMORY_AGGRESSIVE)``), then
  ``mkl_sparse_optimize``; untimed, as the other peers' packing is. A call
  is ``mkl_sparse_s_mv`` / ``mkl_sparse_s_mm`` into a preallocated result.
  SpGEMM: ``mkl_sparse_spmm`` of the optimized handle with itself (what
  ``dot_product_mkl`` calls, without making the handle) and
  ``mkl_sparse_s_export_csr`` (pointers into MKL's result, no copy); rows
  are left in MKL's order, as scipy's are (``mkl_sparse_sp2m`` then
  ``mkl_sparse_order`` measured 1.5-4x slower on the real matrices; the product
  then ``mkl_sparse_order``, ``mkl-opt-sorted``, 1.3-9x slower). The
  previous call's result is freed at the start of the next.
* ``mkl-opt-sorted``: SpGEMM only, ``mkl-opt``'s product followed by
  ``mkl_sparse_order`` (each row's columns in order), the ordered result
  that ``sparsecomp``'s SpGEMM kernel returns (``sparsecomp-unsorted`` is
  the like of ``mkl-opt``).

MKL's C sparse BLAS has no SDDMM (sampled dense-dense product): every form
show n/a. Threads: MKL's default (its Intel OpenMP runtime, one thread per
core). Loading it needs ``libmkl_rt`` from the ``mkl`` wheel, found in the
environment's ``lib`` (``MKL_RT`` names it for ``sparse_dot_mkl``).
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from peers import Case, Peer, Run, Unavailable

# sparse_status_t, sparse_operation_t, ... (mkl_spblas.h)
_SUCCESS = 0
_INDEX_BASE_ZERO = 0
_NON_TRANSPOSE = 10
_MATRIX_GENERAL = 20
_FILL_LOWER = 40
_DIAG_NON_UNIT = 50
_ROW_MAJOR = 101
_MEMORY_AGGRESSIVE = 81
#: calls a case's hint announces (its timing makes at most about this many)
EXPECTED_CALLS = 1000


class _Descr(ctypes.Structure):
    """``struct matrix_descr`` (passed by value)."""

    _fields_ = [("type", ctypes.c_int), ("mode", ctypes.c_int), ("diag", ctypes.c_int)]


_GENERAL = _Descr(_MATRIX_GENERAL, _FILL_LOWER, _DIAG_NON_UNIT)
_P = ctypes.c_void_p


def _library_path() -> Path | None:
    """``libmkl_rt`` of the ``mkl`` wheel (in this environment's ``lib``), or None."""
    if "MKL_RT" in os.environ:
        return Path(os.environ["MKL_RT"])
    found = sorted(Path(sys.prefix, "lib").glob("libmkl_rt.so*"))
    return found[0] if found else None


def _load() -> tuple[Any, Any]:
    """``(libmkl_rt, sparse_dot_mkl)``; raises ImportError with the reason."""
    path = _library_path()
    if path is None:
        raise ImportError("mkl not installed (pip install -e '.[bench]')")
    os.environ.setdefault("MKL_RT", str(path))
    import sparse_dot_mkl

    return ctypes.CDLL(str(path)), sparse_dot_mkl


def _check(status: int, what: str) -> None:
    if status != _SUCCESS:
        raise Unavailable(f"{what} failed: sparse_status_t {status}")


class _Handle:
    """An MKL handle over a CSR matrix's own arrays (kept alive with it)."""

    def __init__(self, lib: Any, a: sp.csr_matrix) -> None:
        self.lib, self.a = lib, a
        self.handle = _P()
        if a.indptr.dtype != np.int32 or a.indices.dtype != np.int32:
            raise Unavailable("MKL's LP64 interface takes int32 indices")
        ptr = a.indptr.ctypes.data
        _check(
            lib.mkl_sparse_s_create_csr(
                ctypes.byref(self.handle), _INDEX_BASE_ZERO,
                ctypes.c_int(a.shape[0]), ctypes.c_int(a.shape[1]),
                _P(ptr), _P(ptr + 4), _P(a.indices.ctypes.data), _P(a.data.ctypes.data),
            ),
            "mkl_sparse_s_create_csr",
        )  # fmt: skip

    def close(self) -> None:
        if self.handle:
            self.lib.mkl_sparse_destroy(self.handle)
            self.handle = _P()


class MklPeer(Peer):
    """The three forms: ``optimized`` picks the inspector-executor one, ``ordered`` its
    SpGEMM with ordered rows (see the module)."""

    def __init__(self, optimized: bool, ordered: bool = False) -> None:
        super().__init__()
        self.name = "mkl-opt-sorted" if ordered else "mkl-opt" if optimized else "mkl"
        self.optimized = optimized or ordered
        self.ordered = ordered
        self.handle: _Handle | None = None  # the case's
        self.result: _P | None = None  # the last SpGEMM's
        try:
            self.lib, self.sdm = _load()
        except (ImportError, OSError) as e:
            self.lib = self.sdm = None
            self.about = f"not available: {str(e).splitlines()[0]}"
            return
        found = re.search(r"Version ([\d.]+)", self.sdm.get_version_string())
        version = found.group(1) if found else "?"
        threads = self.sdm.mkl_get_max_threads()
        how = (
            "inspector-executor: a handle per case with mv/mm hints, aggressive memory "
            "and mkl_sparse_optimize (untimed), then mkl_sparse_s_mv / s_mm; SpGEMM "
            "mkl_sparse_spmm + export_csr (rows unsorted)"
            if optimized
            else "sparse_dot_mkl.dot_product_mkl (a handle made and freed each call)"
        )
        if ordered:
            how = "SpGEMM only: mkl_sparse_spmm of an optimized handle, then mkl_sparse_order"
        self.about = f"oneMKL {version}, {threads} threads; {how}; no SDDMM in MKL"

    def close(self) -> None:
        self._free_result()
        if self.handle is not None:
            self.handle.close()
            self.handle = None

    def _free_result(self) -> None:
        if self.result is not None:
            self.lib.mkl_sparse_destroy(self.result)
            self.result = None

    def prepare(self, case: Case) -> Run:
        if self.lib is None:
            raise Unavailable("mkl not installed")
        if case.op == "sddmm":
            raise Unavailable("MKL's sparse BLAS has no SDDMM")
        if self.ordered and case.op != "spgemm":
            raise Unavailable("the sorted form is SpGEMM's alone")
        self.close()  # the previous case's handles
        if not self.optimized:
            dot = self.sdm.dot_product_mkl
            if case.op == "spgemm":
                return lambda: dot(case.a, case.a)
            operand = case.dense[0]
            return lambda: dot(case.a, operand)
        h = self.handle = _Handle(self.lib, case.a)
        lib = self.lib
        _check(lib.mkl_sparse_set_memory_hint(h.handle, _MEMORY_AGGRESSIVE), "memory hint")
        if case.op == "spgemm":
            _check(lib.mkl_sparse_optimize(h.handle), "mkl_sparse_optimize")
            return lambda: self._spgemm(h)
        m = case.a.shape[0]
        if case.op == "spmv":
            x = np.ascontiguousarray(case.dense[0])
            y = np.empty(m, np.float32)
            _check(
                lib.mkl_sparse_set_mv_hint(h.handle, _NON_TRANSPOSE, _GENERAL, EXPECTED_CALLS),
                "mkl_sparse_set_mv_hint",
            )
            _check(lib.mkl_sparse_optimize(h.handle), "mkl_sparse_optimize")
            one, zero = ctypes.c_float(1.0), ctypes.c_float(0.0)
            args = (_NON_TRANSPOSE, one, h.handle, _GENERAL, _P(x.ctypes.data), zero)
            out = _P(y.ctypes.data)

            def spmv() -> np.ndarray:
                _check(lib.mkl_sparse_s_mv(*args, out), "mkl_sparse_s_mv")
                return y

            return spmv
        b = np.ascontiguousarray(case.dense[0])
        k = b.shape[1]
        c = np.empty((m, k), np.float32)
        _check(
            lib.mkl_sparse_set_mm_hint(
                h.handle, _NON_TRANSPOSE, _GENERAL, _ROW_MAJOR, k, EXPECTED_CALLS
            ),
            "mkl_sparse_set_mm_hint",
        )
        _check(lib.mkl_sparse_optimize(h.handle), "mkl_sparse_optimize")
        one, zero = ctypes.c_float(1.0), ctypes.c_float(0.0)
        head = (_NON_TRANSPOSE, one, h.handle, _GENERAL, _ROW_MAJOR, _P(b.ctypes.data), k, k)

        def spmm() -> np.ndarray:
            _check(lib.mkl_sparse_s_mm(*head, zero, _P(c.ctypes.data), k), "mkl_sparse_s_mm")
            return c

        return spmm

    def _spgemm(self, h: _Handle) -> sp.csr_matrix:
        """``A @ A`` as MKL's handle, exported (views of MKL's arrays)."""
        lib = self.lib
        self._free_result()
        c = _P()
        _check(
            lib.mkl_sparse_spmm(_NON_TRANSPOSE, h.handle, h.handle, ctypes.byref(c)),
            "mkl_sparse_spmm",
        )
        self.result = c
        if self.ordered:
            _check(lib.mkl_sparse_order(c), "mkl_sparse_order")
        base, rows, cols = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        start, end, idx = _P(), _P(), _P()
        val = _P()
        _check(
            lib.mkl_sparse_s_export_csr(
                c, ctypes.byref(base), ctypes.byref(rows), ctypes.byref(cols),
                ctypes.byref(start), ctypes.byref(end), ctypes.byref(idx), ctypes.byref(val),
            ),
            "mkl_sparse_s_export_csr",
        )  # fmt: skip
        return _Exported(rows.value, cols.value, start, end, idx, val)


class _Exported:
    """MKL's CSR result by its pointers; ``to_scipy()`` copies it into scipy (untimed)."""

    def __init__(self, rows: int, cols: int, start: Any, end: Any, idx: Any, val: Any) -> None:
        self.shape = (rows, cols)
        self.pointers = (start, end, idx, val)

    def to_scipy(self) -> sp.csr_matrix:
        start, end, idx, val = self.pointers
        rows = self.shape[0]
        lo = np.ctypeslib.as_array(ctypes.cast(start, ctypes.POINTER(ctypes.c_int)), (rows,))
        hi = np.ctypeslib.as_array(ctypes.cast(end, ctypes.POINTER(ctypes.c_int)), (rows,))
        nnz = int(hi[-1]) if rows else 0
        indptr = np.concatenate([lo[:1], hi]).astype(np.int32)
        cols_of = np.ctypeslib.as_array(ctypes.cast(idx, ctypes.POINTER(ctypes.c_int)), (nnz,))
        data = np.ctypeslib.as_array(ctypes.cast(val, ctypes.POINTER(ctypes.c_float)), (nnz,))
        return sp.csr_matrix((data.copy(), cols_of.copy(), indptr), shape=self.shape)
