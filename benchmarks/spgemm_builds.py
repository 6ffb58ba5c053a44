"""SpGEMM's two builds of a sparse result, one against the other, in one process.

``lowering/rowemit.py`` builds a product's rows in one pass (upper-bound
temporaries, then a copy) or in three (count, prefix sum, fill), chosen at
run time. This script compiles ``kernels/spgemm_unsorted.mlir`` (or, with
``--ordered``, ``kernels/spgemm.mlir``) twice, in this process: once as
shipped, once with ``rowemit.ONE_PASS_ENTRIES = 0`` so that every call takes
the three passes; then on each matrix it calls both in turn (``--calls``
rounds, interleaved, so that the machine's drift hits both alike), checks
both against scipy and prints the best times and ``three / one`` (above 1:
the one pass is faster), with the geomean. Where the kernel as shipped keeps
the three passes itself (``OVERLAP``), the ratio is about 1.

Run: ``.venv/bin/python benchmarks/spgemm_builds.py [--matrices a,b] [--ordered]``;
``--quick``: one small synthetic matrix (the smoke test).
"""

from __future__ import annotations

import argparse
import atexit
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import scipy.sparse as sp

HERE = Path(__file__).resolve().parent


def _compile(source: str, one_pass_entries: int | None) -> object:
    import sparsecomp
    from sparsecomp.lowering import rowemit

    shipped = rowemit.ONE_PASS_ENTRIES
    cache = tempfile.mkdtemp(prefix="spgemm-builds-")  # each build cold, in its own cache
    atexit.register(shutil.rmtree, cache, True)  # removed when the run ends (they piled up)
    os.environ["SPARSECOMP_CACHE_DIR"] = cache
    try:
        if one_pass_entries is not None:
            rowemit.ONE_PASS_ENTRIES = one_pass_entries
        return sparsecomp.compile(source)
    finally:
        rowemit.ONE_PASS_ENTRIES = shipped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--matrices", default="", help="comma-separated real matrices")
    parser.add_argument("--ordered", action="store_true", help="rows' columns in order")
    parser.add_argument("--calls", type=int, default=7, help="rounds of one call each")
    parser.add_argument("--quick", action="store_true", help="one small synthetic matrix")
    args = parser.parse_args(argv)
    # the patched limit must reach the compiler: build in this process
    os.environ["SPARSECOMP_COMPILE_IN_PROCESS"] = "1"
    sys.path.insert(0, str(HERE))
    import matrices as M

    from sparsecomp.formats import SparseTensor, parse_layout

    kernel = HERE / "kernels" / ("spgemm.mlir" if args.ordered else "spgemm_unsorted.mlir")
    source = kernel.read_text()
    exes = {"one": _compile(source, None), "three": _compile(source, 0)}
    layout = parse_layout(
        "#sparse_iter.layout<{map = (i, j) -> (i : dense, j : compressed), "
        "posWidth = 32, crdWidth = 32}>"
    )
    if args.quick:
        cases = {"uniform 400^2 2%": M.canonical(sp.random(400, 400, 0.02, random_state=1))}
    else:
        names = [n for n in args.matrices.split(",") if n] or list(M.REAL_MATRICES)
        cases = {n: M.real(n) for n in names}
    print(f"| matrix | one pass ms | three passes ms | three / one |  ({kernel.name})")
    print("| --- | ---: | ---: | ---: |")
    ratios = []
    for name, a in cases.items():
        packed = SparseTensor.from_scipy(a, layout)
        want = a @ a
        times: dict[str, list[float]] = {k: [] for k in exes}
        for key, exe in exes.items():
            got = sp.csr_matrix(exe(packed, packed).to_scipy())  # type: ignore[operator]
            err = abs(got - want).max() if want.nnz else 0.0
            if not err <= 1e-4 * max(1.0, abs(want).max()):
                print(f"{name}: the {key}-pass build differs from scipy by {err}")
                return 1
        for _ in range(args.calls):
            for key, exe in exes.items():
                start = time.perf_counter()
                exe(packed, packed)  # type: ignore[operator]
                times[key].append(time.perf_counter() - start)
        one, three = min(times["one"]) * 1e3, min(times["three"]) * 1e3
        ratios.append(three / one)
        print(f"| {name} | {one:.3f} | {three:.3f} | {three / one:.2f} |", flush=True)
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
    print(f"| geomean | | | **{geo:.2f}** |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
