"""Calling compiled kernels from numpy/scipy: ``load(dir) -> Executable`` (imports no MLIR).

:mod:`.executable` loads a kernel directory (``kernel.so`` + ``manifest.json``);
:mod:`.abi` reads each function's ABI; :mod:`.marshal` checks and flattens
arguments into MLIR's C interface; :mod:`.results` turns results back into
arrays and SparseTensors; :mod:`.memref` holds the descriptor structs.
"""

from __future__ import annotations

from sparsecomp.runtime.executable import Executable, Function, UnknownFunctionError, load

__all__ = ["Executable", "Function", "UnknownFunctionError", "load"]
