"""Layouts: the host-side twin of ``#sparse_iter.layout`` and ``#sparse_iter.composable``.

A :class:`Layout` is one storage decision: level formats
(:mod:`sparsecomp.formats.levels`), the dimension-to-level map
(:mod:`sparsecomp.formats.dimmap`), position/coordinate bit widths and
options (a shared index group, the n:m metadata layout). A
:class:`Composable` splits one tensor into parts, each with its own layout,
and a rule per part that says which nonzeros it holds.

Both map 1:1 to attribute text: ``Layout.parse(layout.attr_text()) == layout``,
and the text is exactly what ``sparsecomp-opt`` prints. The checks here are
the single definition of a valid layout: the MLIR verifier
(:mod:`sparsecomp.ir.verify`) calls them too.

Short names (:func:`parse_layout`) cover the common cases for matrices::

    dense  csr  csc  coo  dcsr  ell  ell:K  bsr:RxC  nm:N:M
    hyb  hyb:P:W  bsr+csr:RxC  bsr+csr:RxC:MIN
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from sparsecomp.errors import FormatError
from sparsecomp.formats.attrtext import AttrNode, format_value, parse_attr
from sparsecomp.formats.dimmap import DimMap
from sparsecomp.formats.levels import Level

BIT_WIDTHS = (0, 8, 16, 32, 64)
#: How the coordinates of a ``structured[n,m]`` level are stored: one small
#: integer per kept element, or packed 2-bit indices in the register order
#: of PTX ``mma.sp`` for that instruction shape (2:4 only).
NM_METADATA = ("indices", "mma_sp_m16n8k16", "mma_sp_m16n8k32")
_GROUP = re.compile(r"[A-Za-z_][\w.$-]*")


@dataclass(frozen=True)
class Layout:
    """A resolved storage layout; see the module docstring."""

    levels: tuple[Level, ...]
    dim_to_lvl: DimMap
    pos_width: int = 32
    crd_width: int = 32
    index_group: str = ""
    nm_metadata: str = ""

    def __post_init__(self) -> None:
        self.check()

    @property
    def rank(self) -> int:
        return self.dim_to_lvl.n_dims

    @property
    def n_levels(self) -> int:
        return len(self.levels)

    @property
    def is_structured(self) -> bool:
        return bool(self.levels) and self.levels[-1].kind == "structured"

    def with_widths(self, pos_width: int, crd_width: int) -> Layout:
        return replace(self, pos_width=pos_width, crd_width=crd_width)

    def check(self) -> None:
        """Raise :class:`FormatError` naming the first inconsistency."""
        if not self.levels:
            raise FormatError("a layout needs at least one level")
        if self.dim_to_lvl.n_levels != len(self.levels):
            raise FormatError(
                f"dim_to_lvl has {self.dim_to_lvl.n_levels} results "
                f"but the layout has {len(self.levels)} levels"
            )
        for key in ("pos_width", "crd_width"):
            if getattr(self, key) not in BIT_WIDTHS:
                raise FormatError(
                    f"{key} must be one of 0, 8, 16, 32, 64, got {getattr(self, key)}"
                )
        for i, level in enumerate(self.levels):
            level.check()
            if level.kind == "singleton":
                prev = self.levels[i - 1] if i else None
                if prev is None or prev.kind == "dense" or not prev.nonunique:
                    raise FormatError(
                        f"singleton level {i} must follow a nonunique compressed, "
                        "loose_compressed or singleton level"
                    )
            if level.kind == "structured":
                self._check_structured(i, level)
        if self.nm_metadata and self.nm_metadata not in NM_METADATA:
            raise FormatError(
                f"unknown nm_metadata '{self.nm_metadata}'; "
                f"expected one of {', '.join(NM_METADATA)}"
            )
        if self.nm_metadata.startswith("mma_sp") and not (
            self.is_structured and (self.levels[-1].n, self.levels[-1].m) == (2, 4)
        ):
            raise FormatError(
                f"nm_metadata '{self.nm_metadata}' needs a structured[2,4] last level"
            )
        if self.nm_metadata and not self.is_structured:
            raise FormatError("nm_metadata needs a structured last level")
        if self.index_group and not _GROUP.fullmatch(self.index_group):
            raise FormatError(f"index_group must be an identifier, got '{self.index_group}'")

    def _check_structured(self, i: int, level: Level) -> None:
        if i != len(self.levels) - 1:
            raise FormatError(f"structured level {i} must be the last level")
        if any(lv.name != "dense_fixed" for lv in self.levels[:i]):
            raise FormatError(f"the levels before structured level {i} must be dense_fixed")
        expr = self.dim_to_lvl.results[i]
        if expr.op != "mod" or expr.const != level.m:
            raise FormatError(f"structured[{level.n},{level.m}] level needs 'd mod {level.m}'")

    # -- text ----------------------------------------------------------------
    def attr_node(self) -> AttrNode:
        options: dict[str, Any] = {}
        if self.index_group:
            options["index_group"] = self.index_group
        if self.nm_metadata:
            options["nm_metadata"] = self.nm_metadata
        levels = [str(level) for level in self.levels]
        return AttrNode(
            "layout", (levels, self.dim_to_lvl, self.pos_width, self.crd_width, options)
        )

    def attr_text(self) -> str:
        """``#sparse_iter.layout<...>`` exactly as MLIR prints it."""
        return format_value(self.attr_node())

    @classmethod
    def from_node(cls, node: AttrNode) -> Layout:
        if node.mnemonic != "layout" or len(node.args) != 5:
            raise FormatError(
                f"expected #sparse_iter.layout with 5 parameters, got {format_value(node)}"
            )
        levels, dim_to_lvl, pos_width, crd_width, options = node.args
        _expect(levels, list, "levels", "an array of level format strings")
        _expect(dim_to_lvl, DimMap, "dim_to_lvl", "an affine map")
        _expect(pos_width, int, "pos_width", "an integer")
        _expect(crd_width, int, "crd_width", "an integer")
        _expect(options, dict, "options", "a dictionary")
        for lv in levels:
            _expect(lv, str, "each level format", "a string")
        for key in ("index_group", "nm_metadata"):
            _expect(options.get(key, ""), str, key, "a string")
        unknown = set(options) - {"index_group", "nm_metadata"}
        if unknown:
            raise FormatError(f"unknown layout option(s) {', '.join(sorted(unknown))}")
        return cls(
            tuple(Level.parse(lv) for lv in levels),
            dim_to_lvl,
            pos_width,
            crd_width,
            options.get("index_group", ""),
            options.get("nm_metadata", ""),
        )

    def __str__(self) -> str:
        return short_name(self) or self.attr_text()


RULES = {"ell_bucket": 4, "block_dense": 3, "rest": 0}


@dataclass(frozen=True)
class Part:
    """One part of a composable layout and the rule that fills it.

    Rules take the nonzeros that earlier parts left, in order:

    * ``ell_bucket [p, P, lo, hi]``: in column partition ``p`` of ``P`` equal
      partitions (width ``ceil(ncols / P)``), the rows whose remaining
      nonzeros in that partition number more than ``lo`` and at most ``hi``;
      stored as a row list plus ``hi`` slots per row.
    * ``block_dense [R, C, k]``: aligned R x C blocks holding at least ``k``
      remaining nonzeros.
    * ``rest []``: everything left; the last part must be ``rest``.
    """

    rule: str
    params: tuple[int, ...]
    layout: Layout

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise FormatError(
                f"unknown part rule '{self.rule}'; expected one of {', '.join(RULES)}"
            )
        if len(self.params) != RULES[self.rule]:
            raise FormatError(
                f"rule '{self.rule}' takes {RULES[self.rule]} params, got {len(self.params)}"
            )
        if self.rule == "ell_bucket":
            p, parts, lo, hi = self.params
            if not (0 <= p < parts and 0 <= lo < hi):
                raise FormatError(
                    f"ell_bucket needs 0 <= p < P and 0 <= lo < hi, got {self.params}"
                )
            names = [lv.name for lv in self.layout.levels]
            if names != ["compressed_varied", "compressed_fixed"] or self.layout.levels[
                1
            ].width not in (None, hi):
                raise FormatError(
                    f"an ell_bucket part stores [compressed_varied, compressed_fixed[{hi}]], "
                    f"got {[str(lv) for lv in self.layout.levels]}"
                )
        if self.rule == "block_dense":
            r, c, k = self.params
            if min(r, c, k) <= 0 or k > r * c:
                raise FormatError(f"block_dense needs R, C > 0 and 0 < k <= R*C, got {self.params}")
            if self.layout.dim_to_lvl.block_sizes() != (r, c):
                raise FormatError(
                    f"a block_dense [{r}, {c}, ...] part needs a {r}x{c} blocked layout"
                )

    def attr_node(self) -> AttrNode:
        return AttrNode("part", (self.rule, tuple(self.params), self.layout.attr_node()))


@dataclass(frozen=True)
class Composable:
    """A tensor split into parts; every nonzero lives in exactly one part."""

    parts: tuple[Part, ...]
    name: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.parts:
            raise FormatError("a composable layout needs at least one part")
        if self.parts[-1].rule != "rest" or any(p.rule == "rest" for p in self.parts[:-1]):
            raise FormatError("the last part of a composable layout, and only it, must be 'rest'")
        ranks = {p.layout.rank for p in self.parts}
        if len(ranks) != 1:
            raise FormatError(f"all parts must have the same rank, got {sorted(ranks)}")

    @property
    def rank(self) -> int:
        return self.parts[0].layout.rank

    def attr_node(self) -> AttrNode:
        return AttrNode("composable", ([p.attr_node() for p in self.parts],))

    def attr_text(self) -> str:
        return format_value(self.attr_node())

    @classmethod
    def from_node(cls, node: AttrNode) -> Composable:
        if node.mnemonic != "composable" or len(node.args) != 1:
            raise FormatError(
                f"expected #sparse_iter.composable with 1 parameter, got {format_value(node)}"
            )
        _expect(node.args[0], list, "parts", "an array of #sparse_iter.part")
        parts = []
        for p in node.args[0]:
            if not isinstance(p, AttrNode) or p.mnemonic != "part" or len(p.args) != 3:
                raise FormatError(
                    f"composable parts must be #sparse_iter.part<...>, got {format_value(p)}"
                )
            rule, params, layout = p.args
            _expect(rule, str, "a part's rule", "a string")
            _expect(params, tuple, "a part's params", "an array<i64: ...>")
            _expect(layout, AttrNode, "a part's layout", "a #sparse_iter.layout")
            parts.append(Part(rule, tuple(params), Layout.from_node(layout)))
        return cls(tuple(parts))

    def __str__(self) -> str:
        return self.name or self.attr_text()

    # -- the standard decompositions -------------------------------------------
    @classmethod
    def hyb(cls, col_parts: int = 1, max_width: int = 32) -> Composable:
        """SparseTIR's hyb: per column partition, ELL buckets of widths 1, 2, 4 .. max_width.

        Rows longer than ``max_width`` in a partition go to a CSR remainder.
        """
        if col_parts <= 0 or max_width <= 0 or max_width & (max_width - 1):
            raise FormatError(
                f"hyb needs col_parts > 0 and a power-of-two max_width, "
                f"got {col_parts}, {max_width}"
            )
        parts = []
        for p in range(col_parts):
            lo, hi = 0, 1
            while hi <= max_width:
                parts.append(Part("ell_bucket", (p, col_parts, lo, hi), ell_bucket_layout(hi)))
                lo, hi = hi, hi * 2
        parts.append(Part("rest", (), parse_single("csr")))
        name = "hyb" if (col_parts, max_width) == (1, 32) else f"hyb:{col_parts}:{max_width}"
        return cls(tuple(parts), name)

    @classmethod
    def bsr_rest(cls, r: int, c: int, min_nnz: int | None = None) -> Composable:
        """Dense-enough R x C blocks in BSR, the rest in CSR."""
        k = max(1, (r * c) // 4) if min_nnz is None else min_nnz
        part = Part("block_dense", (r, c, k), parse_single(f"bsr:{r}x{c}"))
        suffix = "" if min_nnz is None else f":{k}"
        return cls((part, Part("rest", (), parse_single("csr"))), f"bsr+csr:{r}x{c}{suffix}")


def _expect(value: Any, kind: type, what: str, expected: str) -> None:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise FormatError(f"{what} must be {expected}, got {format_value(value)}")


def ell_bucket_layout(width: int) -> Layout:
    """A row list plus ``width`` coordinate slots per row."""
    levels = (Level.parse("compressed_varied"), Level.parse(f"compressed_fixed[{width}]"))
    return Layout(levels, DimMap.identity(2))


AnyLayout = Layout | Composable


def layout_from_attr(text: str) -> AnyLayout:
    """A layout from ``#sparse_iter.layout<...>`` or ``#sparse_iter.composable<...>`` text."""
    node = parse_attr(text)
    if node.mnemonic == "composable":
        return Composable.from_node(node)
    return Layout.from_node(node)


def _levels(*names: str) -> tuple[Level, ...]:
    return tuple(Level.parse(n) for n in names)


def _simple(name: str, rank: int) -> Layout | None:
    ident = DimMap.identity(rank)
    if name == "dense":
        return Layout(_levels(*["dense_fixed"] * rank), ident)
    if name == "csr":
        return Layout(_levels(*["dense_fixed"] * (rank - 1), "compressed_varied"), ident)
    if name == "dcsr":
        return Layout(_levels(*["compressed_varied"] * rank), ident)
    if name == "coo":
        tail = ["singleton(nonunique)"] * (rank - 2) + ["singleton"] if rank > 1 else []
        head = "compressed_varied(nonunique)" if rank > 1 else "compressed_varied"
        return Layout(_levels(head, *tail), ident)
    if name == "csc" and rank == 2:
        return Layout(_levels("dense_fixed", "compressed_varied"), DimMap.permutation((1, 0)))
    if name == "ell" and rank == 2:
        return Layout(_levels("dense_fixed", "compressed_fixed"), ident)
    return None


def parse_layout(text: str | AnyLayout, rank: int = 2) -> AnyLayout:
    """A layout from a short name, attribute text, or a layout object (returned as is)."""
    if isinstance(text, Layout | Composable):
        return text
    name = text.strip()
    if name.startswith("#sparse_iter."):
        return layout_from_attr(name)
    if rank < 1:
        raise FormatError(f"layouts need rank >= 1, got {rank}")
    simple = _simple(name, rank)
    if simple is not None:
        return simple
    if rank == 2 and (m := re.fullmatch(r"ell:(\d+)", name)):
        return Layout(_levels("dense_fixed", f"compressed_fixed[{m.group(1)}]"), DimMap.identity(2))
    if rank == 2 and (m := re.fullmatch(r"bsr:(\d+)x(\d+)", name)):
        r, c = int(m.group(1)), int(m.group(2))
        levels = _levels("dense_fixed", "compressed_varied", "dense_fixed", "dense_fixed")
        return Layout(levels, DimMap.blocked((r, c)))
    if rank == 2 and (m := re.fullmatch(r"nm:(\d+):(\d+)", name)):
        n, mm = int(m.group(1)), int(m.group(2))
        dmap = DimMap.parse(f"(d0, d1) -> (d0, d1 floordiv {mm}, d1 mod {mm})")
        return Layout(_levels("dense_fixed", "dense_fixed", f"structured[{n},{mm}]"), dmap)
    if rank == 2 and (m := re.fullmatch(r"hyb(?::(\d+):(\d+))?", name)):
        return Composable.hyb(int(m.group(1) or 1), int(m.group(2) or 32))
    if rank == 2 and (m := re.fullmatch(r"bsr\+csr:(\d+)x(\d+)(?::(\d+))?", name)):
        k = int(m.group(3)) if m.group(3) else None
        return Composable.bsr_rest(int(m.group(1)), int(m.group(2)), k)
    raise FormatError(
        f"unknown layout '{text}' for rank {rank}",
        hint="short names: dense, csr, csc, coo, dcsr, ell, ell:K, bsr:RxC, nm:N:M, hyb, hyb:P:W, "
        "bsr+csr:RxC[:MIN], or #sparse_iter.layout<...> text",
    )


def parse_single(text: str | Layout, rank: int = 2) -> Layout:
    """Like :func:`parse_layout`, for a single (non-composable) layout."""
    result = parse_layout(text, rank)
    if not isinstance(result, Layout):
        raise FormatError(f"'{text}' is a composable layout; a single layout is needed here")
    return result


def short_name(layout: Layout) -> str | None:
    """The short name that parses to ``layout``, if there is one."""
    rank = layout.rank
    candidates = ["dense", "csr", "dcsr", "coo", "csc", "ell"]
    blocks = layout.dim_to_lvl.block_sizes()
    if rank == 2 and blocks != (1, 1):
        candidates.append(f"bsr:{blocks[0]}x{blocks[1]}")
    if layout.is_structured:
        candidates.append(f"nm:{layout.levels[-1].n}:{layout.levels[-1].m}")
    if rank == 2 and layout.levels[-1].width is not None:
        candidates.append(f"ell:{layout.levels[-1].width}")
    for name in candidates:
        try:
            if parse_layout(name, rank) == layout:
                return name
        except FormatError:
            continue
    return None
