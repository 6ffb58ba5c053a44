"""``sparse<indices, values>`` attributes (SparseElementsAttr) through MLIR's C API.

The Python bindings have no class for them: such an attribute is a plain
``ir.Attribute``, whose parts cannot be read nor a new one built. MLIR's C
API has both (``mlirSparseElementsAttrGetIndices`` / ``GetValues``,
``mlirSparseElementsAttribute``), exported by ``libMLIRPythonCAPI.so``, which
the bindings have loaded; this module calls them with ctypes, passing the
objects' C pointers through their ``_CAPIPtr`` capsules. ``MlirAttribute`` and
``MlirType`` are structs of one pointer, passed and returned as that pointer.
"""

from __future__ import annotations

import ctypes
from functools import cache

from mlir import ir

_ATTRIBUTE = b"mlir.ir.Attribute._CAPIPtr"
_TYPE = b"mlir.ir.Type._CAPIPtr"
_RTLD_NOLOAD = 4


@cache
def _capi() -> ctypes.CDLL:
    lib = ctypes.CDLL("libMLIRPythonCAPI.so", mode=ctypes.RTLD_GLOBAL | _RTLD_NOLOAD)
    lib.mlirAttributeIsASparseElements.argtypes = [ctypes.c_void_p]
    lib.mlirAttributeIsASparseElements.restype = ctypes.c_bool
    for name in ("mlirSparseElementsAttrGetIndices", "mlirSparseElementsAttrGetValues"):
        getattr(lib, name).argtypes = [ctypes.c_void_p]
        getattr(lib, name).restype = ctypes.c_void_p
    lib.mlirSparseElementsAttribute.argtypes = [ctypes.c_void_p] * 3
    lib.mlirSparseElementsAttribute.restype = ctypes.c_void_p
    return lib


def _pointer(obj: ir.Attribute | ir.Type, name: bytes) -> int:
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.argtypes, get.restype = [ctypes.py_object, ctypes.c_char_p], ctypes.c_void_p
    pointer = get(obj._CAPIPtr, name)
    assert pointer, "an attribute or type capsule holds its C object"
    return int(pointer)


def _attribute(pointer: int) -> ir.Attribute:
    new = ctypes.pythonapi.PyCapsule_New
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    new.restype = ctypes.py_object
    return ir.Attribute._CAPICreate(new(pointer, _ATTRIBUTE, None)).maybe_downcast()


def is_sparse_elements(attr: ir.Attribute) -> bool:
    """Whether ``attr`` is a ``sparse<...>`` attribute."""
    return bool(_capi().mlirAttributeIsASparseElements(_pointer(attr, _ATTRIBUTE)))


def sparse_parts(attr: ir.Attribute) -> tuple[ir.DenseIntElementsAttr, ir.Attribute]:
    """``(indices, values)`` of a ``sparse<...>`` attribute: an ``N x rank`` i64 tensor
    of coordinates and the ``N`` values (either may be a splat), as their own classes
    (``ir.DenseIntElementsAttr`` for integers)."""
    assert is_sparse_elements(attr), f"not a sparse<...> attribute: {attr}"
    pointer = _pointer(attr, _ATTRIBUTE)
    indices = _attribute(_capi().mlirSparseElementsAttrGetIndices(pointer))
    values = _attribute(_capi().mlirSparseElementsAttrGetValues(pointer))
    return ir.DenseIntElementsAttr(indices), values  # DenseInt/FPElementsAttr: downcast


def sparse_elements(ty: ir.Type, indices: ir.Attribute, values: ir.Attribute) -> ir.Attribute:
    """The ``sparse<indices, values> : ty`` attribute."""
    pointer = _capi().mlirSparseElementsAttribute(
        _pointer(ty, _TYPE), _pointer(indices, _ATTRIBUTE), _pointer(values, _ATTRIBUTE)
    )
    return _attribute(pointer)
