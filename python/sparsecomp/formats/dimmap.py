"""Dimension-to-level maps: the affine maps sparse layouts use.

A layout stores a tensor's dimensions as levels through a map whose results
are each ``d``, ``d floordiv c`` or ``d mod c`` (MLIR's ``dimToLvl``): the
identity (CSR), a permutation (CSC), or block splits (BSR, n:m). Every
dimension appears either once plainly or as one ``floordiv c``/``mod c``
pair with the same ``c``. The text form is MLIR's:
``(d0, d1) -> (d0 floordiv 16, d1 floordiv 16, d0 mod 16, d1 mod 16)``.

Maps apply to coordinate arrays vectorized, with their inverse for unpacking.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import numpy as np

from sparsecomp.errors import FormatError

Op = Literal["id", "floordiv", "mod"]


@dataclass(frozen=True)
class LevelExpr:
    """One result of the map: ``d<dim>``, ``d<dim> floordiv c`` or ``d<dim> mod c``."""

    dim: int
    op: Op = "id"
    const: int = 1

    def __str__(self) -> str:
        return f"d{self.dim}" if self.op == "id" else f"d{self.dim} {self.op} {self.const}"


@dataclass(frozen=True)
class DimMap:
    """A dimension-to-level map over ``n_dims`` dimensions."""

    n_dims: int
    results: tuple[LevelExpr, ...]

    def __post_init__(self) -> None:
        self.check()

    # -- construction ---------------------------------------------------------
    @classmethod
    def identity(cls, n_dims: int) -> DimMap:
        return cls(n_dims, tuple(LevelExpr(d) for d in range(n_dims)))

    @classmethod
    def permutation(cls, perm: tuple[int, ...] | list[int]) -> DimMap:
        return cls(len(perm), tuple(LevelExpr(d) for d in perm))

    @classmethod
    def blocked(cls, blocks: tuple[int, ...] | list[int]) -> DimMap:
        """``(d0, d1) -> (d0 floordiv b0, d1 floordiv b1, d0 mod b0, d1 mod b1)``."""
        outer = [LevelExpr(d, "floordiv", b) for d, b in enumerate(blocks)]
        inner = [LevelExpr(d, "mod", b) for d, b in enumerate(blocks)]
        return cls(len(blocks), tuple(outer + inner))

    @classmethod
    def parse(cls, text: str) -> DimMap:
        """Parse ``(d0, d1) -> (...)``, optionally wrapped in ``affine_map<...>``."""
        body = text.strip()
        if body.startswith("affine_map<") and body.endswith(">"):
            body = body[len("affine_map<") : -1]
        if re.match(r"\([^)]*\)\s*\[", body.strip()):
            raise FormatError(f"dimension-to-level maps take no symbols: '{text}'")
        match = re.fullmatch(r"\(([^)]*)\)\s*->\s*\((.*)\)", body.strip())
        if not match:
            raise FormatError(f"malformed dimension-to-level map '{text}'")
        names = [n.strip() for n in match.group(1).split(",") if n.strip()]
        exprs = [e.strip() for e in match.group(2).split(",") if e.strip()]
        return cls.from_names(names, exprs, text)

    @classmethod
    def from_names(cls, names: list[str], exprs: list[str], text: str) -> DimMap:
        """The map over dimensions ``names`` with result expressions ``exprs`` (from ``text``)."""
        if len(set(names)) != len(names):
            raise FormatError(f"repeated dimension name in '{text}'")
        zeros = [i for i, e in enumerate(exprs) if e == "0"]
        parsed = [None if e == "0" else _parse_expr(e, names, text) for e in exprs]
        if zeros:
            parsed = _unit_blocks(parsed, zeros, text)
        return cls(len(names), tuple(p for p in parsed if p is not None))

    # -- queries ----------------------------------------------------------------
    @property
    def n_levels(self) -> int:
        return len(self.results)

    @property
    def is_identity(self) -> bool:
        return self == DimMap.identity(self.n_dims)

    @property
    def is_permutation(self) -> bool:
        return all(r.op == "id" for r in self.results)

    def block_sizes(self) -> tuple[int, ...]:
        """Per dimension, the block size it is split by (1 when not split)."""
        sizes = [1] * self.n_dims
        for r in self.results:
            if r.op != "id":
                sizes[r.dim] = r.const
        return tuple(sizes)

    def __str__(self) -> str:
        dims = ", ".join(f"d{d}" for d in range(self.n_dims))
        return f"({dims}) -> ({', '.join(str(r) for r in self.results)})"

    def check(self) -> None:
        """Every dimension is used once plainly or as one floordiv/mod pair."""
        uses: dict[int, list[LevelExpr]] = {d: [] for d in range(self.n_dims)}
        for r in self.results:
            if not 0 <= r.dim < self.n_dims:
                raise FormatError(f"level expression '{r}' uses an unknown dimension")
            if r.op != "id" and r.const <= 0:
                raise FormatError(f"block size must be positive in '{r}'")
            uses[r.dim].append(r)
        for d, used in uses.items():
            ops = sorted(u.op for u in used)
            if ops == ["id"]:
                continue
            if ops == ["floordiv", "mod"] and used[0].const == used[1].const:
                if [u.op for u in used] != ["floordiv", "mod"]:
                    raise FormatError(f"d{d} mod must come after d{d} floordiv in {self}")
                continue
            raise FormatError(
                f"dimension d{d} must appear once, or as 'd{d} floordiv c' and 'd{d} mod c' "
                f"with the same c, in {self}"
            )

    # -- application --------------------------------------------------------------
    def level_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """Level sizes for a tensor of ``shape`` (a partial last block counts whole)."""
        if len(shape) != self.n_dims:
            raise FormatError(f"map over {self.n_dims} dimensions applied to shape {shape}")
        out = []
        for r in self.results:
            size = shape[r.dim]
            out.append(
                size if r.op == "id" else -(-size // r.const) if r.op == "floordiv" else r.const
            )
        return tuple(out)

    def to_levels(self, coords: np.ndarray) -> np.ndarray:
        """Level coordinates, shape ``(n_levels, nnz)``, from dimension coordinates."""
        rows = []
        for r in self.results:
            c = coords[r.dim]
            rows.append(c if r.op == "id" else c // r.const if r.op == "floordiv" else c % r.const)
        return np.stack(rows) if rows else np.zeros((0, coords.shape[1]), coords.dtype)

    def to_dims(self, lvl_coords: np.ndarray) -> np.ndarray:
        """Dimension coordinates, shape ``(n_dims, nnz)``, from level coordinates."""
        dims = np.zeros((self.n_dims, lvl_coords.shape[1]), dtype=np.int64)
        for lvl, r in enumerate(self.results):
            c = lvl_coords[lvl].astype(np.int64)
            dims[r.dim] += c * r.const if r.op == "floordiv" else c
        return dims


def _unit_blocks(
    parsed: list[LevelExpr | None], zeros: list[int], text: str
) -> list[LevelExpr | None]:
    """Blocks of size 1 as MLIR prints them: ``d floordiv 1`` is ``d`` and ``d mod 1`` is ``0``
    (``bsr:8x1`` reads ``(d0 floordiv 8, d1, d0 mod 8, 0)``). The k-th ``0`` is the
    ``mod 1`` of the k-th plain dimension before it."""
    plain = [i for i, p in enumerate(parsed) if p is not None and p.op == "id"]
    out = list(parsed)
    for k, z in enumerate(zeros):
        if k >= len(plain) or plain[k] > z:
            raise FormatError(
                f"unsupported level expression '0' in '{text}'; a constant level "
                "is only the 'd mod 1' of a block of size 1"
            )
        dim = parsed[plain[k]].dim  # type: ignore[union-attr]
        out[plain[k]] = LevelExpr(dim, "floordiv", 1)
        out[z] = LevelExpr(dim, "mod", 1)
    return out


def _parse_expr(expr: str, names: list[str], text: str) -> LevelExpr:
    match = re.fullmatch(r"(\w+)(?:\s+(floordiv|mod)\s+(\d+))?", expr)
    if not match or match.group(1) not in names:
        raise FormatError(
            f"unsupported level expression '{expr}' in '{text}'; "
            "expected 'd', 'd floordiv c' or 'd mod c'"
        )
    dim = names.index(match.group(1))
    op = match.group(2) or "id"
    return LevelExpr(dim, op, int(match.group(3)) if match.group(3) else 1)  # type: ignore[arg-type]
