"""Kernel variants for the index widths the caller's sparse operands already have.

A sparse argument's layout fixes the dtypes of its index buffers
(``posWidth``/``crdWidth``; no width, as in upstream's
``#sparse_tensor.encoding``, means ``index``: 64-bit). A caller's matrix
often has others: scipy's CSR has 32-bit ``indptr``/``indices`` (64-bit
beyond 2^31 entries), ``SparseTensor.from_scipy(A, "csr")`` 32-bit ones.
Converting them at every call copies every index (half a second per call
at 4.5M entries) and makes the kernel read twice the bytes.

So where a call's operand differs from the kernel's layout only in its
index widths, its first such call compiles the function's variant with
the argument's layout at the operand's widths (the same program with a
``sparse_iter.decompose`` rule on the argument, :mod:`sparsecomp.compiler.variants`;
the compile cache keeps it), and every call with those widths goes to the
variant: a ``SparseTensor`` through its fast path, a scipy matrix with its
arrays shared, nothing copied. The ``sparsecomp`` logger says when a
variant is compiled and what it took. Only executables that
``sparsecomp.compile`` returned can compile variants (a loaded directory
converts, as before); ``SPARSECOMP_SPECIALIZE=0`` turns variants off. A
variant that cannot be compiled (arguments of one type given different
widths, say) is remembered, and its calls convert.

The widths are a storage detail: results are the same, except that a
sparse result of the argument's type (SDDMM's) comes back with the
operand's widths.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from sparsecomp import knobs
from sparsecomp.errors import SparsecompError
from sparsecomp.formats.layout import Layout
from sparsecomp.formats.scipyio import compressed_kind
from sparsecomp.formats.tensor import SparseTensor
from sparsecomp.formats.validate import index_dtype
from sparsecomp.runtime.abi import Signature

_log = logging.getLogger("sparsecomp")

#: Compiles the function with these arguments in these layouts (attribute text).
Compile = Callable[[Mapping[int, str]], Any]


def operand_layout(layout: Layout, value: Any) -> Layout | None:
    """``layout`` at the index widths ``value`` has, where they differ and nothing
    else does; else None (the operand needs no variant, or a conversion anyway)."""
    if type(value) is SparseTensor:
        got = value.layout
        if not isinstance(got, Layout) or got == layout:
            return None
        if got.with_widths(layout.pos_width, layout.crd_width) != layout:
            return None
    else:
        kind = compressed_kind(layout)
        if kind is None or getattr(value, "format", None) != kind:
            return None
        pos, crd = getattr(value, "indptr", None), getattr(value, "indices", None)
        if not (isinstance(pos, np.ndarray) and isinstance(crd, np.ndarray)):
            return None
        if pos.dtype.kind != "i" or crd.dtype.kind != "i":
            return None
        got = layout.with_widths(8 * pos.dtype.itemsize, 8 * crd.dtype.itemsize)
    same = index_dtype(got.pos_width) == index_dtype(layout.pos_width) and index_dtype(
        got.crd_width
    ) == index_dtype(layout.crd_width)
    return None if same else got


class Specializer:
    """Per function: picks (and compiles once) the variant for a call's index widths."""

    def __init__(self, sig: Signature, compile_variant: Compile) -> None:
        self.name = sig.name
        self.sparse = tuple(
            (i, spec.layout)
            for i, spec in enumerate(sig.args)
            if spec.kind == "sparse" and isinstance(spec.layout, Layout)
        )
        self.compile_variant = compile_variant
        #: rules (argument -> layout text) -> the variant's function, or None (not compilable)
        self.variants: dict[tuple[tuple[int, str], ...], Any] = {}

    def pick(self, args: tuple[Any, ...]) -> Any:
        """The variant function for ``args``' index widths, or None (call this one)."""
        if not self.sparse or len(args) < len(self.sparse) or not knobs.specialize():
            return None
        rules = {}
        for i, layout in self.sparse:
            if i < len(args) and (got := operand_layout(layout, args[i])) is not None:
                rules[i] = got.attr_text()
        if not rules:
            return None
        key = tuple(sorted(rules.items()))
        if key not in self.variants:
            self.variants[key] = self._compile(rules)
        return self.variants[key]

    def _compile(self, rules: dict[int, str]) -> Any:
        what = ", ".join(f"argument {i}: {text}" for i, text in rules.items())
        started = time.perf_counter()
        try:
            variant = self.compile_variant(rules)
        except SparsecompError as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            _log.warning(
                "'%s': no variant for the operands' index widths (%s): %s; such calls convert "
                "their operands at every call",
                self.name,
                what,
                first,
            )
            return None
        _log.info(
            "'%s': compiled its variant for the operands' index widths (%s) in %.2f s; "
            "calls with them convert nothing",
            self.name,
            what,
            time.perf_counter() - started,
        )
        return variant
