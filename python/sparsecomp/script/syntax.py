"""The functions a ``@kernel`` body calls (``where``, ``exp``, ...), as importable names.

A kernel's body is read, never run: ``where(A[i, j] > t, A[i, j], 0.0)`` and
``exp(x[i])`` are kernel syntax, and a program that names them nowhere else
is correct Python that linters flag (``F821``). Importing them from
:mod:`sparsecomp.script` names them; called from Python, each says what it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sparsecomp.errors import SparsecompError


def _syntax(name: str, doc: str) -> Callable[..., Any]:
    """A stub named ``name``: kernel syntax that says so when Python calls it."""

    def outside(*args: Any) -> Any:
        raise SparsecompError(
            f"{name}() is kernel syntax: it is read inside a @sparsecomp.kernel body, "
            "not called from Python",
            hint=f"use numpy's np.{name} outside kernels",
        )

    outside.__name__ = outside.__qualname__ = name
    outside.__doc__ = doc
    return outside


where = _syntax("where", "``a`` where ``condition`` holds, else ``b`` (``arith.select``).")
exp = _syntax("exp", "``e ** x`` (``math.exp``).")
log = _syntax("log", "The natural logarithm (``math.log``).")
sqrt = _syntax("sqrt", "The square root (``math.sqrt``).")
rsqrt = _syntax("rsqrt", "``1 / sqrt(x)`` (``math.rsqrt``).")
tanh = _syntax("tanh", "The hyperbolic tangent (``math.tanh``).")
erf = _syntax("erf", "The error function (``math.erf``).")
sin = _syntax("sin", "The sine (``math.sin``).")
cos = _syntax("cos", "The cosine (``math.cos``).")
