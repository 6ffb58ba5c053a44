"""A sparse matrix in row partitions on a Dask cluster: :class:`DistributedMatrix`.

Each partition is a task whose result (a scipy CSR matrix of the partition's
rows) lives on a worker once the matrix is persisted; a kernel packs it in
its layout on that worker, once (:func:`.run.map`). The tasks are made from
the data itself (:func:`from_scipy`), from files (:func:`from_files`) or from
a ``dask.array`` of scipy chunks (:func:`from_dask_array`), so Dask can make a
lost partition again on another worker.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sparsecomp.dask import worker
from sparsecomp.dask.partition import Part, balanced, local_indptr
from sparsecomp.errors import SparsecompError


@dataclass
class DistributedMatrix:
    """A ``shape`` matrix of ``dtype`` in row partitions (``parts``), each a Dask
    task (``pieces``, ``dask.delayed`` values) giving a scipy CSR matrix."""

    shape: tuple[int, int]
    dtype: np.dtype[Any]
    parts: list[Part]
    pieces: list[Any]
    #: packed partitions per (executable digest, function, layout rule, columns):
    #: persisted tasks and the digest of the executable each partition runs
    packed: dict[tuple[Any, ...], tuple[list[Any], list[str]]] = field(
        default_factory=dict, repr=False
    )
    #: each partition's layout per function, as the last ``map`` packed it
    layouts: dict[str, list[str]] = field(default_factory=dict, repr=False)
    #: the client whose cluster holds the partitions: the default of the calls
    #: below and of :func:`~sparsecomp.dask.map` (not Dask's current client,
    #: which is the last one made where a program holds several)
    client: Any = field(default=None, repr=False, compare=False)
    #: matrices whose persisted partitions the pieces' tasks read (a ``map`` result's
    #: source), held so that they live as long as this one
    sources: list[Any] = field(default_factory=list, repr=False, compare=False)
    #: the tasks that make the partitions (``pieces`` are their persisted futures):
    #: what :meth:`persist` submits again once a restart dropped them
    tasks: list[Any] | None = field(default=None, repr=False, compare=False)

    @property
    def nnz(self) -> int:
        return sum(p.nnz for p in self.parts)

    @property
    def npartitions(self) -> int:
        return len(self.parts)

    def persist(self, client: Any = None) -> DistributedMatrix:
        """Keep the partitions in the workers' memory (``client.persist``), made again
        from their tasks where the cluster dropped them (``client.restart()`` drops
        every result, and the futures that named them do not say so: a ``map``
        afterwards fails with "lost dependencies" until this runs); the partitions
        are packed again at the next ``map``. ``client``: where to keep them (the
        matrix's own client by default), the default of later calls from then on.
        A ``map``'s result has no tasks: once dropped, its ``persist`` is an error
        (run the ``map`` again)."""
        client = client_of(client or self.client)
        if self.tasks is None and any(_dropped(p) for p in self.pieces):
            raise SparsecompError(
                "the cluster dropped this matrix's partitions (client.restart()), and it has "
                "no tasks to make them again: it is a map's result",
                hint="persist the matrices it was computed from and run the map again",
            )
        self.pieces = list(client.persist(self.tasks if self.tasks is not None else self.pieces))
        self.packed.clear()
        self.client = client  # the calls' default from now on: the partitions live there
        return self

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without its client (a live connection) and packed partitions: the
        partitions' futures and tasks travel, and a process that loads the matrix
        uses its own current client (Dask's rule for a future)."""
        return {**self.__dict__, "client": None, "packed": {}}

    def to_scipy(self, client: Any = None) -> Any:
        """The whole matrix on this machine, as scipy CSR."""
        import scipy.sparse as sp  # type: ignore[import-untyped]

        pieces = client_of(client or self.client).compute(self.pieces, sync=True)
        counts = np.zeros(self.shape[0], np.int64)
        for part, p in zip(self.parts, pieces, strict=True):  # a split row: both add
            counts[part.row_start : part.row_stop] += np.diff(p.indptr)
        indptr = np.concatenate([[0], np.cumsum(counts)])
        data = np.concatenate([p.data for p in pieces]).astype(self.dtype, copy=False)
        indices = np.concatenate([p.indices for p in pieces])
        return sp.csr_matrix((data, indices, indptr), self.shape)

    def __repr__(self) -> str:
        return (
            f"DistributedMatrix({self.shape[0]}x{self.shape[1]}, {self.dtype}, nnz={self.nnz}, "
            f"{self.npartitions} partitions)"
        )


def client_of(client: Any) -> Any:
    """``client``, or the current Dask client; a clear error where there is none, or
    where it is closed (a map on its matrix failed at compute with "Missing dependency",
    from_scipy with an AttributeError)."""
    if client is not None:
        if getattr(client, "status", "running") in ("closing", "closed"):
            raise SparsecompError(
                "the Dask client is closed",
                hint="start a new one and persist the matrix there: A.persist(client)",
            )
        return client
    from distributed import get_client

    try:
        return get_client()
    except ValueError:
        raise SparsecompError(
            "no Dask client: start one (distributed.Client(...)) or pass client=",
            hint="distributed.Client(distributed.LocalCluster(n_workers=2)) for this machine",
        ) from None


def from_scipy(A: Any, parts: int | None = None, client: Any = None) -> DistributedMatrix:
    """``A`` (any scipy.sparse matrix) in ``parts`` row partitions balanced by
    nonzeros (by default two per worker thread), persisted on the cluster."""
    import dask
    import scipy.sparse as sp

    client = client_of(client)
    if not sp.issparse(A) or A.ndim != 2:
        raise SparsecompError(f"from_scipy takes a scipy.sparse matrix, not {type(A).__name__}")
    csr = sp.csr_matrix(A, copy=True)
    csr.sum_duplicates()
    csr.sort_indices()
    if parts is None:
        parts = 2 * max(1, sum(client.nthreads().values()))
    layout = balanced(csr.indptr, parts)
    pieces = []
    for part in layout:
        ptr = local_indptr(csr.indptr, part)
        data = csr.data[part.nz_start : part.nz_stop]
        idx = csr.indices[part.nz_start : part.nz_stop]
        make = dask.delayed(worker.piece, pure=True)
        pieces.append(make(data, idx, ptr, (part.rows, csr.shape[1])))
    matrix = DistributedMatrix(csr.shape, csr.dtype, layout, pieces, client=client, tasks=pieces)
    return matrix.persist(client)


def _dropped(piece: Any) -> bool:
    """Whether ``piece`` (a persisted one: a future, or a ``Delayed`` holding futures)
    names a result the cluster dropped."""
    from distributed import futures_of

    return any(f.status in ("cancelled", "lost") for f in futures_of(piece))


def _stamp(path: Any) -> tuple[int, int] | None:
    """A file's modification time and size, where this process sees the file: part of
    its read task's key, so that a file written again is read again (the key was the
    path alone, and Dask answered with the partition read before). None (a key of its
    own each time) where only the workers see it."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def from_files(
    paths: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    client: Any = None,
    dtype: Any = None,
) -> DistributedMatrix:
    """One row partition per file (scipy ``.npz`` or Matrix Market ``.mtx``), read
    on the workers, stacked in the order given (one path: one partition).
    ``dtype``: the values' type (scipy reads a real ``.mtx`` as float64; a
    float32 kernel takes ``dtype=np.float32``)."""
    import dask

    client = client_of(client)
    if isinstance(paths, str | os.PathLike):  # one file, not its name's characters
        paths = [paths]
    dense = [str(p) for p in paths if str(p).endswith(".npy")]
    if dense:  # read as Matrix Market, it said "Not a Matrix Market file"
        raise SparsecompError(
            f"from_files reads scipy.sparse .npz files and Matrix Market files; {dense[0]} "
            "is a numpy .npy file (a dense array)",
            hint="save the partitions with scipy.sparse.save_npz, or build the matrix "
            "with from_scipy(scipy.sparse.csr_matrix(np.load(path)))",
        )
    kind = None if dtype is None else np.dtype(dtype).str
    stamps = [_stamp(p) for p in paths]  # a file rewritten is another task: read again
    tasks = [
        dask.delayed(worker.read_piece, pure=stamp is not None)(str(p), kind, stamp)
        for p, stamp in zip(paths, stamps, strict=True)
    ]
    if not tasks:
        raise SparsecompError("from_files needs at least one file")
    pieces = list(client.persist(tasks))
    shapes = client.compute([dask.delayed(worker.describe)(p) for p in pieces], sync=True)
    return _stacked(pieces, shapes, [str(p) for p in paths], client, tasks)


def from_dask_array(array: Any, client: Any = None) -> DistributedMatrix:
    """A ``dask.array`` whose chunks are scipy sparse matrices, chunked by rows only."""
    import dask

    client = client_of(client)
    if not hasattr(array, "to_delayed") or not hasattr(array, "chunks"):
        raise SparsecompError(
            f"from_dask_array takes a dask.array, not {type(array).__name__}",
            hint="a scipy.sparse matrix: sparsecomp.dask.from_scipy(A); files: from_files",
        )
    if array.ndim != 2 or len(array.chunks[1]) != 1:
        raise SparsecompError(
            "from_dask_array takes a 2-D dask.array chunked by rows only",
            hint="rechunk it: array.rechunk({1: -1})",
        )
    tasks = [dask.delayed(_csr)(d) for d in array.to_delayed()[:, 0]]
    pieces = list(client.persist(tasks))
    shapes = client.compute([dask.delayed(worker.describe)(p) for p in pieces], sync=True)
    names = [f"chunk {k}" for k in range(len(pieces))]
    return _stacked(pieces, shapes, names, client, tasks)


def _csr(chunk: Any) -> Any:
    import scipy.sparse as sp

    if not sp.issparse(chunk):
        raise SparsecompError(f"a chunk is {type(chunk).__name__}, not a scipy.sparse matrix")
    return sp.csr_matrix(chunk)


def _stacked(
    pieces: list[Any], shapes: list[Any], names: list[str], client: Any, tasks: list[Any]
) -> DistributedMatrix:
    columns = {s[0][1] for s in shapes}
    dtypes = {s[2] for s in shapes}
    if len(columns) != 1 or len(dtypes) != 1:
        found = ", ".join(
            f"{n}: {s[0][0]}x{s[0][1]} {s[2]}" for n, s in zip(names, shapes, strict=True)
        )
        raise SparsecompError(
            f"the partitions differ in columns or dtype ({found})",
            hint="scipy reads a real .mtx file as float64: from_files(paths, dtype=...) "
            "reads every file as one dtype",
        )
    parts, row, nz = [], 0, 0
    for shape, nnz, _ in shapes:
        parts.append(Part(row, row + shape[0], nz, nz + nnz))
        row, nz = row + shape[0], nz + nnz
    shape = (row, columns.pop())
    dtype = np.dtype(dtypes.pop())
    return DistributedMatrix(shape, dtype, parts, pieces, client=client, tasks=tasks)
