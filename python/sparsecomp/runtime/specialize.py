"""Kernel variants for what a call tells: its operands' index widths, its dense sizes.

Index widths (:class:`Specializer`).

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
converts, as before); ``SPARSECOMP_SPECIALIZE=0`` turns variants off, and ``profile=True``
builds have none (their counters are their own library's). A
variant that cannot be compiled (arguments of one type given different
widths, say) is remembered, and its calls convert.

An operand converted at the call (another format than the argument's
layout) is converted to that layout; where the layout's declared widths are
too narrow for it (8-bit coordinates and a 500-row matrix), the conversion
goes to a variant at widths that hold it (32 bits, 64 beyond 2^31 - 1), as
an operand in the layout's own format gets one at its own widths.

The widths are a storage detail: results are the same, except that a
sparse result of the argument's type (SDDMM's) comes back with the
operand's widths.

Guarded coordinates (:class:`Specializer` too). A scipy matrix goes to the
kernel with the caller's own arrays, which may change between calls, so the
runtime checks its indices at every call: one more pass over memory than
SpMV makes. Once a function has seen a scipy CSR (CSC) operand of
:data:`GUARD_FROM` entries for a csr (csc) argument, its scipy operands go to
a variant compiled with ``sparse_iter.guard`` on those arguments (and their
index widths, in the same compile): its kernel checks each coordinate as it
reads it (pass ``sparse-iter-guard-coordinates``) and reports through a
status word, and the runtime checks only the positions.
Until then the function's C path declines such operands (``decline``), so
that the Python path can pick the variant. An argument the pass cannot guard
(SDDMM copies its coordinates into its result) is never asked again, and
its variant serves as the index-width variant. CPU executables only.

Dense sizes (:class:`SizeSpecializer`), Triton-style. A dense operand's
last dimension that no sparse operand shares (SpMM's and SDDMM's ``K``) is
the length of every vector loop; dynamic, each loop needs masks and a
remainder. The first call with a given ``K`` (up to :data:`MAX_STATIC`)
compiles the function with those sizes static
(:func:`sparsecomp.compiler.variants.with_static_sizes`): SpMM at K=32
took 3.4 instead of 4.9 ms on R-MAT 2^16, 6.7 instead of 12.4 on a
2^18-row band and 3.0 instead of 5.7 on the 27-point FEM matrix (2-core
EPYC). Later calls with that ``K`` go to it; at most :data:`MAX_VARIANTS`
sizes per function, then the dynamic kernel. CPU executables only;
``SPARSECOMP_SPECIALIZE=0`` turns it off too.
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
from sparsecomp.formats.names import parse_layout
from sparsecomp.formats.scipyio import compressed_kind
from sparsecomp.formats.tensor import SparseTensor
from sparsecomp.formats.validate import index_dtype, index_max
from sparsecomp.runtime.abi import Signature

_log = logging.getLogger("sparsecomp")

#: Compiles the function with these arguments in these layouts (attribute text), and
#: these arguments' coordinates guarded.
Compile = Callable[[Mapping[int, str], tuple[int, ...]], Any]
#: A scipy operand with at least this many entries makes a function guard its scipy
#: operands' coordinates (below it the runtime's check costs less than a compile).
GUARD_FROM = 1 << 14


def _width_for(count: int, width: int) -> int:
    """``width``, or the narrowest of 32 and 64 bits whose buffers hold ``count``."""
    if count <= index_max(width):
        return width
    return 32 if count <= index_max(32) else 64


def _fitting(layout: Layout, value: Any) -> Layout | None:
    """``layout`` at index widths that hold ``value``'s sizes and entries, where its own
    (declared narrow: 8 or 16 bits) do not; else None. A conversion to it then succeeds
    where one to ``layout`` would be refused (conservative: any dimension's size for the
    coordinates, every entry for the positions)."""
    pos, crd = _needed_widths(layout, value)
    if (pos, crd) == (layout.pos_width, layout.crd_width):
        return None
    return layout.with_widths(pos, crd)


def _needed_widths(layout: Layout, value: Any) -> tuple[int, int]:
    """The position and coordinate widths ``value``'s entries and largest size need at
    ``layout``'s own (those, where they hold them); also a key of :attr:`Specializer.rules`,
    since :func:`_fitting` depends on nothing else."""
    shape, nnz = getattr(value, "shape", None), _entries(value)
    if not isinstance(shape, tuple) or not isinstance(nnz, int):
        return layout.pos_width, layout.crd_width
    return _width_for(nnz, layout.pos_width), _width_for(max(shape, default=0), layout.crd_width)


def _entries(value: Any) -> Any:
    """A tensor's stored entries (``nnz`` may unpack it), a scipy matrix's ``nnz``."""
    return value.nse if type(value) is SparseTensor else getattr(value, "nnz", None)


def operand_layout(layout: Layout, value: Any) -> Layout | None:
    """``layout`` at the index widths ``value`` has, where they differ and nothing
    else does; for an operand converted at the call, ``layout`` at widths that hold it
    where its own are too narrow; else None (no variant: the operand goes as it is, or is
    converted to ``layout``)."""
    if type(value) is SparseTensor:
        got = value.layout
        if not isinstance(got, Layout) or got == layout:
            return None
        if got.with_widths(layout.pos_width, layout.crd_width) != layout:
            return _fitting(layout, value)
    else:
        kind = compressed_kind(layout)
        if kind is None or getattr(value, "format", None) != kind:
            return _fitting(layout, value) if hasattr(value, "format") else None
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
    """Per function: picks (and compiles once) the variant for a call's index widths,
    and (``guard``) for its scipy operands' own arrays."""

    def __init__(self, sig: Signature, compile_variant: Compile, guard: bool = False) -> None:
        self.name = sig.name
        self.sparse = tuple(
            (i, spec.layout)
            for i, spec in enumerate(sig.args)
            if spec.kind == "sparse" and isinstance(spec.layout, Layout)
        )
        self.compile_variant = compile_variant
        #: arguments whose scipy operands may go to a guarded variant
        self.guardable = set(
            i
            for i, layout in self.sparse
            if guard
            and not (sig.args[i].guarded or sig.args[i].unguardable)
            and compressed_kind(layout) is not None
        )
        #: a scipy operand of GUARD_FROM entries came: scipy operands go guarded from now on
        self.guarding = False
        #: the C path declines scipy operands of at least ``decline[0]`` entries (< 0:
        #: none) to the Python path, which picks the guarded variant
        self.decline = np.full(1, -1, np.int64)
        #: (rules: (argument, layout text) pairs, guarded arguments) -> the variant's
        #: function, or None (not compilable)
        self.variants: dict[tuple[tuple[tuple[int, str], ...], tuple[int, ...]], Any] = {}
        #: (argument, kind of operand, its size class) -> the layout text it needs, or None
        self.rules: dict[tuple[int, Any, tuple[int, int]], str | None] = {}

    def pick(self, args: tuple[Any, ...]) -> Any:
        """The variant function for ``args``' index widths, or None (call this one)."""
        if not self.sparse or len(args) < len(self.sparse):
            return None
        if not any(_host_sparse(args[i]) for i, _ in self.sparse if i < len(args)):
            return None  # device tensors, prepared operands: nothing to specialize for
        if not knobs.specialize():
            return None
        rules = {}
        guards = []
        for i, layout in self.sparse:
            if i < len(args) and (text := self._rule(i, layout, args[i])) is not None:
                rules[i] = text
            if i in self.guardable and i < len(args) and self._guards(layout, args[i]):
                guards.append(i)
        if not rules and not guards:
            return None
        key = (tuple(sorted(rules.items())), tuple(guards))
        if key not in self.variants:
            variant = self._compile(rules, tuple(guards))
            if variant is None and guards:  # not guardable: never again, widths alone
                self._unguardable(set(guards))
                return self.pick(args)
            self.variants[key] = variant
        return self.variants[key]

    def _unguardable(self, arguments: set[int]) -> None:
        self.guardable -= arguments
        if not self.guardable:
            self.decline[0] = -1  # the C path takes every scipy operand again

    def _guards(self, layout: Layout, value: Any) -> bool:
        """Whether scipy operand ``value`` of a guardable argument of ``layout`` goes
        guarded: a CSR (CSC) matrix for a csr (csc) layout, which it goes to as it is
        (another is converted, and the conversion checks it)."""
        indices = getattr(value, "indices", None)
        if type(value) is SparseTensor or not isinstance(indices, np.ndarray):
            return False
        if indices.dtype.kind != "i" or getattr(value, "format", None) != compressed_kind(layout):
            return False
        if not self.guarding and indices.shape[0] >= GUARD_FROM:
            self.guarding = True
        return self.guarding

    def _rule(self, argument: int, layout: Layout, value: Any) -> str | None:
        """The layout text ``value`` needs at ``argument`` (None: none), remembered per
        kind of operand: the scipy format and index dtypes, or the tensor's layout."""
        if type(value) is SparseTensor:
            kind: Any = value.layout
        elif getattr(value, "format", None) == "coo":  # no indptr/indices: its widths
            kind = ("coo", value.row.dtype, value.col.dtype)
        else:
            pos, crd = getattr(value, "indptr", None), getattr(value, "indices", None)
            if not (isinstance(pos, np.ndarray) and isinstance(crd, np.ndarray)):
                return None
            kind = (getattr(value, "format", None), pos.dtype, crd.dtype)
        key = (argument, kind, _needed_widths(layout, value))
        if key not in self.rules:
            got = operand_layout(layout, value)
            self.rules[key] = None if got is None else got.attr_text()
        return self.rules[key]

    def _fitting(self, variant: Any, rules: dict[int, str]) -> Any:
        """``variant`` where each sparse argument has the widths the call asked for
        (its rule's, or this function's own); else an error. A program that types
        two arguments alike on the upstream sparsifier's road retypes both: a call
        with them in different widths then has no variant (its own variants would
        ask for the other's widths, and so on without end)."""
        args = variant.signature.args
        for i, layout in self.sparse:
            want = parse_layout(rules[i]) if i in rules else layout
            if not isinstance(want, Layout):
                continue  # a composable rule: none from a call's widths
            got = args[i].layout
            widths = (getattr(got, "pos_width", None), getattr(got, "crd_width", None))
            if widths != (want.pos_width, want.crd_width):
                raise SparsecompError(
                    f"its program gives argument {i} the widths of another of its type "
                    f"({widths[0]}, {widths[1]} bits, not {want.pos_width}, {want.crd_width})"
                )
        return variant

    def _compile(self, rules: dict[int, str], guards: tuple[int, ...]) -> Any:
        what = ", ".join(f"argument {i}: {text}" for i, text in rules.items())
        if not guards:
            return compiled(
                self.name,
                f"the operands' index widths ({what})",
                lambda: self._fitting(self.compile_variant(rules, ()), rules),
                ("calls with them convert nothing", "such calls convert their operands every call"),
            )
        named = ", ".join(str(i) for i in guards)
        what = f"scipy operands' own arrays (arguments {named}{'; ' + what if what else ''})"

        def build() -> Any:
            variant = self._fitting(self.compile_variant(rules, guards), rules)
            args = variant.signature.args
            refused = {i for i in guards if args[i].unguardable}
            if any(not args[i].guarded for i in set(guards) - refused):
                raise SparsecompError("its kernel does not guard them")  # lowered upstream
            if refused:  # a width variant all the same: calls with these widths use it
                _log.info(
                    "'%s': its kernel passes the coordinates of arguments %s on (into a "
                    "result, say): the runtime checks them",
                    self.name,
                    ", ".join(map(str, sorted(refused))),
                )
                self._unguardable(refused)
                self.variants[(tuple(sorted(rules.items())), ())] = variant
            return variant

        return compiled(
            self.name,
            what,
            build,
            (
                "calls with them go to it (its kernel checks the coordinates it can; "
                "the runtime, the others)",
                "the runtime checks every coordinate of theirs on every call",
            ),
            level=logging.INFO,  # calls go on as they did before: nothing is lost
        )


def compiled(
    name: str,
    what: str,
    build: Callable[[], Any],
    then: tuple[str, str],
    level: int = logging.WARNING,
) -> Any:
    """``build()``'s variant of function ``name``, logged with ``what`` it is for and
    ``then`` (what calls do with it, without it); None where it cannot be compiled
    (logged at ``level``)."""
    started = time.perf_counter()
    try:
        variant = build()
    except SparsecompError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        _log.log(level, "'%s': no variant for %s: %s; %s", name, what, first, then[1])
        return None
    seconds = time.perf_counter() - started
    _log.info("'%s': compiled its variant for %s in %.2f s; %s", name, what, seconds, then[0])
    return variant


#: Sizes above this stay dynamic (a variant per size would not pay).
MAX_STATIC = 1024
#: Static-size variants per function at most; further sizes run the dynamic kernel.
MAX_VARIANTS = 8
_MISSING = object()

#: Compiles the function with these dense sizes static: ``{argument: {dimension: size}}``.
CompileSizes = Callable[[Mapping[int, Mapping[int, int]]], Any]


def static_candidates(sig: Signature) -> tuple[tuple[int, int], ...]:
    """``(argument, dimension)`` of the sizes worth making static: the last dimension
    of each dense argument of rank >= 2 when it is dynamic and no sparse argument
    has it (a matrix dimension would mean a variant per matrix)."""
    sparse = [spec for spec in sig.args if spec.kind == "sparse"]
    if not sparse:
        return ()
    shared = {d for spec in sparse for d in spec.shape if isinstance(d, str)}
    out = []
    for i, spec in enumerate(sig.args):
        if spec.kind != "dense" or spec.rank < 2:
            continue
        size = spec.shape[-1]
        if isinstance(size, int) or (isinstance(size, str) and size in shared):
            continue
        out.append((i, spec.rank - 1))
    return tuple(out)


class SizeSpecializer:
    """Per function: picks (and compiles once) the variant for a call's dense sizes."""

    def __init__(self, sig: Signature, compile_variant: CompileSizes) -> None:
        self.name = sig.name
        self.dims = static_candidates(sig)
        #: candidates (positions in ``dims``) that one size symbol names: sizes must agree
        named: dict[str, list[int]] = {}
        for n, (i, dim) in enumerate(self.dims):
            if isinstance(symbol := sig.args[i].shape[dim], str):
                named.setdefault(symbol, []).append(n)
        self.same = tuple(tuple(group) for group in named.values() if len(group) > 1)
        self.compile_variant = compile_variant
        #: sizes, one per candidate -> the variant's function, or None (not compilable)
        self.variants: dict[tuple[int, ...], Any] = {}

    def pick(self, args: tuple[Any, ...]) -> Any:
        """The variant function for ``args``' sizes, or None (call this one)."""
        sizes = []
        for i, dim in self.dims:
            value = args[i] if i < len(args) else None
            if type(value) is not np.ndarray or value.ndim != dim + 1:
                return None  # (another rank: the function's own call says why, in its terms)
            size = value.shape[dim]
            if not 0 < size <= MAX_STATIC:
                return None
            sizes.append(size)
        for group in self.same:
            if len({sizes[n] for n in group}) > 1:
                return None  # sizes that must agree do not: the call says why
        key = tuple(sizes)
        found = self.variants.get(key, _MISSING)
        if found is _MISSING:
            if len(self.variants) >= MAX_VARIANTS or not knobs.specialize():
                return None
            found = self.variants[key] = self._compile(key)
        return found

    def _compile(self, key: tuple[int, ...]) -> Any:
        sizes: dict[int, dict[int, int]] = {}
        for (i, dim), size in zip(self.dims, key, strict=True):
            sizes.setdefault(i, {})[dim] = size
        what = ", ".join(f"argument {i}: {dims}" for i, dims in sizes.items())
        variant = compiled(
            self.name,
            f"the sizes {what}",
            lambda: self.compile_variant(sizes),
            ("calls with them go to it", "such calls run the dynamic kernel"),
        )
        if variant is not None:
            variant.sizes = None  # sized already: its calls go straight to it
        return variant


def _host_sparse(value: Any) -> bool:
    """Whether ``value`` is a sparse operand whose index widths can call for a variant:
    a SparseTensor or a scipy matrix (not a GPU's DeviceTensor, whose layout is the
    argument's already)."""
    return type(value) is SparseTensor or hasattr(value, "indptr") or hasattr(value, "row")
