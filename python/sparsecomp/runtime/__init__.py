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

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sparsecomp.runtime.executable import Executable, Function, UnknownFunctionError, load

__all__ = ["Executable", "Function", "UnknownFunctionError", "load"]


def __getattr__(name: str) -> Any:
    """The package's names, from :mod:`.executable` on first use (PEP 562): a build
    imports :mod:`.libs`, :mod:`.loader` and :mod:`.plan` alone, and the compile
    daemon spent 110 ms importing the call path (numpy, scipy's readers) for them."""
    if name in __all__:
        from sparsecomp.runtime import executable

        return getattr(executable, name)
    raise AttributeError(f"module 'sparsecomp.runtime' has no attribute {name!r}")
