"""Command-line tools whose reader goes away early (``sparsecomp-opt --list-passes | head``).

Python turns the closed pipe into ``BrokenPipeError`` at the next write or
at the final flush, which printed a traceback after the output the reader
wanted. :func:`run_tool` ends the tool quietly instead, with the exit status
a C tool killed by SIGPIPE has (141), as ``mlir-opt`` and ``cat`` do.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: 128 + SIGPIPE: what a shell reports for a writer whose reader went away.
BROKEN_PIPE_STATUS = 141


#: The exit status of a tool stopped by Ctrl-C (128 + SIGINT, as shells report it).
INTERRUPTED_STATUS = 130


def run_tool(body: Callable[[], int]) -> int:
    """``body()``'s exit status, or :data:`BROKEN_PIPE_STATUS` if standard output's
    reader closed the pipe (no traceback, nothing more written); 130 on Ctrl-C (no
    traceback either)."""
    try:
        status = body()
        sys.stdout.flush()  # a closed pipe shows here, not at the interpreter's exit
        return status
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return INTERRUPTED_STATUS
    except BrokenPipeError:
        # The interpreter flushes stdout again at exit: point it at /dev/null first.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return BROKEN_PIPE_STATUS


def source_of(argument: str) -> Any:
    """What a tool's input argument names: a file (a ``Path``, so that a mistyped name
    is "cannot read prog", not MLIR text that does not parse), or standard input's
    text for ``-``."""
    if argument == "-":
        return sys.stdin.read()
    return Path(argument)
