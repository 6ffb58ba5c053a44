"""Level formats: one storage level of a sparse layout.

A level format is written as a string, the same in ``#sparse_iter.layout``
attributes and in Python (``str(level)`` is this spelling)::

    dense                    every coordinate of the level is stored (no buffers)
    dense_varied             ragged: a varying prefix 0..len-1 per parent (positions)
    compressed               CSR-like: positions + coordinates
    compressed_fixed         ELL: a fixed number of coordinates per parent
    compressed_fixed[8]        ... with the width fixed at compile time
    loose_compressed         compressed with (lo, hi) position pairs per parent
    singleton                one coordinate per parent position (COO's trailing levels)
    structured[2, 4]         n:m: n stored coordinates in every m-wide group

followed by optional properties in parentheses, as in upstream MLIR:
``compressed(nonunique)``, ``singleton(nonordered, soa)``.

The dense/compressed x fixed/varied grid is SparseTIR's sparse iterator
kinds: :attr:`Level.name` uses its names (``dense_fixed``,
``compressed_varied``, ...), which :meth:`Level.parse` also accepts;
``singleton``, ``loose_compressed``, ``structured`` and the properties are
MLIR's ``sparse_tensor`` level types, spelled as upstream spells them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from sparsecomp.errors import FormatError

LevelKind = Literal["dense", "compressed", "loose_compressed", "singleton", "structured"]

#: Every base format name and whether it takes a ``[...]`` argument list.
BASE_FORMATS: dict[str, tuple[LevelKind, bool, str]] = {
    # name: (kind, varied, allowed argument count spec)
    "dense_fixed": ("dense", False, ""),
    "dense_varied": ("dense", True, ""),
    "compressed_fixed": ("compressed", False, "0|1"),
    "compressed_varied": ("compressed", True, ""),
    "loose_compressed": ("loose_compressed", True, ""),
    "singleton": ("singleton", False, ""),
    "structured": ("structured", False, "2"),
}
#: Where the attribute spelling differs from :attr:`Level.name` (upstream's names).
SPELLINGS = {"dense_fixed": "dense", "compressed_varied": "compressed"}
_ALIASES = {spelled: name for name, spelled in SPELLINGS.items()}
PROPERTIES = ("nonunique", "nonordered", "soa")

_SYNTAX = re.compile(r"^([a-z_]+)\s*(?:\[([^\]]*)\])?\s*(?:\(([^)]*)\))?$")


@dataclass(frozen=True)
class Level:
    """One level format; ``Level.parse(str(level)) == level``."""

    kind: LevelKind
    varied: bool = False
    width: int | None = None  # compressed_fixed: static width; None = known at run time
    n: int = 0  # structured[n, m]
    m: int = 0
    nonunique: bool = False
    nonordered: bool = False
    soa: bool = False

    @property
    def name(self) -> str:
        """The base format name, e.g. ``"compressed_fixed"``."""
        if self.kind in ("dense", "compressed"):
            return f"{self.kind}_{'varied' if self.varied else 'fixed'}"
        return self.kind

    @property
    def has_positions(self) -> bool:
        """Whether the level stores a positions buffer."""
        return self.varied

    @property
    def has_coordinates(self) -> bool:
        """Whether the level stores a coordinates buffer."""
        return self.kind != "dense"

    @property
    def is_unique(self) -> bool:
        return not self.nonunique

    def __str__(self) -> str:
        text = SPELLINGS.get(self.name, self.name)
        if self.kind == "structured":
            text += f"[{self.n}, {self.m}]"
        elif self.width is not None:
            text += f"[{self.width}]"
        props = [p for p in PROPERTIES if getattr(self, p)]
        return f"{text}({', '.join(props)})" if props else text

    @classmethod
    def parse(cls, text: str) -> Level:
        """Parse a level format string; :class:`FormatError` names the problem."""
        match = _SYNTAX.match(text.strip())
        if not match:
            raise FormatError(f"malformed level format '{text}'")
        base, args_text, props_text = match.groups()
        base = _ALIASES.get(base, base)
        if base not in BASE_FORMATS:
            valid = ", ".join(SPELLINGS.get(b, b) for b in BASE_FORMATS)
            raise FormatError(f"unknown level format '{base}'; expected one of {valid}")
        kind, varied, arity = BASE_FORMATS[base]
        args = _ints(text, args_text)
        if str(len(args)) not in (arity or "0").split("|"):
            raise FormatError(f"level format '{text}' takes {arity or 'no'} arguments in [...]")
        props = [p.strip() for p in props_text.split(",")] if props_text else []
        for p in props:
            if p not in PROPERTIES:
                raise FormatError(
                    f"unknown level property '{p}' in '{text}'; expected {', '.join(PROPERTIES)}"
                )
        level = cls(
            kind=kind,
            varied=varied,
            width=args[0] if kind == "compressed" and args else None,
            n=args[0] if kind == "structured" else 0,
            m=args[1] if kind == "structured" else 0,
            **{p: True for p in props},
        )
        level.check()
        return level

    def check(self) -> None:
        """Raise :class:`FormatError` if the level's parameters are inconsistent."""
        if self.kind == "structured" and not 0 < self.n <= self.m:
            raise FormatError(f"structured[n, m] needs 0 < n <= m, got [{self.n}, {self.m}]")
        if self.soa and self.kind != "singleton":
            raise FormatError(f"the soa property applies to singleton levels only: '{self}'")
        if self.width is not None and self.width <= 0:
            raise FormatError(f"compressed_fixed width must be positive, got {self.width}")
        if self.kind in ("dense", "structured") and (self.nonunique or self.nonordered or self.soa):
            raise FormatError(f"{self.kind} levels take no properties: '{self}'")


def _ints(text: str, args_text: str | None) -> list[int]:
    if not args_text:
        return []
    try:
        return [int(a) for a in args_text.split(",")]
    except ValueError:
        raise FormatError(f"level format arguments must be integers in '{text}'") from None
