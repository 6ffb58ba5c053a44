"""The command-line tools' entry points (``pyproject.toml``'s scripts).

Each imports its tool only after taking Ctrl-C over: interrupted while the
tool imports MLIR's bindings (the first 0.1-0.3 s), a ``KeyboardInterrupt``
raised inside the bindings' module initialization segfaulted
``sparsecomp-opt`` (status 139; ``python -c "from mlir import ir"`` does the
same) or printed an import traceback. Until the tool has imported, Ctrl-C
ends the process at once with "interrupted" and status 130, as
:func:`sparsecomp.tools.pipes.run_tool` does afterwards.
"""

from __future__ import annotations

import importlib
import os
import signal
from types import FrameType

from sparsecomp.tools.pipes import INTERRUPTED_STATUS


def _interrupted(signum: int, frame: FrameType | None) -> None:
    os.write(2, b"interrupted\n")
    os._exit(INTERRUPTED_STATUS)


def _launch(module: str) -> int:
    previous = signal.signal(signal.SIGINT, _interrupted)
    try:
        tool = importlib.import_module(module)
    finally:
        signal.signal(signal.SIGINT, previous)
    status: int = tool.main()
    return status


def opt() -> int:
    """``sparsecomp-opt`` (:mod:`sparsecomp.tools.opt`)."""
    return _launch("sparsecomp.tools.opt")


def compile() -> int:
    """``sparsecomp-compile`` (:mod:`sparsecomp.tools.compile`)."""
    return _launch("sparsecomp.tools.compile")


def run() -> int:
    """``sparsecomp-run`` (:mod:`sparsecomp.tools.run`)."""
    return _launch("sparsecomp.tools.run")
