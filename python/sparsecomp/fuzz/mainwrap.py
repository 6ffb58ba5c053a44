"""A ``main()`` around the kernel for ``mlir-runner``, and reading back what it prints.

``main`` builds each argument from a dense constant (``sparse_tensor.convert``
for ``#sparse_tensor`` types, ``sparse_iter.set_encoding`` for
``#sparse_iter`` ones), calls the kernel with static shapes, converts a
sparse result to dense and prints every element with ``vector.print`` in
loops (no external print functions, any shape including empty and 0-d).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from sparsecomp.fuzz.emit import kernel, tensor_type
from sparsecomp.fuzz.programs import Operand, Program


def _literal(array: np.ndarray, is_float: bool) -> str:
    if array.size == 0:  # a splat: MLIR infers [0] for "[]" whatever the rank
        return _scalar(0, is_float)
    if array.ndim == 0:
        return _scalar(array[()], is_float)
    return "[" + ", ".join(_literal(a, is_float) for a in array) + "]"


def _scalar(v: Any, is_float: bool) -> str:
    return repr(float(v)) if is_float else str(int(v))


def _encode(prog: Program, op: Operand, src: str, dst: str) -> list[str]:
    dense_t = tensor_type(prog, Operand(op.name, op.dims), static=True)
    t = tensor_type(prog, op, static=True)
    if op.enc is None:
        return []
    if op.enc.upstream:
        return [f"{dst} = sparse_tensor.convert {src} : {dense_t} to {t}"]
    return [f'{dst} = "sparse_iter.set_encoding"({src}) : ({dense_t}) -> {t}']


def _decode(prog: Program, src: str, dst: str) -> list[str]:
    op = prog.out
    dense_t = tensor_type(prog, Operand(op.name, op.dims), static=True)
    t = tensor_type(prog, op, static=True)
    if op.enc is None:
        return []
    if op.enc.upstream:
        return [f"{dst} = sparse_tensor.convert {src} : {t} to {dense_t}"]
    return [f'{dst} = "sparse_iter.unset_encoding"({src}) : ({t}) -> {dense_t}']


def main_program(prog: Program, arrays: dict[str, np.ndarray]) -> str:
    """The static-shape kernel plus ``main()`` that runs it on ``arrays`` and prints."""
    lines, args, types = [], [], []
    params = [*prog.ins, *([prog.out] if prog.init == "arg" else [])]
    for op in params:
        dense_t = tensor_type(prog, Operand(op.name, op.dims), static=True)
        lit = _literal(arrays[op.name], prog.is_float)
        lines.append(f"%{op.name}_d = arith.constant dense<{lit}> : {dense_t}")
        enc = _encode(prog, op, f"%{op.name}_d", f"%{op.name}")
        lines += enc
        args.append(f"%{op.name}" if enc else f"%{op.name}_d")
        types.append(tensor_type(prog, op, static=True))
    out_t = tensor_type(prog, prog.out, static=True)
    lines.append(f"%r = call @kernel({', '.join(args)}) : ({', '.join(types)}) -> {out_t}")
    dec = _decode(prog, "%r", "%rd")
    lines += dec
    lines += _print_loops(prog, "%rd" if dec else "%r")
    body = "\n".join(f"  {ln}" for ln in lines)
    return f"{kernel(prog, static=True)}\nfunc.func @main() {{\n{body}\n}}\n"


def _print_loops(prog: Program, value: str) -> list[str]:
    """``vector.print`` of every element in row-major order, after a marker line."""
    shape = prog.shape(prog.out)
    dense_t = tensor_type(prog, Operand("o", prog.out.dims), static=True)
    lines = [f'vector.print str "{MARKER}\\n"', "%p_zero = arith.constant 0 : index",
             "%p_one = arith.constant 1 : index"]  # fmt: skip
    ivs = []
    for k, size in enumerate(shape):
        lines += [f"%p_n{k} = arith.constant {size} : index",
                  f"scf.for %p_i{k} = %p_zero to %p_n{k} step %p_one {{"]  # fmt: skip
        ivs.append(f"%p_i{k}")
    lines += [f"%p_v = tensor.extract {value}[{', '.join(ivs)}] : {dense_t}",
              f"vector.print %p_v : {prog.dtype}"]  # fmt: skip
    lines += ["}"] * len(shape)
    return [*lines, "return"]


MARKER = "FUZZ-RESULT"
_NUMBER = re.compile(r"^\s*(-?(?:nan|inf|\d+(?:\.\d*)?(?:e[+-]?\d+)?))\s*$", re.IGNORECASE)


def parse_printed(text: str, shape: tuple[int, ...]) -> np.ndarray | None:
    """The elements printed after the marker as an array of ``shape`` (None: not that)."""
    if MARKER not in text:
        return None
    values = []
    for line in text.split(MARKER, 1)[1].splitlines():
        m = _NUMBER.match(line)
        if m:
            values.append(float(m.group(1)))
        elif line.strip():
            return None
    if len(values) != int(np.prod(shape)):
        return None
    return np.array(values, dtype=np.float64).reshape(shape)
