"""Helpers around native (C++) code that writes to the process's stderr."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator


class CapturedText:
    """Text written to file descriptor 2 inside :func:`capture_native_stderr`."""

    def __init__(self) -> None:
        self._text = ""

    def text(self) -> str:
        return self._text


@contextlib.contextmanager
def capture_native_stderr() -> Iterator[CapturedText]:
    """Redirect fd 2 (LLVM's ``errs()``) to a buffer for the duration of the block."""
    captured = CapturedText()
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield captured
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            captured._text = tmp.read().decode(errors="replace")
