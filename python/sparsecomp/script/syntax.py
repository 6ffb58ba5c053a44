"""The functions a ``@kernel`` body calls (``where``, ``exp``, ...), as importable names.

A kernel's body is read, never run: ``where(A[i, j] > t, A[i, j], 0.0)`` and
``exp(x[i])`` are kernel syntax, and a program that names them nowhere else
is correct Python that linters flag (``F821``). Importing them from
:mod:`sparsecomp.script` names them; called from Python, each says what it is.
"""

from __future__ import annotations

from typing import Any, NoReturn

from sparsecomp.errors import SparsecompError


def _outside(name: str) -> NoReturn:
    raise SparsecompError(
        f"{name}() is kernel syntax: it is read inside a @sparsecomp.kernel body, "
        "not called from Python",
        hint=f"use numpy's {'np.where' if name == 'where' else 'np.' + name} outside kernels",
    )


def where(condition: Any, a: Any, b: Any) -> Any:
    """``a`` where ``condition`` holds, else ``b`` (``arith.select``)."""
    _outside("where")


def exp(x: Any) -> Any:
    """``e ** x`` (``math.exp``)."""
    _outside("exp")


def log(x: Any) -> Any:
    """The natural logarithm (``math.log``)."""
    _outside("log")


def sqrt(x: Any) -> Any:
    """The square root (``math.sqrt``)."""
    _outside("sqrt")


def rsqrt(x: Any) -> Any:
    """``1 / sqrt(x)`` (``math.rsqrt``)."""
    _outside("rsqrt")


def tanh(x: Any) -> Any:
    """The hyperbolic tangent (``math.tanh``)."""
    _outside("tanh")


def erf(x: Any) -> Any:
    """The error function (``math.erf``)."""
    _outside("erf")


def sin(x: Any) -> Any:
    """The sine (``math.sin``)."""
    _outside("sin")


def cos(x: Any) -> Any:
    """The cosine (``math.cos``)."""
    _outside("cos")
