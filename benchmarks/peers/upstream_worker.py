"""Subprocess that runs upstream MLIR pass pipelines, so that an abort stays here.

Protocol (one JSON object per line): on stdin ``{"source": MLIR text,
"pipeline": pass pipeline, "out": path}``; the worker runs the pipeline with
``mlir.passmanager.PassManager.parse(pipeline).run``, writes the lowered
module to ``out`` as MLIR bytecode and answers on stdout ``{"ok": true,
"seconds": pipeline time}`` or ``{"ok": false, "error": message}``. If a pass
asserts, the process dies and the parent sees the signal.

Run: ``python benchmarks/peers/upstream_worker.py`` (imports only ``mlir``).
"""

from __future__ import annotations

import json
import sys
import time

from mlir import ir, passmanager


def lower(source: str, pipeline: str, out: str) -> dict[str, object]:
    with ir.Context():
        try:
            module = ir.Module.parse(source)
            pm = passmanager.PassManager.parse(pipeline)
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
