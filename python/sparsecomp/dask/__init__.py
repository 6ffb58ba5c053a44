"""Compiled kernels on a Dask cluster (the ``dask`` extra: ``pip install -e '.[dask]'``).

    import distributed, sparsecomp, sparsecomp.dask

    client = distributed.Client(distributed.LocalCluster(n_workers=2, threads_per_worker=1))
    exe = sparsecomp.compile("examples/spmv.mlir")
    A = sparsecomp.dask.from_scipy(graph)             # row partitions balanced by nonzeros
    y = sparsecomp.dask.map(exe, "spmv", A, x)        # a dask.array
    y.compute()

* :mod:`.partition`: row partitions balanced by stored entries (a power-law
  row split over several);
* :mod:`.matrix`: :class:`DistributedMatrix`, made from a scipy matrix, from
  files (one partition each) or from a ``dask.array`` of scipy chunks;
* :mod:`.run`: :func:`map`, a function of an executable over the partitions;
* :mod:`.ship`: the executable sent to each worker once and loaded there
  without MLIR.

docs/dask.md has the guide, the PageRank example and the scaling figures.
"""

from __future__ import annotations

from sparsecomp.dask.matrix import DistributedMatrix, from_dask_array, from_files, from_scipy
from sparsecomp.dask.partition import Part, balanced
from sparsecomp.dask.run import map, ship

__all__ = [
    "DistributedMatrix",
    "Part",
    "balanced",
    "from_dask_array",
    "from_files",
    "from_scipy",
    "map",
    "ship",
]
