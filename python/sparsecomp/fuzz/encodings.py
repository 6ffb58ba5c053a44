"""Random tensor encodings: upstream ``#sparse_tensor`` and ``#sparse_iter`` attributes.

An :class:`Encoding` is the attribute text plus what the data generator must
respect (an n:m pattern along one dimension).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import numpy as np

WIDTHS = (0, 0, 8, 16, 32, 32, 64)


@dataclass(frozen=True)
class Encoding:
    """One encoding attribute and the constraints its data must meet."""

    text: str
    family: str  # "sparse_tensor" | "layout" | "composable" | "sparsity"
    label: str  # short description for reports
    #: (n, m, dim): at most n nonzeros in every m consecutive elements along dim
    nm: tuple[int, int, int] | None = None

    @property
    def upstream(self) -> bool:
        return self.family == "sparse_tensor"


T = TypeVar("T")


def _pick(rng: np.random.Generator, options: list[T]) -> T:
    return options[int(rng.integers(len(options)))]


# -- upstream #sparse_tensor --------------------------------------------------

_ST_PAIRS = [
    ("dense", "compressed"), ("dense", "compressed"), ("compressed", "compressed"),
    ("dense", "dense"), ("compressed", "dense"), ("compressed(nonunique)", "singleton"),
    ("compressed(nonunique)", "singleton(soa)"), ("dense", "loose_compressed"),
    ("dense", "compressed(nonordered)"), ("loose_compressed(nonunique)", "singleton"),
]  # fmt: skip
_ST_VEC = ["compressed", "compressed", "dense", "loose_compressed"]


def _widths(rng: np.random.Generator) -> tuple[int, int]:
    return int(_pick(rng, list(WIDTHS))), int(_pick(rng, list(WIDTHS)))


def _st_widths(pos: int, crd: int) -> str:
    return (f", posWidth = {pos}" if pos else "") + (f", crdWidth = {crd}" if crd else "")


def sparse_tensor(rng: np.random.Generator, rank: int, output: bool = False) -> Encoding:
    """A random ``#sparse_tensor.encoding`` of ``rank`` 1 or 2."""
    pos, crd = _widths(rng)
    nm = None
    if rank == 1:
        lvl = str(_pick(rng, _ST_VEC))
        body, label = f"(i) -> (i : {lvl})", lvl
    else:
        r = rng.random()
        if r < 0.15:
            br, bc = int(rng.integers(2, 5)), int(rng.integers(2, 4))
            head = _pick(rng, ["dense", "compressed"])
            body = (f"(i, j) -> (i floordiv {br} : {head}, j floordiv {bc} : compressed, "
                    f"i mod {br} : dense, j mod {bc} : dense)")  # fmt: skip
            label = f"block{br}x{bc}/{head}"
        elif r < 0.25 and not output:
            n, m, dim = 2, 4, int(rng.integers(2))
            d, o = ("i", "j") if dim == 1 else ("j", "i")
            body = (f"(i, j) -> ({d} : dense, {o} floordiv {m} : dense, "
                    f"{o} mod {m} : structured[{n}, {m}])")  # fmt: skip
            label, nm = f"{n}:{m}/dim{dim}", (n, m, dim)
        else:
            a, b = _pick(rng, _ST_PAIRS)
            order = ("i", "j") if rng.random() < 0.75 else ("j", "i")
            body = f"(i, j) -> ({order[0]} : {a}, {order[1]} : {b})"
            label = f"{a},{b}" + ("" if order == ("i", "j") else "/T")
    text = f"#sparse_tensor.encoding<{{ map = {body}{_st_widths(pos, crd)} }}>"
    return Encoding(text, "sparse_tensor", f"st[{label} w{pos}/{crd}]", nm)


# -- #sparse_iter.layout / composable / sparsity ----------------------------

_SI_PAIRS = [
    ("dense_fixed", "compressed_varied"), ("dense_fixed", "compressed_varied"),
    ("compressed_varied", "compressed_varied"), ("dense_fixed", "dense_fixed"),
    ("compressed_varied", "dense_fixed"), ("compressed_varied(nonunique)", "singleton"),
    ("compressed_varied(nonunique)", "singleton(soa)"), ("dense_fixed", "compressed_fixed"),
    ("dense_fixed", "loose_compressed"), ("dense_fixed", "compressed_varied(nonordered)"),
]  # fmt: skip
_SI_VEC = ["compressed_varied", "compressed_varied", "dense_fixed", "loose_compressed"]


def _layout(levels: list[str], domain: str, results: str, pos: int, crd: int) -> str:
    from sparsecomp.formats.levels import Level

    exprs = [e.strip() for e in results.split(",")]
    lv = ", ".join(f"{e} : {Level.parse(x)}" for e, x in zip(exprs, levels, strict=True))
    widths = "".join(f", {k} = {w}" for k, w in (("posWidth", pos), ("crdWidth", crd)) if w)
    return f"#sparse_iter.layout<{{map = ({domain}) -> ({lv}){widths}}}>"


def sparse_iter(rng: np.random.Generator, rank: int, output: bool = False) -> Encoding:
    """A random ``#sparse_iter.layout`` (sometimes composable or a sparsity) of ``rank``."""
    pos, crd = _widths(rng)
    if rank == 1:
        lvl = str(_pick(rng, _SI_VEC))
        return Encoding(_layout([lvl], "i", "i", pos, crd), "layout", f"si[{lvl}]")
    r = rng.random()
    if r < 0.12:
        br, bc = int(rng.integers(2, 5)), int(rng.integers(2, 4))
        levels = ["dense_fixed", "compressed_varied", "dense_fixed", "dense_fixed"]
        res = f"i floordiv {br}, j floordiv {bc}, i mod {br}, j mod {bc}"
        return Encoding(_layout(levels, "i, j", res, pos, crd), "layout", f"si[bsr{br}x{bc}]")
    if r < 0.2 and not output:
        levels = ["dense_fixed", "dense_fixed", "structured[2,4]"]
        text = _layout(levels, "i, j", "i, j floordiv 4, j mod 4", pos, crd)
        return Encoding(text, "layout", "si[2:4]", (2, 4, 1))
    if r < 0.26 and not output:
        return _composable(rng)
    if r < 0.36:
        return _sparsity(rng, output)
    a, b = _pick(rng, _SI_PAIRS)
    res = "i, j" if rng.random() < 0.75 else "j, i"
    label = f"si[{a},{b}{'' if res == 'i, j' else '/T'} w{pos}/{crd}]"
    return Encoding(_layout([a, b], "i, j", res, pos, crd), "layout", label)


def _composable(rng: np.random.Generator) -> Encoding:
    from sparsecomp.formats import parse_layout

    name = str(_pick(rng, ["hyb:1:4", "hyb:2:2", "bsr+csr:2x2", "bsr+csr:2x2:1"]))
    return Encoding(parse_layout(name).attr_text(), "composable", f"si[{name}]")


def _sparsity(rng: np.random.Generator, output: bool) -> Encoding:
    kinds = ["unstructured", "unstructured", "block", "ragged"] + ([] if output else ["nm"])
    kind = str(_pick(rng, kinds))
    params = {"nm": "[2, 4]", "block": "[2, 2]"}.get(kind, "")
    density = _pick(rng, ["0.1", "0.5", "1.0"])
    text = f"#sparse_iter.sparsity<{kind}{params}, density = {density}>"
    return Encoding(text, "sparsity", f"sparsity[{kind}]", (2, 4, 1) if kind == "nm" else None)


def random_encoding(
    rng: np.random.Generator, rank: int, family: str, output: bool = False
) -> Encoding:
    """An encoding of ``family`` ("st" upstream, "si" sparse_iter) for a ``rank`` tensor."""
    if family == "st":
        return sparse_tensor(rng, rank, output)
    return sparse_iter(rng, rank, output)
