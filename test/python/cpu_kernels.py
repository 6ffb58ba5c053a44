"""MLIR sources of the CPU numerics tests, parameterized by layout and element type."""

from __future__ import annotations

import functools

#: The ``map = ...`` of each layout the tests use.
LAYOUTS = {
    "csr": "(i, j) -> (i : dense, j : compressed)",
    "csc": "(i, j) -> (j : dense, i : compressed)",
    "coo": "(i, j) -> (i : compressed(nonunique), j : singleton)",
    "dcsr": "(i, j) -> (i : compressed, j : compressed)",
    "ell": "(i, j) -> (i : dense, j : compressed_fixed)",
    "bsr:2x2": "(i, j) -> (i floordiv 2 : dense, j floordiv 2 : compressed, "
    "i mod 2 : dense, j mod 2 : dense)",
    # unit blocks: MLIR prints "j floordiv 1" as "j" and "j mod 1" as "0"
    "bsr:4x1": "(i, j) -> (i floordiv 4 : dense, j floordiv 1 : compressed, "
    "i mod 4 : dense, j mod 1 : dense)",
    "bsr:1x4": "(i, j) -> (i floordiv 1 : dense, j floordiv 4 : compressed, "
    "i mod 1 : dense, j mod 4 : dense)",
    "bsr:3x1": "(i, j) -> (i floordiv 3 : dense, j floordiv 1 : compressed, "
    "i mod 3 : dense, j mod 1 : dense)",
    "bsr:8x1": "(i, j) -> (i floordiv 8 : dense, j floordiv 1 : compressed, "
    "i mod 8 : dense, j mod 1 : dense)",
    "bsr:4x4": "(i, j) -> (i floordiv 4 : dense, j floordiv 4 : compressed, "
    "i mod 4 : dense, j mod 4 : dense)",
    "bsr:3x3": "(i, j) -> (i floordiv 3 : dense, j floordiv 3 : compressed, "
    "i mod 3 : dense, j mod 3 : dense)",
    "bsr:6x6": "(i, j) -> (i floordiv 6 : dense, j floordiv 6 : compressed, "
    "i mod 6 : dense, j mod 6 : dense)",
    "bsr:2x3": "(i, j) -> (i floordiv 2 : dense, j floordiv 3 : compressed, "
    "i mod 2 : dense, j mod 3 : dense)",
}


def layout_attr(name: str, width: int = 32, group: str = "", maps: dict | None = None) -> str:
    """``#sparse_iter.layout<...>`` of ``LAYOUTS[name]`` (or ``maps[name]``)."""
    group_text = f', indexGroup = "{group}"' if group else ""
    amap = (maps or LAYOUTS)[name]
    return (
        f"#sparse_iter.layout<{{map = {amap}, posWidth = {width}, crdWidth = {width}{group_text}}}>"
    )


def _arith(elt: str) -> tuple[str, str]:
    return ("arith.mulf", "arith.addf") if elt.startswith("f") else ("arith.muli", "arith.addi")


def spmv(layout: str, elt: str = "f32") -> str:
    mul, add = _arith(elt)
    return (
        f"""
#A = {layout_attr(layout)}
func.func @spmv(%A: tensor<?x?x{elt}, #A>, %x: tensor<?x{elt}>, %y: tensor<?x{elt}>) -> tensor<?x{elt}> {{
  %r = linalg.matvec ins(%A, %x : tensor<?x?x{elt}, #A>, tensor<?x{elt}>)
                     outs(%y : tensor<?x{elt}>) -> tensor<?x{elt}>
  return %r : tensor<?x{elt}>
}}
"""
        if elt.startswith("f")
        else _generic_spmv(layout, elt, mul, add)
    )


def _generic_spmv(layout: str, elt: str, mul: str, add: str) -> str:
    return f"""
#A = {layout_attr(layout)}
func.func @spmv(%A: tensor<?x?x{elt}, #A>, %x: tensor<?x{elt}>, %y: tensor<?x{elt}>) -> tensor<?x{elt}> {{
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,
                                         affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}}
    ins(%A, %x : tensor<?x?x{elt}, #A>, tensor<?x{elt}>) outs(%y : tensor<?x{elt}>) {{
  ^bb0(%a: {elt}, %b: {elt}, %o: {elt}):
    %m = {mul} %a, %b : {elt}
    %s = {add} %o, %m : {elt}
    linalg.yield %s : {elt}
  }} -> tensor<?x{elt}>
  return %r : tensor<?x{elt}>
}}
"""


def spmm(layout: str, elt: str = "f32") -> str:
    return f"""
#A = {layout_attr(layout)}
func.func @spmm(%A: tensor<?x?x{elt}, #A>, %B: tensor<?x?x{elt}>) -> tensor<?x?x{elt}> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : {elt}
  %m = tensor.dim %A, %c0 : tensor<?x?x{elt}, #A>
  %n = tensor.dim %B, %c1 : tensor<?x?x{elt}>
  %e = tensor.empty(%m, %n) : tensor<?x?x{elt}>
  %C = linalg.fill ins(%zero : {elt}) outs(%e : tensor<?x?x{elt}>) -> tensor<?x?x{elt}>
  %r = linalg.matmul ins(%A, %B : tensor<?x?x{elt}, #A>, tensor<?x?x{elt}>)
                     outs(%C : tensor<?x?x{elt}>) -> tensor<?x?x{elt}>
  return %r : tensor<?x?x{elt}>
}}
"""


def spmm_bias(layout: str, dims: str = "1", elt: str = "f32") -> str:
    """``C = A B + bias`` with ``bias`` broadcast along ``dims`` of ``C``
    (``"1"``: a bias per row, ``"0"``: per column), through ``linalg.broadcast``."""
    return f"""
#A = {layout_attr(layout)}
func.func @spmm_bias(%A: tensor<?x?x{elt}, #A>, %B: tensor<?x?x{elt}>,
                     %bias: tensor<?x{elt}>) -> tensor<?x?x{elt}> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %A, %c0 : tensor<?x?x{elt}, #A>
  %n = tensor.dim %B, %c1 : tensor<?x?x{elt}>
  %e = tensor.empty(%m, %n) : tensor<?x?x{elt}>
  %C = linalg.broadcast ins(%bias : tensor<?x{elt}>) outs(%e : tensor<?x?x{elt}>)
      dimensions = [{dims}]
  %r = linalg.matmul ins(%A, %B : tensor<?x?x{elt}, #A>, tensor<?x?x{elt}>)
                     outs(%C : tensor<?x?x{elt}>) -> tensor<?x?x{elt}>
  return %r : tensor<?x?x{elt}>
}}
"""


def linear(layout: str, bias: bool = False, elt: str = "f32") -> str:
    """A linear layer as torch holds it: ``Y = X A^T (+ bias)``, ``X`` (tokens x
    in) and ``Y`` (tokens x out) row-major: ``Y[j, i] += A[i, k] X[j, k]``."""
    start = (
        f"""%Y = linalg.broadcast ins(%bias : tensor<?x{elt}>) outs(%e : tensor<?x?x{elt}>)
      dimensions = [0]"""
        if bias
        else f"""%zero = arith.constant 0.0 : {elt}
  %Y = linalg.fill ins(%zero : {elt}) outs(%e : tensor<?x?x{elt}>) -> tensor<?x?x{elt}>"""
    )
    extra = f", %bias: tensor<?x{elt}>" if bias else ""
    return f"""
#A = {layout_attr(layout)}
func.func @linear(%A: tensor<?x?x{elt}, #A>, %X: tensor<?x?x{elt}>{extra}) -> tensor<?x?x{elt}> {{
  %c0 = arith.constant 0 : index
  %m = tensor.dim %A, %c0 : tensor<?x?x{elt}, #A>
  %n = tensor.dim %X, %c0 : tensor<?x?x{elt}>
  %e = tensor.empty(%n, %m) : tensor<?x?x{elt}>
  {start}
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j, k) -> (i, k)>,
                                        affine_map<(i, j, k) -> (j, k)>,
                                        affine_map<(i, j, k) -> (j, i)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}}
      ins(%A, %X : tensor<?x?x{elt}, #A>, tensor<?x?x{elt}>) outs(%Y : tensor<?x?x{elt}>) {{
    ^bb0(%a: {elt}, %x: {elt}, %acc: {elt}):
      %p = arith.mulf %a, %x : {elt}
      %s = arith.addf %acc, %p : {elt}
      linalg.yield %s : {elt}
  }} -> tensor<?x?x{elt}>
  return %r : tensor<?x?x{elt}>
}}
"""


def spmm_transpose_b(layout: str, elt: str = "f32") -> str:
    """``C = A B^T`` written as upstream MLIR writes a transposed operand:
    ``linalg.matmul`` with ``indexing_maps``, ``B`` given ``n x k``."""
    return f"""
#A = {layout_attr(layout)}
func.func @spmm_transpose_b(%A: tensor<?x?x{elt}, #A>, %B: tensor<?x?x{elt}>) -> tensor<?x?x{elt}> {{
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : {elt}
  %m = tensor.dim %A, %c0 : tensor<?x?x{elt}, #A>
  %n = tensor.dim %B, %c0 : tensor<?x?x{elt}>
  %e = tensor.empty(%m, %n) : tensor<?x?x{elt}>
  %C = linalg.fill ins(%zero : {elt}) outs(%e : tensor<?x?x{elt}>) -> tensor<?x?x{elt}>
  %r = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>,
                                      affine_map<(d0, d1, d2) -> (d1, d2)>,
                                      affine_map<(d0, d1, d2) -> (d0, d1)>]
                     ins(%A, %B : tensor<?x?x{elt}, #A>, tensor<?x?x{elt}>)
                     outs(%C : tensor<?x?x{elt}>) -> tensor<?x?x{elt}>
  return %r : tensor<?x?x{elt}>
}}
"""


def spmm_upstream(name: str = "spmm", elt: str = "f64") -> str:
    """SpMM as MLIR's own sparse tests write it: index-typed ``#sparse_tensor`` CSR,
    ``linalg.matmul``, ``C`` an outs operand the caller passes."""
    return f"""
#CSR = #sparse_tensor.encoding<{{ map = (i, j) -> (i : dense, j : compressed) }}>
func.func @{name}(%a: tensor<?x?x{elt}, #CSR>, %b: tensor<?x?x{elt}>,
    %c: tensor<?x?x{elt}>) -> tensor<?x?x{elt}> {{
  %0 = linalg.matmul ins(%a, %b : tensor<?x?x{elt}, #CSR>, tensor<?x?x{elt}>)
                     outs(%c : tensor<?x?x{elt}>) -> tensor<?x?x{elt}>
  return %0 : tensor<?x?x{elt}>
}}
"""


def sddmm(layout: str, elt: str = "f32") -> str:
    return f"""
#S = {layout_attr(layout)}
func.func @sddmm(%S: tensor<?x?x{elt}, #S>, %X: tensor<?x?x{elt}>, %Y: tensor<?x?x{elt}>) -> tensor<?x?x{elt}, #S> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %S, %c0 : tensor<?x?x{elt}, #S>
  %n = tensor.dim %S, %c1 : tensor<?x?x{elt}, #S>
  %e = tensor.empty(%m, %n) : tensor<?x?x{elt}, #S>
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j, k) -> (i, j)>, affine_map<(i, j, k) -> (i, k)>,
                                         affine_map<(i, j, k) -> (j, k)>, affine_map<(i, j, k) -> (i, j)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}}
    ins(%S, %X, %Y : tensor<?x?x{elt}, #S>, tensor<?x?x{elt}>, tensor<?x?x{elt}>) outs(%e : tensor<?x?x{elt}, #S>) {{
  ^bb0(%s: {elt}, %x: {elt}, %y: {elt}, %o: {elt}):
    %p = arith.mulf %x, %y : {elt}
    %q = arith.mulf %s, %p : {elt}
    %t = arith.addf %o, %q : {elt}
    linalg.yield %t : {elt}
  }} -> tensor<?x?x{elt}, #S>
  return %r : tensor<?x?x{elt}, #S>
}}
"""


def elementwise(layout: str, elt: str, sparse_out: bool) -> str:
    """``A .* D``: dense output, or a sparse output with A's structure."""
    out_ty = f"tensor<?x?x{elt}, #A>" if sparse_out else f"tensor<?x?x{elt}>"
    mul, _ = _arith(elt)
    return f"""
#A = {layout_attr(layout)}
func.func @emul(%A: tensor<?x?x{elt}, #A>, %D: tensor<?x?x{elt}>) -> {out_ty} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %A, %c0 : tensor<?x?x{elt}, #A>
  %n = tensor.dim %A, %c1 : tensor<?x?x{elt}, #A>
  %e = tensor.empty(%m, %n) : {out_ty}
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>,
                                         affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}}
    ins(%A, %D : tensor<?x?x{elt}, #A>, tensor<?x?x{elt}>) outs(%e : {out_ty}) {{
  ^bb0(%a: {elt}, %d: {elt}, %o: {elt}):
    %p = {mul} %a, %d : {elt}
    linalg.yield %p : {elt}
  }} -> {out_ty}
  return %r : {out_ty}
}}
"""


def add_same_structure(elt: str = "f32") -> str:
    """``A + B`` for two CSR matrices declared to share their index structure."""
    return f"""
#A = {layout_attr("csr", group="g")}
func.func @add(%A: tensor<?x?x{elt}, #A>, %B: tensor<?x?x{elt}, #A>) -> tensor<?x?x{elt}, #A> {{
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>,
                                         affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}}
    ins(%A, %B : tensor<?x?x{elt}, #A>, tensor<?x?x{elt}, #A>) outs(%A : tensor<?x?x{elt}, #A>) {{
  ^bb0(%a: {elt}, %b: {elt}, %o: {elt}):
    %s = arith.addf %a, %b : {elt}
    linalg.yield %s : {elt}
  }} -> tensor<?x?x{elt}, #A>
  return %r : tensor<?x?x{elt}, #A>
}}
"""


def reduce(layout: str, axis: int, elt: str = "f32") -> str:
    """Sum over ``axis`` (1: row sums, 0: column sums) into a zero-initialized vector."""
    out_map = "(i)" if axis == 1 else "(j)"
    iters = '["parallel", "reduction"]' if axis == 1 else '["reduction", "parallel"]'
    dim = 0 if axis == 1 else 1
    return f"""
#A = {layout_attr(layout)}
func.func @reduce(%A: tensor<?x?x{elt}, #A>) -> tensor<?x{elt}> {{
  %c = arith.constant {dim} : index
  %zero = arith.constant 0.0 : {elt}
  %n = tensor.dim %A, %c : tensor<?x?x{elt}, #A>
  %e = tensor.empty(%n) : tensor<?x{elt}>
  %z = linalg.fill ins(%zero : {elt}) outs(%e : tensor<?x{elt}>) -> tensor<?x{elt}>
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> {out_map}>],
                       iterator_types = {iters}}}
    ins(%A : tensor<?x?x{elt}, #A>) outs(%z : tensor<?x{elt}>) {{
  ^bb0(%a: {elt}, %o: {elt}):
    %s = arith.addf %o, %a : {elt}
    linalg.yield %s : {elt}
  }} -> tensor<?x{elt}>
  return %r : tensor<?x{elt}>
}}
"""


def batched_spmv(elt: str = "f32") -> str:
    """``y[b, i] = sum_j A[b, i, j] x[b, j]`` with A batched CSR (dense, dense, compressed)."""
    return f"""
#A = #sparse_iter.layout<{{map = (b, i, j) -> (b : dense, i : dense, j : compressed), posWidth = 32, crdWidth = 32}}>
func.func @bspmv(%A: tensor<?x?x?x{elt}, #A>, %x: tensor<?x?x{elt}>, %y: tensor<?x?x{elt}>) -> tensor<?x?x{elt}> {{
  %r = linalg.generic {{indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, j)>,
                                         affine_map<(b, i, j) -> (b, i)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}}
    ins(%A, %x : tensor<?x?x?x{elt}, #A>, tensor<?x?x{elt}>) outs(%y : tensor<?x?x{elt}>) {{
  ^bb0(%a: {elt}, %b: {elt}, %o: {elt}):
    %m = arith.mulf %a, %b : {elt}
    %s = arith.addf %o, %m : {elt}
    linalg.yield %s : {elt}
  }} -> tensor<?x?x{elt}>
  return %r : tensor<?x?x{elt}>
}}
"""


def _out_type(elt: str, sparse_out: str) -> str:
    return f"tensor<?x?x{elt}, #C>" if sparse_out else f"tensor<?x?x{elt}>"


def _out_attr(sparse_out: str) -> str:
    if sparse_out == "nonordered":
        return (
            "#C = #sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed(nonordered)), "
            "posWidth = 32, crdWidth = 32}>"
        )
    return f"#C = {layout_attr(sparse_out)}" if sparse_out else ""


def spgemm(elt: str = "f64", sparse_out: str = "csr", a: str = "csr", b: str = "csr") -> str:
    """``C = A @ B`` for two sparse matrices; C is sparse (new structure) or dense (C += A B)."""
    out_ty = _out_type(elt, sparse_out)
    mul, add = _arith(elt)
    init = (
        f"""%c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %A, %c0 : tensor<?x?x{elt}, #A>
  %n = tensor.dim %B, %c1 : tensor<?x?x{elt}, #B>
  %C = tensor.empty(%m, %n) : {out_ty}"""
        if sparse_out
        else ""
    )
    arg = "" if sparse_out else f", %C: {out_ty}"
    return f"""
#A = {layout_attr(a)}
#B = {layout_attr(b)}
{_out_attr(sparse_out)}
func.func @spgemm(%A: tensor<?x?x{elt}, #A>, %B: tensor<?x?x{elt}, #B>{arg}) -> {out_ty} {{
  {init}
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (k, j)>,
                                         affine_map<(i, j, k) -> (i, j)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}}
    ins(%A, %B : tensor<?x?x{elt}, #A>, tensor<?x?x{elt}, #B>) outs(%C : {out_ty}) {{
  ^bb0(%x: {elt}, %y: {elt}, %o: {elt}):
    %p = {mul} %x, %y : {elt}
    %s = {add} %o, %p : {elt}
    linalg.yield %s : {elt}
  }} -> {out_ty}
  return %r : {out_ty}
}}
"""


def merge(
    op: str, elt: str = "f32", sparse_out: str = "csr", a: str = "csr", b: str = "csr"
) -> str:
    """``A op B`` elementwise for two differently structured sparse matrices."""
    out_ty = _out_type(elt, sparse_out)
    kind = "f" if elt.startswith("f") else "i"
    return f"""
#A = {layout_attr(a)}
#B = {layout_attr(b)}
{_out_attr(sparse_out)}
func.func @merge(%A: tensor<?x?x{elt}, #A>, %B: tensor<?x?x{elt}, #B>) -> {out_ty} {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %A, %c0 : tensor<?x?x{elt}, #A>
  %n = tensor.dim %A, %c1 : tensor<?x?x{elt}, #A>
  %C = tensor.empty(%m, %n) : {out_ty}
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>,
                                         affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}}
    ins(%A, %B : tensor<?x?x{elt}, #A>, tensor<?x?x{elt}, #B>) outs(%C : {out_ty}) {{
  ^bb0(%x: {elt}, %y: {elt}, %o: {elt}):
    %s = arith.{op}{kind} %x, %y : {elt}
    linalg.yield %s : {elt}
  }} -> {out_ty}
  return %r : {out_ty}
}}
"""


def sparsify(sparsifier: str, elt: str = "f32", fused: bool = True) -> str:
    """``sparsify(x + b)`` (fused elementwise producer) or ``sparsify(x)`` into CSR."""
    add = "arith.addf" if elt.startswith("f") else "arith.addi"
    attr = f"#sparse_iter.sparsifier<{sparsifier}>"
    if not fused:
        return f"""
#C = {layout_attr("csr")}
func.func @sparsify(%x: tensor<?x?x{elt}>) -> tensor<?x?x{elt}, #C> {{
  %s = "sparse_iter.sparsify"(%x) {{sparsifier = {attr}}} : (tensor<?x?x{elt}>) -> tensor<?x?x{elt}, #C>
  return %s : tensor<?x?x{elt}, #C>
}}
"""
    return f"""
#C = {layout_attr("csr")}
func.func @sparsify(%x: tensor<?x?x{elt}>, %b: tensor<?x{elt}>) -> tensor<?x?x{elt}, #C> {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %x, %c0 : tensor<?x?x{elt}>
  %n = tensor.dim %x, %c1 : tensor<?x?x{elt}>
  %e = tensor.empty(%m, %n) : tensor<?x?x{elt}>
  %y = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,
                                         affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}}
    ins(%x, %b : tensor<?x?x{elt}>, tensor<?x{elt}>) outs(%e : tensor<?x?x{elt}>) {{
  ^bb0(%a: {elt}, %c: {elt}, %o: {elt}):
    %s = {add} %a, %c : {elt}
    linalg.yield %s : {elt}
  }} -> tensor<?x?x{elt}>
  %s = "sparse_iter.sparsify"(%y) {{sparsifier = {attr}}} : (tensor<?x?x{elt}>) -> tensor<?x?x{elt}, #C>
  return %s : tensor<?x?x{elt}, #C>
}}
"""


def spmm_sparsify(threshold: float) -> str:
    """A sparse kernel's dense output (SpMM), thresholded into CSR (not fused: read back)."""
    return f"""
#A = {layout_attr("csr")}
func.func @spmm_sparsify(%A: tensor<?x?xf32, #A>, %B: tensor<?x?xf32>, %C: tensor<?x?xf32>)
    -> tensor<?x?xf32, #A> {{
  %r = linalg.matmul ins(%A, %B : tensor<?x?xf32, #A>, tensor<?x?xf32>)
                     outs(%C : tensor<?x?xf32>) -> tensor<?x?xf32>
  %s = "sparse_iter.sparsify"(%r) {{sparsifier = #sparse_iter.sparsifier<threshold[{threshold}]>}}
      : (tensor<?x?xf32>) -> tensor<?x?xf32, #A>
  return %s : tensor<?x?xf32, #A>
}}
"""


@functools.cache
def compiled(text: str, **options: int):  # -> sparsecomp.Executable
    """``sparsecomp.compile(text, **options)``, once per test session."""
    import sparsecomp

    return sparsecomp.compile(text, **options)
