"""The ``sparse_iter`` op classes, generated from ``dialects/sparse_iter.td``.

Re-exports the module ``mlir-tblgen -gen-python-op-bindings`` produced (see
:mod:`sparsecomp.ir.odsgen`): ``SetEncodingOp``/``set_encoding``,
``UnsetEncodingOp``/``unset_encoding``, ...
"""

from __future__ import annotations

from sparsecomp.ir.context import ops as _ops

_generated = _ops()
globals().update({k: v for k, v in vars(_generated).items() if not k.startswith("__")})
__all__ = [k for k in vars(_generated) if not k.startswith("_")]
