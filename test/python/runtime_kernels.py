"""Kernels for the runtime tests: MLIR on tensors (stage III form), their ABIs, manifests.

Sparse arguments and results appear flattened, as the back end sees them:
buffers (rank-1 tensors) then dim sizes (``index``); the ABI JSON says how
they regroup into a CSR ``SparseTensor``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runtime_fixture import build_so
from sparsecomp.formats import parse_layout
from sparsecomp.targets import detect_host

KERNELS = """
#id = affine_map<(d0) -> (d0)>
func.func @spmv(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %val: tensor<?xf32>, %m: index,
                %k: index, %x: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %z = arith.constant 0.0 : f32
  %e = tensor.empty(%m) : tensor<?xf32>
  %y = scf.for %i = %c0 to %m step %c1 iter_args(%acc = %e) -> tensor<?xf32> {
    %i1 = arith.addi %i, %c1 : index
    %lo32 = tensor.extract %pos[%i] : tensor<?xi32>
    %hi32 = tensor.extract %pos[%i1] : tensor<?xi32>
    %lo = arith.index_cast %lo32 : i32 to index
    %hi = arith.index_cast %hi32 : i32 to index
    %s = scf.for %p = %lo to %hi step %c1 iter_args(%sum = %z) -> f32 {
      %j32 = tensor.extract %crd[%p] : tensor<?xi32>
      %j = arith.index_cast %j32 : i32 to index
      %a = tensor.extract %val[%p] : tensor<?xf32>
      %b = tensor.extract %x[%j] : tensor<?xf32>
      %t = arith.mulf %a, %b : f32
      %u = arith.addf %sum, %t : f32
      scf.yield %u : f32
    }
    %acc2 = tensor.insert %s into %acc[%i] : tensor<?xf32>
    scf.yield %acc2 : tensor<?xf32>
  }
  return %y : tensor<?xf32>
}

func.func @scale(%pos: tensor<?xi32>, %crd: tensor<?xi32>, %val: tensor<?xf32>, %m: index,
                 %n: index, %s: f32)
    -> (tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, index, index) {
  %c0 = arith.constant 0 : index
  %nse = tensor.dim %val, %c0 : tensor<?xf32>
  %e = tensor.empty(%nse) : tensor<?xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%val : tensor<?xf32>) outs(%e : tensor<?xf32>) {
  ^bb0(%v: f32, %o: f32):
    %w = arith.mulf %v, %s : f32
    linalg.yield %w : f32
  } -> tensor<?xf32>
  return %pos, %crd, %r, %m, %n : tensor<?xi32>, tensor<?xi32>, tensor<?xf32>, index, index
}

func.func @views(%a: tensor<6xf64>) -> (tensor<6xf64>, tensor<2x3xf64>) {
  %v = tensor.expand_shape %a [[0, 1]] output_shape [2, 3] : tensor<6xf64> into tensor<2x3xf64>
  return %a, %v : tensor<6xf64>, tensor<2x3xf64>
}

func.func @total(%a: tensor<?xf64>) -> f64 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %z = arith.constant 0.0 : f64
  %n = tensor.dim %a, %c0 : tensor<?xf64>
  %s = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %z) -> f64 {
    %v = tensor.extract %a[%i] : tensor<?xf64>
    %t = arith.addf %acc, %v : f64
    scf.yield %t : f64
  }
  return %s : f64
}

func.func @stats(%a: tensor<?xf64>) -> (tensor<?xf64>, f64, index) {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %a, %c0 : tensor<?xf64>
  %e = tensor.empty(%n) : tensor<?xf64>
  %d = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%a : tensor<?xf64>) outs(%e : tensor<?xf64>) {
  ^bb0(%v: f64, %o: f64):
    %w = arith.addf %v, %v : f64
    linalg.yield %w : f64
  } -> tensor<?xf64>
  %s = func.call @total(%a) : (tensor<?xf64>) -> f64
  return %d, %s, %n : tensor<?xf64>, f64, index
}

func.func @pair(%a: tensor<2xf16>) -> (f16, i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = tensor.extract %a[%c0] : tensor<2xf16>
  %y = tensor.extract %a[%c1] : tensor<2xf16>
  %s = arith.addf %x, %y : f16
  %l = arith.cmpf olt, %x, %y : f16
  return %s, %l : f16, i1
}

func.func @less(%x: f32, %y: f32) -> i1 {
  %l = arith.cmpf olt, %x, %y : f32
  return %l : i1
}

func.func @half(%x: f16) -> f16 {
  return %x : f16
}

func.func @twice(%n: index) -> (tensor<?xf32>, tensor<?xf32>) {
  %one = arith.constant 1.0 : f32
  %e = tensor.empty(%n) : tensor<?xf32>
  %f = linalg.fill ins(%one : f32) outs(%e : tensor<?xf32>) -> tensor<?xf32>
  return %f, %f : tensor<?xf32>, tensor<?xf32>
}

func.func @big(%n: index, %v: f64) -> tensor<?xf64> {
  %e = tensor.empty(%n) : tensor<?xf64>
  %f = linalg.fill ins(%v : f64) outs(%e : tensor<?xf64>) -> tensor<?xf64>
  return %f : tensor<?xf64>
}

func.func @cst() -> tensor<3xf32> {
  %c = arith.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  return %c : tensor<3xf32>
}

func.func @r0(%a: tensor<f32>) -> tensor<f32> {
  %v = tensor.extract %a[] : tensor<f32>
  %w = arith.addf %v, %v : f32
  %r = tensor.from_elements %w : tensor<f32>
  return %r : tensor<f32>
}

func.func @nothing(%a: tensor<?xf32>) {
  return
}
"""

ADD = """
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @add(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m = tensor.dim %a, %c0 : tensor<?x?xf32>
  %n = tensor.dim %a, %c1 : tensor<?x?xf32>
  %e = tensor.empty(%m, %n) : tensor<?x?xf32>
  %r = linalg.generic {indexing_maps = [#map, #map, #map],
                       iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<?x?xf32>, tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}
"""

F16, F32, F64 = "float16", "float32", "float64"


def dense(dtype: str, *shape: int | str | None) -> dict[str, Any]:
    return {"kind": "dense", "dtype": dtype, "shape": list(shape)}


def scalar(dtype: str) -> dict[str, Any]:
    return {"kind": "scalar", "dtype": dtype}


def csr(rows: str, cols: str) -> dict[str, Any]:
    return {
        "kind": "sparse",
        "dtype": F32,
        "shape": [rows, cols],
        "layout": parse_layout("csr").attr_text(),
        "buffers": [["pos1", "int32"], ["crd1", "int32"], ["values", F32]],
    }


def abi(args: list[dict[str, Any]], results: list[dict[str, Any]]) -> dict[str, Any]:
    return {"args": args, "results": results}


KERNEL_ABIS = {
    "spmv": abi([csr("m", "k"), dense(F32, "k")], [dense(F32, "m")]),
    "scale": abi([csr("m", "n"), scalar(F32)], [csr("m", "n")]),
    "views": abi([dense(F64, 6)], [dense(F64, 6), dense(F64, 2, 3)]),
    "total": abi([dense(F64, None)], [scalar(F64)]),
    "stats": abi([dense(F64, "n")], [dense(F64, "n"), scalar(F64), scalar("int64")]),
    "pair": abi([dense(F16, 2)], [scalar(F16), scalar("bool")]),
    "less": abi([scalar(F32), scalar(F32)], [scalar("bool")]),
    "half": abi([scalar(F16)], [scalar(F16)]),
    "twice": abi([scalar("int64")], [dense(F32, "n"), dense(F32, "n")]),
    "big": abi([scalar("index"), scalar(F64)], [dense(F64, None)]),
    "cst": abi([], [dense(F32, 3)]),
    "r0": abi([dense(F32)], [dense(F32)]),
    "nothing": abi([dense(F32, None)], []),
}
ADD_ABIS = {"add": abi([dense(F32, "m", "n"), dense(F32, "m", "n")], [dense(F32, "m", "n")])}


def write_manifest(
    out_dir: Path, abis: dict[str, dict[str, Any]], needs: tuple[str, ...] = ()
) -> Path:
    """``manifest.json`` for ``kernel.so`` in ``out_dir``, as the driver writes it."""
    manifest = {
        "format": 1,
        "sparsecomp": "0.1.0",
        "mlir": "22.1.8.4",
        "target": detect_host().attr_text(),
        "library": "kernel.so",
        "needs": list(needs),
        "functions": {n: {"symbol": f"_mlir_ciface_{n}", "abi": a} for n, a in abis.items()},
    }
    path = out_dir / "manifest.json"
    path.write_text(json.dumps(manifest, indent=1))
    return path


def kernel_dir(
    out_dir: Path, text: str, abis: dict[str, dict[str, Any]], needs: tuple[str, ...] = ()
) -> Path:
    """A kernel directory: ``kernel.so`` built from ``text``, stage files, manifest."""
    build_so(text, out_dir)
    write_manifest(out_dir, abis, needs)
    return out_dir
