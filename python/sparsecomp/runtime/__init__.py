"""Calling compiled kernels from numpy/scipy: ``load(dir) -> Executable`` (imports no MLIR).

:mod:`.executable` loads a kernel directory (``kernel.so`` + ``manifest.json``);
:mod:`.abi` reads each function's ABI; :mod:`.call` makes one call: the
arguments go through :mod:`.fastpath` when they are already what the ABI
wants, else through :mod:`.marshal`, which checks, converts and flattens
them into MLIR's C interface; :mod:`.results` turns results back into
arrays and SparseTensors; :mod:`.memref` holds the descriptor layout.
Executables built for ``cuda:sm_XX`` call through :mod:`.cuda` (the CUDA
driver via ``cuda-bindings``; GPU arrays in :mod:`.device_arrays`).
"""

from __future__ import annotations

from sparsecomp.runtime.executable import Executable, Function, UnknownFunctionError, load

__all__ = ["Executable", "Function", "UnknownFunctionError", "load"]
