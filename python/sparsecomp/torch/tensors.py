"""torch tensors in and out of any executable, without copies where the memory allows.

* :func:`from_torch`: a dense CPU tensor becomes a numpy array sharing its
  memory (``Tensor.numpy()``); a ``torch.sparse`` COO, CSR, CSC or BSR
  tensor becomes a :class:`SparseTensor` in the matching layout (index
  arrays converted to the layout's 32-bit widths).
* :func:`to_torch`: a numpy result becomes a tensor sharing its memory
  (``torch.from_numpy``); a :class:`SparseTensor` becomes a ``torch.sparse``
  tensor in the layout asked for (``"csr"``, ``"csc"``, ``"coo"`` or ``"bsr"``).
* :func:`call`: ``fn(*args, out=...)`` with torch arguments and results;
  ``out`` tensors are written in place, so that a result needs no copy.

A CUDA tensor passed to a CPU executable is an error naming the argument. An
executable compiled for a ``cuda:sm_XX`` target takes dense CUDA tensors as
they are (DLPack / ``__cuda_array_interface__``, no host round trip:
:mod:`sparsecomp.runtime.device_arrays`), and returns its dense results on
the GPU as torch tensors.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

import numpy as np
import torch

from sparsecomp.errors import ArgumentError, SparsecompError
from sparsecomp.formats.tensor import SparseTensor

_SPARSE = {torch.sparse_coo, torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr}
#: the dtypes a tensor's memory can be read as numpy (``Tensor.numpy()``)
_NUMPY_DTYPES = {
    torch.float16, torch.float32, torch.float64, torch.bool, torch.uint8, torch.int8,
    torch.int16, torch.int32, torch.int64, torch.complex64, torch.complex128,
}  # fmt: skip


def from_torch(t: Any, what: str = "argument") -> Any:
    """A numpy array (dense; shared memory) or a :class:`SparseTensor` (sparse) for ``t``."""
    if not isinstance(t, torch.Tensor):
        return t
    if t.device.type != "cpu":
        raise SparsecompError(
            f"{what} is a tensor on {t.device}; this executable takes CPU tensors",
            hint="move it with .cpu(); CUDA tensors are not passed to executables yet",
        )
    t = t.detach()
    if t.layout == torch.strided and (t.is_neg() or t.is_conj()):
        t = t.resolve_neg().resolve_conj()  # a lazy negation (z.conj().imag): applied
    if t.dtype not in _NUMPY_DTYPES:  # bfloat16, float8: no numpy dtype, no kernel
        raise SparsecompError(
            f"{what} is a {t.dtype} tensor; executables take float16, float32, float64, "
            "integer and bool tensors",
            hint="convert it with .to(torch.float32) (or the dtype the function declares)",
        )
    if t.layout == torch.strided:
        return t.numpy()
    if t.layout not in _SPARSE:
        raise SparsecompError(f"{what} has layout {t.layout}, which sparsecomp does not read")
    if t.dense_dim() != 0:
        raise SparsecompError(
            f"{what} is a hybrid torch.sparse tensor ({t.sparse_dim()} sparse and "
            f"{t.dense_dim()} dense dimensions); sparsecomp reads tensors whose every "
            "dimension is sparse",
            hint="pass it as .to_dense(), or build it with every dimension sparse "
            "(.to_sparse() without a sparse_dim)",
        )
    if t.dim() != 2 and t.layout != torch.sparse_coo:
        raise SparsecompError(f"{what}: compressed torch.sparse tensors must be matrices")
    tensor = _sparse_from_torch(t)
    kind = str(t.layout).removeprefix("torch.sparse_").upper()
    tensor.origin = f"a torch.sparse {kind} tensor"  # what a conversion's warning names
    return tensor


def _sparse_from_torch(t: Any) -> SparseTensor:
    shape = tuple(int(s) for s in t.shape)
    if t.layout == torch.sparse_coo:
        c = t.coalesce()
        return SparseTensor.from_coo(shape, c.indices().numpy(), c.values().numpy(), "coo")
    if t.layout == torch.sparse_bsr:
        r, c = (int(s) for s in t.values().shape[1:3])
        i32 = lambda a: a.numpy().astype(np.int32)  # noqa: E731
        return SparseTensor.from_buffers(
            shape,
            f"bsr:{r}x{c}",
            [None, i32(t.crow_indices()), None, None],
            [None, i32(t.col_indices()), None, None],
            t.values().reshape(-1).numpy(),
        )
    import scipy.sparse as sp  # type: ignore[import-untyped]

    if t.layout == torch.sparse_csr:
        m = sp.csr_array(
            (t.values().numpy(), t.col_indices().numpy(), t.crow_indices().numpy()), shape=shape
        )
        return SparseTensor.from_scipy(m, "csr")
    m = sp.csc_array(
        (t.values().numpy(), t.row_indices().numpy(), t.ccol_indices().numpy()), shape=shape
    )
    return SparseTensor.from_scipy(m, "csc")


def to_torch(x: Any, layout: str = "csr") -> Any:
    """A torch tensor for a result: numpy arrays shared, SparseTensors as ``torch.sparse``."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Sparse CSR tensor support is in beta")
        return _to_torch(x, layout)


def _to_torch(x: Any, layout: str) -> Any:
    if isinstance(x, np.ndarray):
        return torch.from_numpy(x if x.flags.writeable else x.copy())
    if isinstance(x, tuple):
        return tuple(_to_torch(v, layout) for v in x)
    if not isinstance(x, SparseTensor):
        return x
    if len(x.shape) != 2 or layout == "coo":
        coords, values = x.to_coo()
        return torch.sparse_coo_tensor(
            torch.from_numpy(coords),
            torch.from_numpy(values),
            x.shape,
            is_coalesced=True,
            check_invariants=False,
        )
    if layout == "bsr" or layout.startswith("bsr:"):
        kept = str(x.layout).startswith("bsr:") and layout == "bsr"
        name = str(x.layout) if kept else (layout if layout != "bsr" else "bsr:1x1")
        r, c = _block(name)
        if x.shape[0] % r or x.shape[1] % c:
            raise SparsecompError(
                f"to_torch: a {x.shape[0]} x {x.shape[1]} result does not split into "
                f"{r} x {c} blocks, which torch's BSR tensors need",
                hint="ask for a block size that divides the shape, or csr/csc/coo",
            )
        blocked = x if kept else x.to(name)
        pos, crd = blocked.positions[1], blocked.coordinates[1]
        assert pos is not None
        assert crd is not None
        vals = blocked.values.reshape(-1, r, c)
        return torch.sparse_bsr_tensor(
            torch.from_numpy(pos.astype(np.int64)),
            torch.from_numpy(crd.astype(np.int64)),
            torch.from_numpy(vals.copy()),
            x.shape,
            check_invariants=False,
        )
    if layout not in ("csr", "csc"):
        raise SparsecompError(f"to_torch: layout must be csr, csc, coo or bsr[:RxC], not {layout}")
    m = x.to_scipy(layout)
    make = torch.sparse_csr_tensor if layout == "csr" else torch.sparse_csc_tensor
    data = m.data if m.data.dtype == x.values.dtype else m.data.astype(x.values.dtype)
    return make(  # (scipy holds float16 as float32: the result's own dtype again)
        torch.from_numpy(m.indptr.astype(np.int64)),
        torch.from_numpy(m.indices.astype(np.int64)),
        torch.from_numpy(data),
        m.shape,
        check_invariants=False,  # built from a validated tensor
    )


def _block(name: str) -> tuple[int, int]:
    """The block shape of ``bsr:RxC`` (``bsr:1x1`` for plain ``bsr``)."""
    try:
        r, c = (int(v) for v in name.removeprefix("bsr:").split("x"))
    except ValueError:
        raise SparsecompError(f"to_torch: {name!r} is not bsr or bsr:RxC") from None
    if r < 1 or c < 1:
        raise SparsecompError(f"to_torch: {name!r} has an empty block")
    return r, c


@torch.compiler.disable(
    recursive=True,
    reason="sparsecomp.torch.call runs eagerly; a compiled graph traces SparseLinear, "
    "SparseMatrix and the sparsecomp:: ops",
)
def call(fn: Any, *args: Any, out: Any = None, sparse_layout: str = "csr") -> Any:
    """Call an ``Executable`` or ``Function`` with torch tensors; results come back as tensors.

    ``out``: a tensor (a tuple, one per result) the result is written into
    and returned, as with ``Function.__call__``'s ``out=``; ``None`` in the
    tuple for a result the call returns. Sparse results come back as
    ``torch.sparse`` tensors in ``sparse_layout``. Under ``torch.compile`` the
    call runs eagerly (a graph break; Dynamo traced into the conversions and
    failed); the ``sparsecomp::`` custom ops are what a compiled graph holds.
    Inputs are read without autograd: a tensor that requires grad gets no
    gradient from the call (the layers and ops carry autograd).
    """
    gpu = _device(fn).startswith("cuda:")
    converted = [
        a if gpu and _on_gpu(a) else from_torch(a, f"argument {i}") for i, a in enumerate(args)
    ]
    if out is None:
        return to_torch(_torch_hints(fn, *converted), sparse_layout)
    outs = out if isinstance(out, tuple) else (out,)
    arrays = tuple(o if gpu and _on_gpu(o) else _out_array(o, i) for i, o in enumerate(outs))
    got = _torch_hints(fn, *converted, out=arrays if isinstance(out, tuple) else arrays[0])
    for o in outs:  # written in place: autograd and the shared-input caches must know
        if isinstance(o, torch.Tensor) and not o.is_inference():
            torch.autograd.graph.increment_version(o)
    if not isinstance(out, tuple):
        return out
    got = got if isinstance(got, tuple) else (got,)  # results out= named no tensor for
    return tuple(o if o is not None else to_torch(g, sparse_layout) for o, g in zip(out, got))


def _torch_hints(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``; a dtype error's hint in torch's words (numpy's
    ``.astype`` is no method of a tensor)."""
    try:
        return fn(*args, **kwargs)
    except ArgumentError as exc:
        found = re.search(r"expected dtype (\w+), got", exc.message)
        if found is None:
            raise
        hint = f"convert the tensor with .to(torch.{found.group(1)})"
        raise ArgumentError(exc.message, location=exc.location, hint=hint) from None


def _device(fn: Any) -> str:
    """The device an ``Executable`` or ``Function`` was compiled for (``host``, ``cuda:sm_90``)."""
    manifest = getattr(fn, "manifest", None)
    if manifest is None and getattr(fn, "directory", None) is not None:
        import json
        from pathlib import Path

        path = Path(fn.directory) / "manifest.json"
        manifest = json.loads(path.read_text()) if path.is_file() else {}
    return str((manifest or {}).get("device") or "host")


def _on_gpu(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type == "cuda" and t.layout == torch.strided


def _out_array(t: Any, i: int) -> Any:
    if not isinstance(t, torch.Tensor):
        return t
    if t.device.type != "cpu" or t.layout != torch.strided:
        raise SparsecompError(
            f"out[{i}] must be a contiguous dense CPU tensor, got {t.layout} on {t.device}"
        )
    if not t.is_contiguous():
        raise SparsecompError(
            f"out[{i}] must be contiguous: shape {tuple(t.shape)} with strides {t.stride()}",
            hint="pass a contiguous tensor (torch.empty(shape)) and copy it into this view",
        )
    if t.is_neg() or t.is_conj():
        raise SparsecompError(
            f"out[{i}] is a lazily negated or conjugated view (its memory holds other "
            "values than it shows)",
            hint="pass a plain tensor (torch.empty_like(t)) and copy the result",
        )
    if t.requires_grad and t.is_leaf and torch.is_grad_enabled():
        raise SparsecompError(
            f"out[{i}] is a leaf tensor that requires grad: writing into it in place would "
            "hide the write from autograd (torch refuses the same)",
            hint="pass a tensor that does not require grad, or call under torch.no_grad()",
        )
    return t.detach().numpy()
