"""PyTorch front end: sparse layers on compiled kernels, in STen's programming model.

Install with ``pip install -e '.[torch]'``. Importing this package registers
the ``sparsecomp::`` custom ops (:mod:`.ops`); the kernels compile on first
use and are kept by the compile cache.

* :class:`SparseLinear`: ``nn.Linear`` with a sparse weight (:mod:`.nn`).
* :func:`sparsify_` / :func:`densify_`: sparsify a model in place (:mod:`.model`).
* :func:`from_torch` / :func:`to_torch` / :func:`call`: torch tensors in and out
  of any executable (:mod:`.tensors`).
"""

from __future__ import annotations

from sparsecomp.torch import ops
from sparsecomp.torch.model import Rule, densify_, mask_of, sparsify_
from sparsecomp.torch.nn import SparseLinear

__all__ = ["Rule", "SparseLinear", "densify_", "mask_of", "ops", "sparsify_"]
