"""Python modules of sparsecomp's dialects, found by the bindings by namespace.

:mod:`sparsecomp.ir.context` appends this package to the bindings' dialect
search prefixes, so ``op.opview`` of a ``sparse_iter`` op is its generated
class, as for upstream dialects.
"""
