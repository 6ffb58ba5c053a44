"""Sparsifiers: which elements of a dense array to keep (STen's sparsifiers, no MLIR import).

A :class:`Sparsifier` is the host-side twin of ``#sparse_iter.sparsifier``:
a kind and a tuple of f64 parameters, printed exactly as MLIR prints the
attribute (``Sparsifier.parse(s.attr_text()) == s``). The kinds follow STen
("Sparse tensors in PyTorch", Ivanov et al.)::

    keep_all                    KeepAll: every nonzero element
    threshold:T                 Threshold: elements with |x| >= T
    random_fraction:S[:SEED]    RandomFraction: a random set of elements, S of them removed
    scalar_fraction:S           ScalarFraction: the S fraction of smallest magnitudes removed
    block_fraction:RxC:S        BlockFraction: the S fraction of R x C blocks with the
                                smallest L1 norm removed
    nm:N:M                      PerBlock n:m: the N largest magnitudes of every M
                                consecutive elements along the innermost dimension
    grouped_nm:N:M:G            grouped n:m (STen's n:m:g idea): G consecutive rows
    (also nm:N:M:G)             share their kept columns, the N of every M consecutive
                                columns with the largest L1 norm over the G rows

The short forms above and the attribute text both parse (:meth:`Sparsifier.parse`).

Conventions (the compiler's lowering of ``sparse_iter.sparsify`` follows the same):

* **Sparsity, not density.** As in STen, the fraction parameter ``S`` of
  ``random_fraction``, ``scalar_fraction`` and ``block_fraction`` is the
  fraction of candidates (elements or blocks) *removed*: ``scalar_fraction:0.9``
  keeps the largest 10%.
* **Rounding.** Of ``N`` candidates, ``removed_count(S, N)`` are removed:
  ``S * N`` evaluated in f64 and rounded to the nearest integer, halves up
  (``llvm.round``); the other ``N - removed_count(S, N)`` are kept.
* **Ties** are broken by position: among equal magnitudes (or block norms,
  or random keys) the candidate with the lower row-major flat index is kept.
* **NaN.** The magnitude-based kinds (``threshold``, ``scalar_fraction``,
  ``block_fraction``, ``nm``) never keep a NaN (for complex values: a NaN
  in either part). A NaN ranks below every number, so it is removed first
  and counts towards the removed elements; if there are more NaNs than
  elements to remove, all NaNs are still removed. In a block's L1 norm a NaN
  counts as 0. The value-blind kinds treat NaN like any other nonzero:
  ``keep_all`` keeps it, ``random_fraction`` keeps it when it is drawn.
* **Magnitudes** are ``|x|``: exact for integers (``|-128|`` of an int8 is
  128), the modulus for complex values. ``threshold`` compares exactly: float
  magnitudes are widened to at least f64 (never is ``T`` narrowed to the
  element type), integer magnitudes are compared with ``ceil(T)``. Block L1
  norms are summed in f64 (long double for long double inputs), so integer
  magnitudes above 2**53 are rounded there.
* **Kept zeros.** ``keep_all`` keeps the nonzeros only. Every other kind
  selects positions: an exact zero it selects (a zero in a kept block, a
  zero among the n largest of an n:m group, a zero among the kept fraction,
  every zero for ``threshold:0``) is kept, and :func:`sparsify` with a layout
  stores it as an explicit zero, so that the stored pattern is exactly
  :meth:`Sparsifier.mask` (whole blocks for BSR, n per group for n:m).
* **Shapes.** ``block_fraction`` needs rank >= 2 and blocks the last two
  dimensions, ranking the blocks of all leading (batch) indices together;
  edge blocks may be partial (their norm sums the elements they have). ``nm``
  groups the innermost dimension (rank >= 1); a partial last group keeps
  ``min(n, its length)`` elements. ``grouped_nm`` needs rank >= 2: rows (the
  second-to-last dimension) form groups of G (the last may be shorter, its
  norms sum the rows it has), each group's column norms are ranked like
  ``nm``'s magnitudes (ties: the lower column kept), and every row of the
  group keeps the chosen columns. The pattern is exactly a set of G x 1
  blocks: layout ``bsr:Gx1`` stores it without fill. The other kinds work on the flattened
  array (rank >= 1). Empty arrays give an all-false mask.
* **random_fraction** draws one 64-bit key per element, in row-major order,
  from ``numpy.random.Generator(numpy.random.PCG64(SEED))``'s raw bit stream
  (``bit_generator.random_raw``, which NumPy keeps stable across releases),
  and removes the elements with the ``removed_count(S, N)`` smallest keys.
  The choice depends on the shape and the seed only, never on the values.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from sparsecomp.errors import FormatError
from sparsecomp.formats.attrtext import Indexed, Keyword, format_value, parse_attr

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

#: Each kind and the names of its parameters, in attribute order.
KINDS: dict[str, tuple[str, ...]] = {
    "keep_all": (),
    "threshold": ("threshold",),
    "random_fraction": ("sparsity", "seed"),
    "scalar_fraction": ("sparsity",),
    "block_fraction": ("block_rows", "block_cols", "sparsity"),
    "nm": ("n", "m"),
    "grouped_nm": ("n", "m", "g"),
}
#: Kinds decidable element by element, which the compiler fuses into the producing loop.
STREAMING_KINDS = frozenset({"keep_all", "threshold"})
_INTEGER_PARAMS = frozenset({"seed", "block_rows", "block_cols", "n", "m", "g"})
#: Integer parameters are stored as f64; beyond 2**53 they would not be exact.
MAX_INTEGER_PARAM = 2**53
_ATTR_PREFIX = "#sparse_iter.sparsifier<"


@dataclass(frozen=True)
class Sparsifier:
    """A sparsifier kind and its parameters; see the module docstring.

    ``params`` are stored as floats, as in the attribute (a ``DenseF64ArrayAttr``);
    integer parameters (seed, block sizes, n, m) must hold integral values.
    """

    kind: str
    params: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or self.kind not in KINDS:
            raise FormatError(
                f"unknown sparsifier kind '{self.kind}'; expected one of {', '.join(KINDS)}"
            )
        object.__setattr__(self, "params", _as_floats(self.kind, self.params))
        self._check()

    # -- construction ------------------------------------------------------------
    @classmethod
    def keep_all(cls) -> Sparsifier:
        return cls("keep_all")

    @classmethod
    def threshold(cls, t: float) -> Sparsifier:
        return cls("threshold", (t,))

    @classmethod
    def random_fraction(cls, sparsity: float, seed: int = 0) -> Sparsifier:
        return cls("random_fraction", (sparsity, seed))

    @classmethod
    def scalar_fraction(cls, sparsity: float) -> Sparsifier:
        return cls("scalar_fraction", (sparsity,))

    @classmethod
    def block_fraction(cls, block_rows: int, block_cols: int, sparsity: float) -> Sparsifier:
        return cls("block_fraction", (block_rows, block_cols, sparsity))

    @classmethod
    def nm(cls, n: int, m: int) -> Sparsifier:
        return cls("nm", (n, m))

    def _check(self) -> None:
        names = KINDS[self.kind]
        for name, value in zip(names, self.params, strict=True):
            if math.isnan(value):
                raise FormatError(f"sparsifier '{self.kind}': {name} must not be NaN")
            if name in _INTEGER_PARAMS and not (
                value.is_integer() and abs(value) <= MAX_INTEGER_PARAM
            ):
                raise FormatError(
                    f"sparsifier '{self.kind}': {name} must be an integer "
                    f"(at most 2**53), got {value!r}"
                )
        p = self.named_params
        if self.kind == "threshold" and p["threshold"] < 0:
            raise FormatError(
                f"sparsifier 'threshold': threshold must be >= 0, got {p['threshold']}"
            )
        if "sparsity" in p and not 0.0 <= p["sparsity"] <= 1.0:
            raise FormatError(
                f"sparsifier '{self.kind}': sparsity (the fraction removed) must lie in "
                f"[0, 1], got {p['sparsity']}"
            )
        if self.kind == "random_fraction" and p["seed"] < 0:
            raise FormatError(f"sparsifier 'random_fraction': seed must be >= 0, got {p['seed']}")
        if self.kind == "block_fraction" and min(p["block_rows"], p["block_cols"]) <= 0:
            raise FormatError(
                "sparsifier 'block_fraction': block sizes must be positive, "
                f"got {p['block_rows']}x{p['block_cols']}"
            )
        if self.kind in ("nm", "grouped_nm") and not 0 < p["n"] <= p["m"]:
            raise FormatError(f"sparsifier '{self.kind}' needs 0 < n <= m, got {p['n']}:{p['m']}")
        if self.kind == "grouped_nm" and p["g"] <= 0:
            raise FormatError(f"sparsifier 'grouped_nm' needs a group of g >= 1 rows, got {p['g']}")

    # -- properties --------------------------------------------------------------
    @property
    def named_params(self) -> dict[str, Any]:
        """Parameters by name; integer parameters as ``int``."""
        return {
            name: int(v) if name in _INTEGER_PARAMS else v
            for name, v in zip(KINDS[self.kind], self.params, strict=True)
        }

    @property
    def is_streaming(self) -> bool:
        """Decidable per element (``keep_all``, ``threshold``): fusable into a producing loop."""
        return self.kind in STREAMING_KINDS

    @property
    def min_rank(self) -> int:
        """The smallest array rank the sparsifier applies to."""
        return 2 if self.kind in ("block_fraction", "grouped_nm") else 1

    # -- text ----------------------------------------------------------------------
    @classmethod
    def parse(cls, text: str | Sparsifier) -> Sparsifier:
        """A sparsifier from a short form (``"nm:2:4"``) or ``#sparse_iter.sparsifier<...>``."""
        if isinstance(text, Sparsifier):
            return text
        if not isinstance(text, str):
            raise FormatError(
                f"a sparsifier is a string or a Sparsifier, got {type(text).__name__}"
            )
        text = text.strip()
        if text.startswith("#"):
            return _parse_attr(text)
        return _parse_short(text)

    def attr_text(self) -> str:
        """``#sparse_iter.sparsifier<...>`` exactly as MLIR prints it."""
        return f"{_ATTR_PREFIX}{format_value(Indexed(self.kind, self.params))}>"

    def short_text(self) -> str:
        """The short form, e.g. ``"block_fraction:16x16:0.9"``; parses back to ``self``."""
        p = self.named_params
        if self.kind == "block_fraction":
            return f"block_fraction:{p['block_rows']}x{p['block_cols']}:{p['sparsity']!r}"
        return ":".join([self.kind, *(repr(v) for v in p.values())])

    def __str__(self) -> str:
        return self.short_text()

    # -- applying --------------------------------------------------------------------
    def mask(self, x: ArrayLike) -> NDArray[np.bool_]:
        """A boolean array of ``x``'s shape: True where the element is kept."""
        a = check_array(x, self)
        if a.size == 0:
            return np.zeros(a.shape, dtype=bool)
        p = self.named_params
        if self.kind == "keep_all":
            return np.asarray(a != 0)
        if self.kind == "threshold":
            return _threshold_mask(a, p["threshold"])
        if self.kind == "random_fraction":
            return _random_mask(a.shape, p["sparsity"], p["seed"])
        mag, nan = magnitudes(a)
        if self.kind == "scalar_fraction":
            rank = _keep_rank(mag, nan)
            return (rank >= removed_count(p["sparsity"], a.size)) & ~nan
        if self.kind == "nm":
            return _nm_mask(_keep_rank(mag, nan), p["n"], p["m"]) & ~nan
        if self.kind == "grouped_nm":
            return _grouped_nm_mask(mag, nan, p["n"], p["m"], p["g"]) & ~nan
        return _block_mask(mag, nan, p["block_rows"], p["block_cols"], p["sparsity"]) & ~nan

    def apply(self, x: ArrayLike) -> np.ndarray:
        """``x`` with the elements the sparsifier drops set to zero (a new array)."""
        a = check_array(x, self)
        return np.where(self.mask(a), a, a.dtype.type(0))


def sparsify_array(x: ArrayLike, sparsifier: str | Sparsifier, layout: Any = None) -> Any:
    """Implementation of :func:`sparsecomp.sparsify`."""
    sp = Sparsifier.parse(sparsifier)
    a = check_array(x, sp)
    if layout is None:
        return sp.apply(a)
    from sparsecomp.formats.tensor import SparseTensor

    keep = sp.mask(a)
    coords = np.stack(np.nonzero(keep)).astype(np.int64, copy=False)
    return SparseTensor.from_coo(a.shape, coords, a[keep], layout)


# -- counting and ranking ----------------------------------------------------------


def removed_count(sparsity: float, total: int) -> int:
    """How many of ``total`` candidates a fraction sparsifier removes.

    ``sparsity * total`` in f64, rounded to the nearest integer with halves
    rounded up (``llvm.round`` for non-negative values).
    """
    product = float(sparsity) * total
    whole = math.floor(product)
    count = whole + 1 if product - whole >= 0.5 else whole
    return min(max(count, 0), total)


def check_array(x: ArrayLike, sparsifier: Sparsifier | None = None) -> np.ndarray:
    """``x`` as an ndarray of integers, floats or complex numbers of a rank the sparsifier takes."""
    if hasattr(x, "toarray") and hasattr(x, "nnz"):  # scipy.sparse: an object array to numpy
        raise FormatError(
            f"sparsifiers take a dense array, got a scipy {type(x).__name__}",
            hint="sparsify its dense form (A.toarray()), or its values: "
            "A.data = sparsecomp.sparsify(A.data, ...) for an elementwise sparsifier",
        )
    if isinstance(x, np.ndarray):
        a = x
    else:
        try:
            a = np.asarray(x)
        except (TypeError, ValueError) as e:
            raise FormatError(f"cannot make an array from {type(x).__name__}: {e}") from None
    if a.dtype.kind == "O":
        raise FormatError("sparsifiers do not take object arrays; convert to a numeric dtype")
    if a.dtype.kind not in "iufc":
        raise FormatError(
            f"sparsifiers need an integer, float or complex array, got dtype {a.dtype}"
        )
    if not a.dtype.isnative:  # '>f4': the native order of the same type, kept by the result
        a = a.astype(a.dtype.newbyteorder("="))
    min_rank = sparsifier.min_rank if sparsifier is not None else 1
    if a.ndim < min_rank:
        what = f"sparsifier '{sparsifier.kind}'" if sparsifier is not None else "sparsifiers"
        raise FormatError(f"{what} needs an array of rank >= {min_rank}, got rank {a.ndim}")
    return a


def magnitudes(a: np.ndarray) -> tuple[np.ndarray, NDArray[np.bool_]]:
    """``(|a|, isnan(a))``; signed integer magnitudes as unsigned (exact for the minimum)."""
    kind = a.dtype.kind
    if kind in "fc":
        return np.abs(a), np.isnan(a)
    nan = np.zeros(a.shape, dtype=bool)
    if kind == "i":
        return np.abs(a).view(np.dtype(f"u{a.dtype.itemsize}")), nan
    return a, nan


def _keep_rank(mag: np.ndarray, nan: NDArray[np.bool_]) -> NDArray[np.intp]:
    """A permutation of ``0..size-1`` in ``mag``'s shape: higher = kept first.

    Ordered by NaN-ness (NaN lowest), then magnitude, then by flat index (lower index higher).
    """
    flat = mag.reshape(-1)
    index = np.arange(flat.size, dtype=np.intp)
    order = np.lexsort((-index, flat, ~nan.reshape(-1)))
    rank = np.empty(flat.size, dtype=np.intp)
    rank[order] = index
    return rank.reshape(mag.shape)


def _threshold_mask(a: np.ndarray, t: float) -> NDArray[np.bool_]:
    mag, _ = magnitudes(a)
    if a.dtype.kind in "iu":
        if math.isinf(t) or math.ceil(t) > np.iinfo(mag.dtype).max:
            return np.zeros(a.shape, dtype=bool)
        return np.asarray(mag >= mag.dtype.type(math.ceil(t)))
    wide = np.promote_types(mag.dtype, np.float64)
    return np.asarray(mag.astype(wide, copy=False) >= wide.type(t))


def _random_mask(shape: tuple[int, ...], sparsity: float, seed: int) -> NDArray[np.bool_]:
    size = math.prod(shape)
    keys = np.random.PCG64(seed).random_raw(size)
    removed = np.argsort(keys, kind="stable")[: removed_count(sparsity, size)]
    keep = np.ones(size, dtype=bool)
    keep[removed] = False
    return keep.reshape(shape)


def _nm_mask(rank: NDArray[np.intp], n: int, m: int) -> NDArray[np.bool_]:
    length = rank.shape[-1]
    groups = -(-length // m)
    pad = [(0, 0)] * (rank.ndim - 1) + [(0, groups * m - length)]
    grouped = np.pad(rank, pad, constant_values=-1).reshape(*rank.shape[:-1], groups, m)
    # The n-th largest rank of each group; padding (-1) is never above a real element.
    cut = np.sort(grouped, axis=-1)[..., m - n, None]
    keep = (grouped >= cut).reshape(*rank.shape[:-1], groups * m)
    return keep[..., :length]


def _grouped_nm_mask(
    mag: np.ndarray, nan: NDArray[np.bool_], n: int, m: int, g: int
) -> NDArray[np.bool_]:
    *batch, rows, cols = mag.shape
    nb, groups = math.prod(batch), -(-rows // g)
    acc = np.longdouble if mag.dtype == np.longdouble else np.float64
    padded = np.zeros((nb, groups * g, cols), dtype=acc)
    padded[:, :rows] = np.where(nan, 0, mag).astype(acc).reshape(nb, rows, cols)
    norms = padded.reshape(nb, groups, g, cols).sum(axis=2)
    ranks = _keep_rank(norms, np.zeros(norms.shape, dtype=bool))
    # Ranks are global; within a group of columns only their order matters.
    chosen = _nm_mask(ranks, n, m)
    keep = np.repeat(chosen, g, axis=1)[:, :rows]
    return keep.reshape(mag.shape)


def _block_mask(
    mag: np.ndarray, nan: NDArray[np.bool_], r: int, c: int, sparsity: float
) -> NDArray[np.bool_]:
    *batch, rows, cols = mag.shape
    nb = math.prod(batch)
    br, bc = -(-rows // r), -(-cols // c)
    acc = np.longdouble if mag.dtype == np.longdouble else np.float64
    weights = np.where(nan, 0, mag).astype(acc).reshape(nb, rows, cols)
    padded = np.zeros((nb, br * r, bc * c), dtype=acc)
    padded[:, :rows, :cols] = weights
    norms = padded.reshape(nb, br, r, bc, c).sum(axis=(2, 4))
    index = np.arange(norms.size, dtype=np.intp)
    order = np.lexsort((-index, norms.reshape(-1)))
    kept_blocks = np.empty(norms.size, dtype=bool)
    kept_blocks[order] = index >= removed_count(sparsity, norms.size)
    expanded = np.broadcast_to(kept_blocks.reshape(nb, br, 1, bc, 1), (nb, br, r, bc, c))
    keep = expanded.reshape(nb, br * r, bc * c)[:, :rows, :cols]
    return keep.reshape(mag.shape)


# -- parameters ----------------------------------------------------------------------


def _as_floats(kind: str, params: Any) -> tuple[float, ...]:
    if isinstance(params, str | bytes) or not hasattr(params, "__iter__"):
        raise FormatError(f"sparsifier '{kind}': params must be a sequence of numbers")
    values = tuple(params)
    names = KINDS[kind]
    if len(values) != len(names):
        takes = f"({', '.join(names)})" if names else "none"
        raise FormatError(
            f"sparsifier '{kind}' takes {len(names)} parameter(s) {takes}, got {len(values)}"
        )
    out = []
    for name, v in zip(names, values, strict=True):
        if isinstance(v, bool | np.bool_) or not isinstance(
            v, int | float | np.integer | np.floating
        ):
            raise FormatError(f"sparsifier '{kind}': {name} must be a number, got {v!r}")
        try:
            f = float(v)
        except OverflowError:
            raise FormatError(f"sparsifier '{kind}': {name} = {v} is too large for f64") from None
        if isinstance(v, int | np.integer) and f != int(v):
            raise FormatError(
                f"sparsifier '{kind}': {name} = {v} is not exactly representable as f64"
            )
        out.append(f)
    return tuple(out)


# -- short form --------------------------------------------------------------------------


def _number(text: str, source: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise FormatError(f"bad number '{text}' in sparsifier '{source}'") from None


def _parse_short(text: str) -> Sparsifier:
    name, _, rest = text.partition(":")
    name = name.strip()
    if name not in KINDS:
        raise FormatError(
            f"unknown sparsifier kind '{name}' in '{text}'; expected one of {', '.join(KINDS)}",
            hint="short forms: keep_all, threshold:T, random_fraction:S[:SEED], "
            "scalar_fraction:S, block_fraction:RxC:S, nm:N:M, nm:N:M:G, "
            "or #sparse_iter.sparsifier<...> text",
        )
    pieces = [p.strip() for p in rest.split(":")] if rest or text.endswith(":") else []
    if name == "block_fraction" and pieces:
        match = re.fullmatch(r"(.+?)\s*[xX]\s*(.+)", pieces[0])
        if not match:
            raise FormatError(
                f"block_fraction needs RxC block sizes, got '{pieces[0]}' in '{text}'"
            )
        pieces = [match.group(1), match.group(2), *pieces[1:]]
    values = [_number(p, text) for p in pieces]
    if name == "random_fraction" and len(values) == 1:
        values.append(0.0)
    if name == "nm" and len(values) == 3:  # nm:N:M:G, the grouped form
        name = "grouped_nm"
    return Sparsifier(name, tuple(values))


# -- attribute text ----------------------------------------------------------------------


def _parse_attr(text: str) -> Sparsifier:
    (spec,) = parse_attr(text).args_of("sparsifier", 1)
    if isinstance(spec, Keyword):
        spec = Indexed(spec.name, ())
    if not isinstance(spec, Indexed):
        raise FormatError(f"expected #sparse_iter.sparsifier<kind[params]>, got '{text}'")
    return Sparsifier(spec.name, tuple(float(v) for v in spec.args))
