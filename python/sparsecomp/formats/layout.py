"""Layouts: the host-side twin of ``#sparse_iter.layout``.

A :class:`Layout` is one storage decision: level formats
(:mod:`sparsecomp.formats.levels`), the dimension-to-level map
(:mod:`sparsecomp.formats.dimmap`), position/coordinate bit widths and
options (a shared index group, the n:m metadata layout). It maps 1:1 to
attribute text: ``layout_from_attr(layout.attr_text()) == layout``, and the
text is exactly what ``sparsecomp-opt`` prints::

    #sparse_iter.layout<{map = (d0, d1) -> (d0 : dense, d1 : compressed),
                         posWidth = 32, crdWidth = 32}>

A width of 0 (index width) is not printed, and reads back when omitted. The
checks here are the single definition of a valid layout: the MLIR verifier
(:mod:`sparsecomp.ir.verify`) runs them on the attribute text.

:func:`standard_layout` builds the single layouts that have short names
(``dense csr csc coo dcsr ell ell:K bsr:RxC nm:N:M``); composable ones are in
:mod:`sparsecomp.formats.composable`, parsing of any name in
:mod:`sparsecomp.formats.names`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from sparsecomp.errors import FormatError
from sparsecomp.formats.attrtext import AttrNode, Keyword, Raw, format_value, split_top_level
from sparsecomp.formats.dimmap import DimMap
from sparsecomp.formats.levels import Level
from sparsecomp.formats.literals import format_string

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
        for key, width in (("posWidth", self.pos_width), ("crdWidth", self.crd_width)):
            if width not in BIT_WIDTHS:
                raise FormatError(f"{key} must be one of 0, 8, 16, 32, 64, got {width}")
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
                f"unknown nmMetadata '{self.nm_metadata}'; expected one of {', '.join(NM_METADATA)}"
            )
        if self.nm_metadata.startswith("mma_sp") and not (
            self.is_structured and (self.levels[-1].n, self.levels[-1].m) == (2, 4)
        ):
            raise FormatError(
                f"nmMetadata '{self.nm_metadata}' needs a structured[2, 4] last level"
            )
        if self.nm_metadata.startswith("mma_sp") and self.crd_width != 32:
            # the metadata is 32-bit words (formats/mma_sp.py), which kernels read as i32
            got = str(self.crd_width) if self.crd_width else "none (64-bit)"
            raise FormatError(
                f"nmMetadata '{self.nm_metadata}' is 32-bit words: it needs crdWidth = 32, "
                f"got {got}"
            )
        if self.nm_metadata and not self.is_structured:
            raise FormatError("nmMetadata needs a structured last level")
        if self.index_group and not _GROUP.fullmatch(self.index_group):
            raise FormatError(f"indexGroup must be an identifier, got '{self.index_group}'")

    def _check_structured(self, i: int, level: Level) -> None:
        if i != len(self.levels) - 1:
            raise FormatError(f"structured level {i} must be the last level")
        if any(lv.name != "dense_fixed" for lv in self.levels[:i]):
            raise FormatError(f"the levels before structured level {i} must be dense")
        expr = self.dim_to_lvl.results[i]
        if expr.op != "mod" or expr.const != level.m:
            raise FormatError(f"structured[{level.n}, {level.m}] level needs 'd mod {level.m}'")

    # -- text ----------------------------------------------------------------
    def attr_text(self) -> str:
        """``#sparse_iter.layout<{map = ...}>`` exactly as MLIR prints it."""
        dims = ", ".join(f"d{d}" for d in range(self.rank))
        results = zip(self.dim_to_lvl.results, self.levels, strict=True)
        levels = ", ".join(f"{expr} : {level}" for expr, level in results)
        entries = [f"map = ({dims}) -> ({levels})"]
        if self.pos_width:
            entries.append(f"posWidth = {self.pos_width}")
        if self.crd_width:
            entries.append(f"crdWidth = {self.crd_width}")
        if self.index_group:
            entries.append(f"indexGroup = {format_string(self.index_group)}")
        if self.nm_metadata:
            entries.append(f"nmMetadata = {self.nm_metadata}")
        return f"#sparse_iter.layout<{{{', '.join(entries)}}}>"

    @classmethod
    def from_node(cls, node: AttrNode) -> Layout:
        (entries,) = node.args_of("layout", 1)
        _expect(entries, dict, "a layout", "{map = ..., posWidth = ..., ...}")
        unknown = set(entries) - set(_KEYS)
        if unknown:
            raise FormatError(
                f"unknown layout key(s) {', '.join(sorted(unknown))}; expected {', '.join(_KEYS)}"
            )
        if "map" not in entries:
            raise FormatError("a layout needs 'map = (dims) -> (levels)'")
        dim_to_lvl, levels = _level_map(entries["map"])
        widths = [entries.get(k, 0) for k in ("posWidth", "crdWidth")]
        for key, width in zip(("posWidth", "crdWidth"), widths, strict=True):
            _expect(width, int, key, "an integer")
        group = entries.get("indexGroup", "")
        _expect(group, str, "indexGroup", "a string")
        metadata = entries.get("nmMetadata", Keyword(""))
        _expect(metadata, Keyword, "nmMetadata", "a bare name")
        return cls(levels, dim_to_lvl, widths[0], widths[1], group, metadata.name)

    def __str__(self) -> str:
        return short_name(self) or self.attr_text()


_KEYS = ("map", "posWidth", "crdWidth", "indexGroup", "nmMetadata")


def _level_map(value: Any) -> tuple[DimMap, tuple[Level, ...]]:
    """``(i, j) -> (i : dense, j : compressed)``: the map and one level per result."""
    text = value.text if isinstance(value, Raw) else format_value(value)
    match = re.fullmatch(r"\(([^)]*)\)\s*->\s*\((.*)\)", text.strip(), re.S)
    if not match:
        raise FormatError(f"malformed layout map '{text}'; expected (i, j) -> (i : dense, ...)")
    names = [n.strip() for n in match.group(1).split(",") if n.strip()]
    exprs, levels = [], []
    for result in split_top_level(match.group(2)):
        pieces = split_top_level(result, ":")
        if len(pieces) != 2:
            raise FormatError(f"'{result}' in '{text}' needs a level format: 'expr : format'")
        exprs.append(pieces[0])
        levels.append(Level.parse(pieces[1]))
    return DimMap.from_names(names, exprs, text), tuple(levels)


def _expect(value: Any, kind: type, what: str, expected: str) -> None:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise FormatError(f"{what} must be {expected}, got {format_value(value)}")


def _levels(*names: str) -> tuple[Level, ...]:
    return tuple(Level.parse(n) for n in names)


def standard_layout(name: str, rank: int = 2) -> Layout | None:
    """The single layout called ``name`` for tensors of ``rank``, or None."""
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
    return _parameterized(name) if rank == 2 else None


def _parameterized(name: str) -> Layout | None:
    if m := re.fullmatch(r"ell:(\d+)", name):
        return Layout(_levels("dense_fixed", f"compressed_fixed[{m.group(1)}]"), DimMap.identity(2))
    if m := re.fullmatch(r"bsr:(\d+)x(\d+)", name):
        r, c = int(m.group(1)), int(m.group(2))
        if not (r and c):
            raise FormatError(f"'{name}': block sizes must be positive, got {r}x{c}")
        levels = _levels("dense_fixed", "compressed_varied", "dense_fixed", "dense_fixed")
        return Layout(levels, DimMap.blocked((r, c)))
    if m := re.fullmatch(r"nm:(\d+):(\d+)", name):
        n, mm = int(m.group(1)), int(m.group(2))
        dmap = DimMap.parse(f"(d0, d1) -> (d0, d1 floordiv {mm}, d1 mod {mm})")
        return Layout(_levels("dense_fixed", "dense_fixed", f"structured[{n},{mm}]"), dmap)
    return None


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
            if standard_layout(name, rank) == layout:
                return name
        except FormatError:
            continue
    return None
