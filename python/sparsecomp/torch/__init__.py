"""PyTorch front end: sparse layers on compiled kernels, in STen's programming model.

Install with ``pip install -e '.[torch]'``. Importing this package registers
the ``sparsecomp::`` custom ops (:mod:`.ops`); the kernels compile on first
use and are kept by the compile cache.

* :class:`SparseLinear`: ``nn.Linear`` with a sparse weight; :class:`SparseMatrix`:
  ``A @ B`` for a fixed sparse ``A`` (:mod:`.nn`).
* :func:`sparsify_` / :func:`densify_`: sparsify a model in place (:mod:`.model`).
* :func:`fuse_activations_`: a GELU or ReLU after a sparse layer, applied by
  the layer's kernel as it stores its output (:mod:`.fuse`).
* :class:`SparseActivationLinear` / :func:`sparsify_activations_`: a GELU whose
  output is sparsified as it is computed, feeding the next linear layer
  (:mod:`.activation`).
* :func:`resparsify_` / :class:`ResparsifyEvery`: the optimizer policies
  (masked updates by construction, or re-sparsify every N steps: :mod:`.optim`).
* :func:`from_torch` / :func:`to_torch` / :func:`call`: torch tensors in and out
  of any executable (:mod:`.tensors`).

The ops have ``torch.func.vmap`` rules (:mod:`.batching`), so ``vmap`` over
inputs and model ensembles run on the kernels too (``torch.func``'s gradient
transforms are refused with a clear error, :mod:`.tracing`).
"""

from __future__ import annotations

import os

# Kernels (LLVM's libomp) and torch (GNU OpenMP) run parallel regions in turn,
# on the same cores. libomp's workers spin for 200 ms after each region by
# default, and took the cores from torch's next op: a BertLayer with sparse
# linears ran 6x slower. 0 puts them to sleep at once; a user's own setting wins.
# (libomp reads it when its first parallel region starts.)
os.environ.setdefault("KMP_BLOCKTIME", "0")

from sparsecomp.torch import batching, ops
from sparsecomp.torch.activation import SparseActivationLinear, sparsify_activations_
from sparsecomp.torch.fuse import fuse_activations_
from sparsecomp.torch.model import Rule, densify_, mask_of, sparsify_
from sparsecomp.torch.nn import SparseLinear, SparseMatrix
from sparsecomp.torch.optim import ResparsifyEvery, resparsify_
from sparsecomp.torch.tensors import call, from_torch, to_torch

__all__ = [
    "ResparsifyEvery",
    "Rule",
    "SparseActivationLinear",
    "SparseLinear",
    "SparseMatrix",
    "batching",
    "call",
    "densify_",
    "from_torch",
    "fuse_activations_",
    "mask_of",
    "ops",
    "resparsify_",
    "sparsify_",
    "sparsify_activations_",
    "to_torch",
]
