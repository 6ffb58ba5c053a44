"""The compiler's back end: from an LLVM-dialect module to a loadable kernel.

:func:`build_shared_library` (:mod:`.aot`) compiles and links ``kernel.so``.
"""

from __future__ import annotations

from sparsecomp.compiler.aot import build_shared_library

__all__ = ["build_shared_library"]
