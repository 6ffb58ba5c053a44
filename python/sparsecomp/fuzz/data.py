"""Random input data for a program: small values, random sparsity, n:m patterns kept.

Float values are multiples of 1/4 in [-3, 3], integers in [-3, 3], so sums
and products of a few of them are exact and the comparison can be tight.
"""

from __future__ import annotations

import numpy as np

from sparsecomp.fuzz.programs import Operand, Program

NUMPY = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64}
DENSITIES = [0.0, 0.15, 0.4, 0.4, 0.8, 1.0]


def _values(
    rng: np.random.Generator, shape: tuple[int, ...], prog: Program, nonzero: bool
) -> np.ndarray:
    v: np.ndarray
    if prog.is_float:
        v = rng.integers(-12, 13, size=shape) * 0.25
        if prog.kind.endswith("-mul"):  # products of many values stay in range
            v = rng.integers(-6, 7, size=shape) * 0.25
    else:
        v = rng.integers(-3, 4, size=shape)
    if nonzero:
        v = np.where(v == 0, 1, v)
    return np.asarray(v).astype(NUMPY[prog.dtype])


def _keep_nm(rng: np.random.Generator, mask: np.ndarray, nm: tuple[int, int, int]) -> np.ndarray:
    """Clear entries so that at most n in every m consecutive along ``dim`` remain."""
    n, m, dim = nm
    moved = np.moveaxis(mask, dim, -1).copy()
    for start in range(0, moved.shape[-1], m):
        group = moved[..., start : start + m]
        for idx in np.ndindex(group.shape[:-1]):
            on = np.flatnonzero(group[idx])
            if len(on) > n:
                group[idx][rng.choice(on, len(on) - n, replace=False)] = False
    return np.moveaxis(moved, -1, dim)


def operand_data(rng: np.random.Generator, prog: Program, op: Operand) -> np.ndarray:
    shape = prog.shape(op)
    values = _values(rng, shape, prog, nonzero=op.nonzero or op.enc is not None)
    if op.enc is None:
        return values
    density = DENSITIES[int(rng.integers(len(DENSITIES)))]
    mask = rng.random(shape) < density
    if op.enc.nm is not None:
        mask = _keep_nm(rng, mask, op.enc.nm)
    return np.where(mask, values, np.zeros_like(values))


def inputs(rng: np.random.Generator, prog: Program) -> dict[str, np.ndarray]:
    """Dense arrays of every argument (``o`` too when the output is an argument)."""
    arrays = {op.name: operand_data(rng, prog, op) for op in prog.ins}
    if prog.init == "arg":
        arrays["o"] = operand_data(rng, prog, prog.out)
    return arrays
