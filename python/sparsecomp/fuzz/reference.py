"""The numpy reference: ``linalg.generic`` semantics over dense arrays.

Parallel loops are vectorized; reduction points are visited one at a time in
lexicographic order, each updating the output as the body says (so bodies
that read the output mean what linalg means); an epilogue then applies to
the whole result. Implicit zeros of sparse
operands are zeros. A sparse output built from ``tensor.empty`` starts at 0.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from sparsecomp.fuzz.data import NUMPY
from sparsecomp.fuzz.programs import Program


def _apply(op: str, args: list[np.ndarray], dt: type) -> np.ndarray:
    a = args[0]
    if op == "add":
        return a + args[1]
    if op == "sub":
        return a - args[1]
    if op == "mul":
        return a * args[1]
    if op == "div":
        return a / args[1]
    if op == "max":
        return np.maximum(a, args[1])
    if op == "min":
        return np.minimum(a, args[1])
    if op == "selgt":
        return np.where(a > args[1], a, args[1])
    if op == "exp":
        return np.exp(a)
    if op == "cos":
        return np.cos(a)
    if op == "neg":
        return -a
    if op == "addc":
        return a + dt(1)
    if op == "relu":
        return np.maximum(a, dt(0))
    raise AssertionError(op)


def _body(prog: Program, env: dict[str, np.ndarray]) -> np.ndarray:
    dt = NUMPY[prog.dtype]
    for res, op, args in prog.body:
        env[res] = np.asarray(_apply(op, [env[x] for x in args], dt)).astype(dt)
    return env[prog.body[-1][0]]


def evaluate(prog: Program, arrays: dict[str, np.ndarray]) -> np.ndarray:
    """The expected result of ``@kernel`` on dense ``arrays``."""
    dt = NUMPY[prog.dtype]
    shape = prog.shape(prog.out)
    out = arrays["o"].copy() if prog.init == "arg" else np.zeros(shape, dt)
    par = [d for d, it in enumerate(prog.iters) if it == "parallel"]
    red = [d for d, it in enumerate(prog.iters) if it == "reduction"]
    assert list(prog.out.dims) == par, "outputs are indexed by the parallel loops in order"
    grid = np.indices([prog.sizes[d] for d in par], sparse=True) if par else []
    idx: dict[int, Any] = {d: grid[k] for k, d in enumerate(par)}
    with np.errstate(all="ignore"):
        for point in itertools.product(*(range(prog.sizes[d]) for d in red)):
            idx.update(zip(red, point, strict=True))
            env = {f"x{i}": _gather(arrays[op.name], op.dims, idx) for i, op in enumerate(prog.ins)}
            env["o"] = out[tuple(idx[d] for d in prog.out.dims)] if par else out[()]
            value = _body(prog, env)
            if par:
                out[...] = np.broadcast_to(value, shape)
            else:
                out[()] = value
        if prog.epilogue:  # elementwise, on the whole result
            env = {"y": out}
            for res, op, args in prog.epilogue:
                env[res] = np.asarray(_apply(op, [env[x] for x in args], dt)).astype(dt)
            out = np.asarray(env[prog.epilogue[-1][0]])
    return out


def _gather(array: np.ndarray, dims: tuple[int, ...], idx: dict[int, Any]) -> np.ndarray:
    return array[tuple(idx[d] for d in dims)] if dims else array[()]
