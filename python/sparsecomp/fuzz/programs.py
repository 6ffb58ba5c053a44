"""Random kernels: one ``linalg.generic`` (sometimes a named op) per program,
sometimes followed by an elementwise one on its dense result (an *epilogue*,
which the compiler may apply as the first op stores its output).

A :class:`Program` is a small model that :mod:`.emit` prints as MLIR and
:mod:`.reference` evaluates with numpy, so both read the same structure:
loop sizes and iterator types, operands with their loop indices (a
projected permutation) and encodings, and a body of scalar ops over the
block arguments (``x0``, ``x1``, ... for the inputs, ``o`` for the output).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sparsecomp.fuzz.encodings import Encoding, random_encoding

DTYPES = ["f32", "f32", "f64", "f64", "i32", "i64", "f16"]
SIZES = [0, 1, 1, 2, 3, 3, 4, 5, 6, 7, 8, 9, 12, 16]
UNARY_F = ["neg", "exp", "cos", "addc", "sq"]
UNARY_I = ["addc", "sq"]
BINARY_F = ["add", "sub", "mul", "mul", "max", "min", "selgt", "div"]
BINARY_I = ["add", "sub", "mul", "mul", "max", "min", "selgt"]
COMBINE = ["add", "add", "add", "max", "min", "mul"]
#: unary ops of an epilogue (``relu``: the larger of the value and zero)
EPILOGUE_F = ["relu", "relu", "neg", "addc", "sq", "exp", "cos"]
EPILOGUE_I = ["relu", "addc", "sq"]


@dataclass
class Operand:
    """One operand: the loops it is indexed by and its encoding (None: dense)."""

    name: str
    dims: tuple[int, ...]
    enc: Encoding | None = None
    nonzero: bool = False  # a divisor: data without zeros


@dataclass
class Program:
    kind: str
    dtype: str
    sizes: list[int]
    iters: list[str]
    ins: list[Operand]
    out: Operand
    init: str  # "arg" (a dense argument), "zeros" (empty + fill), "empty" (sparse)
    body: list[tuple[str, str, tuple[str, ...]]] = field(default_factory=list)
    static: bool = False
    named: str = ""  # "matvec" / "matmul": printed as the named op
    #: an elementwise op on the (dense) result: its body over ``y``, as ``body``
    epilogue: list[tuple[str, str, tuple[str, ...]]] = field(default_factory=list)

    @property
    def is_float(self) -> bool:
        return self.dtype.startswith("f")

    def shape(self, op: Operand) -> tuple[int, ...]:
        return tuple(self.sizes[d] for d in op.dims)

    @property
    def encodings(self) -> list[Encoding]:
        return [o.enc for o in [*self.ins, self.out] if o.enc is not None]

    def describe(self) -> str:
        encs = ",".join(e.label for e in self.encodings)
        body = "; ".join(f"{r}={op}({','.join(a)})" for r, op, a in self.body)
        sizes = "x".join(map(str, self.sizes))
        after = "; ".join(f"{r}={op}({','.join(a)})" for r, op, a in self.epilogue)
        then = f" then [{after}]" if after else ""
        return f"{self.kind} {self.dtype} {sizes} init={self.init} [{body}]{then} {encs}"


class _Gen:
    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.body: list[tuple[str, str, tuple[str, ...]]] = []

    def pick(self, options: list[str]) -> str:
        return options[int(self.rng.integers(len(options)))]

    def emit(self, op: str, *args: str) -> str:
        name = f"v{len(self.body)}"
        self.body.append((name, op, args))
        return name


def generate(rng: np.random.Generator) -> Program:
    """One random program; every choice comes from ``rng``."""
    g = _Gen(rng)
    dtype = g.pick(DTYPES)
    family = g.pick(["st", "si"])
    kind = g.pick(["ew1", "ew2", "ew2", "reduce", "reduce", "matvec", "matmul", "matmul", "sddmm"])
    prog = {"ew1": _ew, "ew2": _ew, "reduce": _reduce, "matvec": _matvec,
            "matmul": _matmul, "sddmm": _sddmm}[kind](g, kind, dtype, family)  # fmt: skip
    prog.body = g.body
    prog.static = bool(rng.random() < 0.3)
    if prog.init != "empty" and rng.random() < 0.3:  # drawn last: older seeds keep their programs
        prog.epilogue = _epilogue(g, dtype)
    return prog


def _epilogue(g: _Gen, dtype: str) -> list[tuple[str, str, tuple[str, ...]]]:
    ops = EPILOGUE_F if dtype.startswith("f") else EPILOGUE_I
    body: list[tuple[str, str, tuple[str, ...]]] = []
    value = "y"
    for k in range(1 + int(g.rng.random() < 0.4)):
        op = g.pick(ops)
        name = f"w{k}"
        body.append((name, "mul", (value, value)) if op == "sq" else (name, op, (value,)))
        value = name
    return body


def _sizes(g: _Gen, n: int) -> list[int]:
    return [int(g.pick([str(s) for s in SIZES])) for _ in range(n)]


def _sparse(g: _Gen, dims: tuple[int, ...], family: str, name: str) -> Operand:
    return Operand(name, dims, random_encoding(g.rng, len(dims), family))


def _maybe_t(g: _Gen, dims: tuple[int, int]) -> tuple[int, int]:
    return dims if g.rng.random() < 0.75 else (dims[1], dims[0])


def _output(g: _Gen, dims: tuple[int, ...], family: str, sparse_ok: bool) -> tuple[Operand, str]:
    if sparse_ok and len(dims) >= 1 and g.rng.random() < 0.35:
        return Operand("o", dims, random_encoding(g.rng, len(dims), family, output=True)), "empty"
    return Operand("o", dims), g.pick(["arg", "arg", "zeros"])


def _unary(g: _Gen, dtype: str, x: str) -> str:
    op = g.pick(UNARY_F if dtype.startswith("f") else UNARY_I)
    return g.emit("mul", x, x) if op == "sq" else g.emit(op, x)


def _ew(g: _Gen, kind: str, dtype: str, family: str) -> Program:
    rank = 1 if g.rng.random() < 0.2 else 2
    loops = tuple(range(rank))
    a = _sparse(g, _maybe_t(g, loops) if rank == 2 else loops, family, "a")  # type: ignore[arg-type]
    ins = [a]
    if kind == "ew1":
        v = _unary(g, dtype, "x0")
    else:
        b_dims = _maybe_t(g, loops) if rank == 2 else loops  # type: ignore[arg-type]
        op = g.pick(BINARY_F if dtype.startswith("f") else BINARY_I)
        dense_b = op == "div" or g.rng.random() < 0.4
        b = Operand("b", b_dims, nonzero=op == "div")
        b = b if dense_b else _sparse(g, b_dims, family, "b")
        ins.append(b)
        v = g.emit("selgt", "x0", "x1") if op == "selgt" else g.emit(op, "x0", "x1")
        if g.rng.random() < 0.25:
            v = _unary(g, dtype, v)
    out, init = _output(g, loops, family, sparse_ok=True)
    if init == "arg" and g.rng.random() < 0.3:  # bodies that read the output
        v = g.emit(g.pick(["add", "mul", "max"]), "o", v)
    return Program(kind, dtype, _sizes(g, rank), ["parallel"] * rank, ins, out, init)


def _reduce(g: _Gen, kind: str, dtype: str, family: str) -> Program:
    over = g.pick(["rows", "cols", "all"])
    a = _sparse(g, _maybe_t(g, (0, 1)), family, "a")
    comb = g.pick(COMBINE)
    v = "x0" if g.rng.random() < 0.6 else _unary(g, dtype, "x0")
    g.emit(comb, "o", v)
    out_dims: tuple[int, ...] = ()
    if over == "all":
        iters = ["reduction", "reduction"]
    elif over == "rows":  # out(i) = reduce_j a(i, j)
        iters, out_dims = ["parallel", "reduction"], (0,)
    else:  # out(j) = reduce_i a(i, j): loop 0 is j
        iters, out_dims = ["parallel", "reduction"], (0,)
        a.dims = (a.dims[1], a.dims[0])
    out, init = _output(g, out_dims, family, sparse_ok=False)
    return Program(f"reduce-{over}-{comb}", dtype, _sizes(g, 2), iters, [a], out, init)


def _matvec(g: _Gen, kind: str, dtype: str, family: str) -> Program:
    a = _sparse(g, _maybe_t(g, (0, 1)), family, "a")
    x = Operand("x", (1,)) if g.rng.random() < 0.8 else _sparse(g, (1,), family, "x")
    comb = g.pick(["add", "add", "add", "max"])
    g.emit(comb, "o", g.emit("mul", "x0", "x1"))
    out, init = _output(g, (0,), family, sparse_ok=False)
    named = "matvec" if comb == "add" and a.dims == (0, 1) and g.rng.random() < 0.3 else ""
    iters = ["parallel", "reduction"]
    return Program(kind, dtype, _sizes(g, 2), iters, [a, x], out, init, named=named)


def _matmul(g: _Gen, kind: str, dtype: str, family: str) -> Program:
    a = _sparse(g, _maybe_t(g, (0, 2)), family, "a")
    b_dims = _maybe_t(g, (2, 1))
    b = _sparse(g, b_dims, family, "b") if g.rng.random() < 0.4 else Operand("b", b_dims)
    g.emit("add", "o", g.emit("mul", "x0", "x1"))
    out, init = _output(g, (0, 1), family, sparse_ok=True)
    std = a.dims == (0, 2) and b.dims == (2, 1)
    named = "matmul" if std and g.rng.random() < 0.3 else ""
    iters = ["parallel", "parallel", "reduction"]
    return Program(kind, dtype, _sizes(g, 3), iters, [a, b], out, init, named=named)


def _sddmm(g: _Gen, kind: str, dtype: str, family: str) -> Program:
    s = _sparse(g, (0, 1), family, "s")
    a, b = Operand("a", (0, 2)), Operand("b", _maybe_t(g, (2, 1)))
    p = g.emit("mul", "x1", "x2")
    g.emit("add", "o", g.emit("mul", "x0", p) if g.rng.random() < 0.5 else g.emit("mul", p, "x0"))
    out, init = _output(g, (0, 1), family, sparse_ok=True)
    iters = ["parallel", "parallel", "reduction"]
    return Program(kind, dtype, _sizes(g, 3), iters, [s, a, b], out, init)
