"""Print a :class:`~sparsecomp.fuzz.programs.Program` as an MLIR kernel ``@kernel``."""

from __future__ import annotations

from sparsecomp.fuzz.programs import Operand, Program

_FLOAT_OPS = {"add": "arith.addf", "sub": "arith.subf", "mul": "arith.mulf",
              "max": "arith.maximumf", "min": "arith.minimumf", "div": "arith.divf",
              "exp": "math.exp", "cos": "math.cos", "neg": "arith.negf"}  # fmt: skip
_INT_OPS = {"add": "arith.addi", "sub": "arith.subi", "mul": "arith.muli",
            "max": "arith.maxsi", "min": "arith.minsi"}  # fmt: skip


def tensor_type(prog: Program, op: Operand, static: bool | None = None) -> str:
    """``tensor<?x?xf32, #e>``; static shapes when ``static`` (default: the program's)."""
    static = prog.static if static is None else static
    dims = "".join(f"{prog.sizes[d] if static else '?'}x" for d in op.dims)
    enc = f", {op.enc.text}" if op.enc is not None else ""
    return f"tensor<{dims}{prog.dtype}{enc}>"


def _map(prog: Program, op: Operand) -> str:
    loops = ", ".join(f"d{i}" for i in range(len(prog.sizes)))
    return f"affine_map<({loops}) -> ({', '.join(f'd{d}' for d in op.dims)})>"


def _body(prog: Program, body: list[tuple[str, str, tuple[str, ...]]] | None = None) -> list[str]:
    t = prog.dtype
    lines = []
    for res, op, args in prog.body if body is None else body:
        a = ["%o_" if x == "o" else f"%{x}" for x in args]
        if op == "relu":
            zero = "0.0" if prog.is_float else "0"
            most = "arith.maximumf" if prog.is_float else "arith.maxsi"
            lines += [f"%{res}_z = arith.constant {zero} : {t}",
                      f"%{res} = {most} {a[0]}, %{res}_z : {t}"]  # fmt: skip
        elif op == "addc":
            one = "1.0" if prog.is_float else "1"
            add = "arith.addf" if prog.is_float else "arith.addi"
            lines += [f"%{res}_c = arith.constant {one} : {t}",
                      f"%{res} = {add} {a[0]}, %{res}_c : {t}"]  # fmt: skip
        elif op == "selgt":
            cmp = "arith.cmpf ogt" if prog.is_float else "arith.cmpi sgt"
            lines += [f"%{res}_p = {cmp}, {a[0]}, {a[1]} : {t}",
                      f"%{res} = arith.select %{res}_p, {a[0]}, {a[1]} : {t}"]  # fmt: skip
        else:
            name = (_FLOAT_OPS if prog.is_float else _INT_OPS)[op]
            lines.append(f"%{res} = {name} {', '.join(a)} : {t}")
    return lines


def _dim_source(prog: Program, loop: int) -> tuple[Operand, int]:
    for op in prog.ins:
        if loop in op.dims:
            return op, op.dims.index(loop)
    raise AssertionError("every loop indexes an input")


def _init(prog: Program) -> tuple[list[str], str]:
    """Lines that build the output's initial value and its SSA name."""
    out_t = tensor_type(prog, prog.out)
    if prog.init == "arg":
        return [], "%o"
    lines, dims = [], []
    if not prog.static:
        for k, loop in enumerate(prog.out.dims):
            src, pos = _dim_source(prog, loop)
            src_t = tensor_type(prog, src)
            lines += [f"%c{k} = arith.constant {pos} : index",
                      f"%n{k} = tensor.dim %{src.name}, %c{k} : {src_t}"]  # fmt: skip
            dims.append(f"%n{k}")
    lines.append(f"%e = tensor.empty({', '.join(dims)}) : {out_t}")
    if prog.init == "empty":
        return lines, "%e"
    zero = "0.0" if prog.is_float else "0"
    lines += [f"%z = arith.constant {zero} : {prog.dtype}",
              f"%f = linalg.fill ins(%z : {prog.dtype}) outs(%e : {out_t}) -> {out_t}"]  # fmt: skip
    return lines, "%f"


def kernel(prog: Program, static: bool | None = None) -> str:
    """The program as ``func.func @kernel(ins..., [%o]) -> out``."""
    saved, prog.static = prog.static, prog.static if static is None else static
    try:
        return _kernel(prog)
    finally:
        prog.static = saved


def _kernel(prog: Program) -> str:
    ins_t = [tensor_type(prog, op) for op in prog.ins]
    out_t = tensor_type(prog, prog.out)
    params = [f"%{op.name}: {t}" for op, t in zip(prog.ins, ins_t, strict=True)]
    if prog.init == "arg":
        params.append(f"%o: {out_t}")
    init_lines, init = _init(prog)
    ins = f"ins({', '.join('%' + op.name for op in prog.ins)} : {', '.join(ins_t)})"
    outs = f"outs({init} : {out_t})"
    if prog.named:
        op_lines = [f"%r = linalg.{prog.named} {ins} {outs} -> {out_t}"]
    else:
        maps = ", ".join(_map(prog, op) for op in [*prog.ins, prog.out])
        iters = ", ".join(f'"{it}"' for it in prog.iters)
        args = ", ".join(f"%x{i}: {prog.dtype}" for i in range(len(prog.ins)))
        body = "\n".join(f"    {ln}" for ln in _body(prog))
        op_lines = [
            f"%r = linalg.generic {{indexing_maps = [{maps}], iterator_types = [{iters}]}}",
            f"    {ins} {outs} {{",
            f"  ^bb0({args}, %o_: {prog.dtype}):",
            body,
            f"    linalg.yield %{prog.body[-1][0]} : {prog.dtype}",
            f"  }} -> {out_t}",
        ]
    result, after = "%r", []
    if prog.epilogue:
        result, after = "%g", _epilogue(prog, out_t)
    lines = [*init_lines, *op_lines, *after, f"return {result} : {out_t}"]
    text = "\n".join(f"  {ln}" for ln in lines)
    return f"func.func @kernel({', '.join(params)}) -> {out_t} {{\n{text}\n}}\n"


def _epilogue(prog: Program, out_t: str) -> list[str]:
    """``%g``: the epilogue, an elementwise ``linalg.generic`` over ``%r``."""
    rank = len(prog.out.dims)
    lines, dims = [], []
    if not prog.static:
        for k in range(rank):
            lines += [f"%gc{k} = arith.constant {k} : index",
                      f"%gn{k} = tensor.dim %r, %gc{k} : {out_t}"]  # fmt: skip
            dims.append(f"%gn{k}")
    loops = ", ".join(f"d{i}" for i in range(rank))
    ident = f"affine_map<({loops}) -> ({loops})>"
    iters = ", ".join(['"parallel"'] * rank)
    body = "\n".join(f"    {ln}" for ln in _body(prog, prog.epilogue))
    t = prog.dtype
    return [
        *lines,
        f"%ge = tensor.empty({', '.join(dims)}) : {out_t}",
        f"%g = linalg.generic {{indexing_maps = [{ident}, {ident}], iterator_types = [{iters}]}}",
        f"    ins(%r : {out_t}) outs(%ge : {out_t}) {{",
        f"  ^bb0(%y: {t}, %y_out: {t}):",
        body,
        f"    linalg.yield %{prog.epilogue[-1][0]} : {t}",
        f"  }} -> {out_t}",
    ]
