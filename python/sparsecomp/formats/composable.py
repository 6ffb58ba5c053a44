"""Composable layouts: the host-side twin of ``#sparse_iter.composable``.

SparseTIR's composable formats: one tensor stored as several parts, each in
its own :class:`~sparsecomp.formats.layout.Layout`, with a rule per part that
says which nonzeros it holds (see :class:`Part`). :meth:`Composable.hyb` and
:meth:`Composable.bsr_rest` build the standard decompositions; packing is in
:mod:`sparsecomp.formats.compose`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sparsecomp.errors import FormatError
from sparsecomp.formats.attrtext import AttrNode, Indexed, Keyword, format_value
from sparsecomp.formats.dimmap import DimMap
from sparsecomp.formats.layout import Layout, _expect, standard_layout
from sparsecomp.formats.levels import Level

RULES = {"ell_bucket": 4, "block_dense": 3, "rest": 0}


@dataclass(frozen=True)
class Part:
    """One part of a composable layout and the rule that fills it.

    Rules take the nonzeros that earlier parts left, in order:

    * ``ell_bucket[p, P, lo, hi]``: in column partition ``p`` of ``P`` equal
      partitions (width ``ceil(ncols / P)``), the rows whose remaining
      nonzeros in that partition number more than ``lo`` and at most ``hi``;
      stored as a row list plus ``hi`` slots per row.
    * ``block_dense[R, C, k]``: aligned R x C blocks holding at least ``k``
      remaining nonzeros.
    * ``rest``: everything left; the last part must be ``rest``.
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
                    f"an ell_bucket part stores [compressed, compressed_fixed[{hi}]], "
                    f"got {[str(lv) for lv in self.layout.levels]}"
                )
        if self.rule == "block_dense":
            r, c, k = self.params
            if min(r, c, k) <= 0 or k > r * c:
                raise FormatError(f"block_dense needs R, C > 0 and 0 < k <= R*C, got {self.params}")
            if self.layout.dim_to_lvl.block_sizes() != (r, c):
                raise FormatError(
                    f"a block_dense[{r}, {c}, ...] part needs a {r}x{c} blocked layout"
                )

    def attr_text(self) -> str:
        """``#sparse_iter.part<rule[params], #sparse_iter.layout<...>>``."""
        rule = format_value(Indexed(self.rule, tuple(self.params)))
        return f"#sparse_iter.part<{rule}, {self.layout.attr_text()}>"

    @classmethod
    def from_node(cls, node: AttrNode) -> Part:
        rule, layout = node.args_of("part", 2)
        if isinstance(rule, Keyword):
            rule = Indexed(rule.name, ())
        _expect(rule, Indexed, "a part's rule", "a rule with integer params, e.g. rest")
        if not all(isinstance(p, int) for p in rule.args):
            raise FormatError(f"a part's params must be integers, got {format_value(rule)}")
        _expect(layout, AttrNode, "a part's layout", "a #sparse_iter.layout")
        return cls(rule.name, tuple(rule.args), Layout.from_node(layout))


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

    def attr_text(self) -> str:
        """``#sparse_iter.composable<[#sparse_iter.part<...>, ...]>``."""
        return f"#sparse_iter.composable<[{', '.join(p.attr_text() for p in self.parts)}]>"

    @classmethod
    def from_node(cls, node: AttrNode) -> Composable:
        (parts,) = node.args_of("composable", 1)
        _expect(parts, list, "parts", "an array of #sparse_iter.part")
        for p in parts:
            if not isinstance(p, AttrNode) or p.mnemonic != "part":
                raise FormatError(
                    f"composable parts must be #sparse_iter.part<...>, got {format_value(p)}"
                )
        return cls(tuple(Part.from_node(p) for p in parts))

    def __str__(self) -> str:
        return self.name or self.attr_text()

    def disjoint_rows(self) -> bool:
        """Whether every row lies whole in one part: ELL buckets of one column partition
        (a bucket takes all of a row's remaining entries) and the rest."""
        return all(p.rule == "ell_bucket" and p.params[1] == 1 for p in self.parts[:-1])

    def rest_min_row_entries(self) -> int | None:
        """A lower bound on the entries of every non-empty row of the ``rest`` part, if known.

        Where every earlier part is an ELL bucket and each column partition's
        buckets cover the row lengths ``(0, W_p]`` without a gap, a row that
        reaches the rest has more than ``W_p`` entries in some partition:
        the bound is ``min_p W_p + 1`` (hyb's rest: rows longer than its
        widest bucket). None otherwise (block parts take entries from rows).
        """
        covered: dict[int, list[tuple[int, int]]] = {}
        for part in self.parts[:-1]:
            if part.rule != "ell_bucket":
                return None
            p, _, lo, hi = part.params
            covered.setdefault(p, []).append((lo, hi))
        if not covered:
            return None
        widths = []
        for spans in covered.values():
            reach = 0
            for lo, hi in sorted(spans):
                if lo > reach:
                    break
                reach = max(reach, hi)
            widths.append(reach)
        return min(widths) + 1 if min(widths) > 0 else None

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
        parts.append(Part("rest", (), _standard("csr")))
        name = "hyb" if (col_parts, max_width) == (1, 32) else f"hyb:{col_parts}:{max_width}"
        return cls(tuple(parts), name)

    @classmethod
    def bsr_rest(cls, r: int, c: int, min_nnz: int | None = None) -> Composable:
        """Dense-enough R x C blocks in BSR, the rest in CSR."""
        k = max(1, (r * c) // 4) if min_nnz is None else min_nnz
        part = Part("block_dense", (r, c, k), _standard(f"bsr:{r}x{c}"))
        suffix = "" if min_nnz is None else f":{k}"
        return cls((part, Part("rest", (), _standard("csr"))), f"bsr+csr:{r}x{c}{suffix}")


def ell_bucket_layout(width: int) -> Layout:
    """A row list plus ``width`` coordinate slots per row."""
    levels = (Level.parse("compressed_varied"), Level.parse(f"compressed_fixed[{width}]"))
    return Layout(levels, DimMap.identity(2))


def _standard(name: str) -> Layout:
    layout = standard_layout(name)
    assert layout is not None, name
    return layout
