"""Subprocess that runs upstream MLIR pass pipelines, so that an abort stays here.

Protocol (one JSON object per line): on stdin ``{"source": MLIR text,
"pipeline": pass pipeline, "out": path}``; the worker runs the pipeline with
``mlir.passmanager.PassManager.parse(pipeline).run``, writes the lowered
module to ``out`` as MLIR bytecode and answers on stdout ``{"ok": true,
"seconds": pipeline time}`` or ``{"ok": false, "error": message}``. If a pass
asserts, the process dies and the parent sees the signal.

A pipeline naming a sparsecomp pass (``sparse-iter-...``: the i1 buffers of
SpGEMM's expanded rows, see ``upstream.WIDEN``) runs in sparsecomp's context,
where those passes are registered; every other one imports only ``mlir``.

Run: ``python benchmarks/peers/upstream_worker.py``.
"""

from __future__ import annotations

import json
import sys
import time

from mlir import ir, passmanager


def _pass_manager(pipeline: str, ctx: ir.Context) -> passmanager.PassManager:
    if "sparse-iter-" not in pipeline:
        return passmanager.PassManager.parse(pipeline)
    from sparsecomp.transforms.pipeline import build_pass_manager

    return build_pass_manager(pipeline, ctx)


def _context(pipeline: str) -> ir.Context:
    if "sparse-iter-" not in pipeline:
        return ir.Context()
    from sparsecomp.ir.context import make_context

    return make_context()


def lower(source: str, pipeline: str, out: str) -> dict[str, object]:
    with _context(pipeline) as ctx:
        try:
            module = ir.Module.parse(source)
            pm = _pass_manager(pipeline, ctx)
            start = time.perf_counter()
            pm.run(module.operation)
            seconds = time.perf_counter() - start
        except Exception as err:  # MLIRError / ValueError: report, keep serving
            return {"ok": False, "error": " ".join(str(err).split())[:400]}
        with open(out, "wb") as f:
            module.operation.write_bytecode(f)
    return {"ok": True, "seconds": seconds}


def main() -> None:
    for line in sys.stdin:
        job = json.loads(line)
        print(json.dumps(lower(job["source"], job["pipeline"], job["out"])), flush=True)


if __name__ == "__main__":
    main()
