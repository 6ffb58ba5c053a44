"""A Dask worker preload (test_dask.py): this worker can import neither MLIR nor find a C
compiler, as a cluster node that has only sparsecomp's runtime would be."""

import os
import sys

sys.modules["mlir"] = None  # type: ignore[assignment]  # `import mlir` raises ImportError
os.environ["PATH"] = ""
os.environ.pop("CC", None)
