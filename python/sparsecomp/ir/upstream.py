"""Upstream ``#sparse_tensor.encoding`` <-> ``#sparse_iter.layout``.

MLIR's sparse_tensor level types map onto sparse_iter level formats::

    dense            <-> dense_fixed
    compressed       <-> compressed_varied
    loose_compressed <-> loose_compressed
    singleton        <-> singleton
    structured[n, m] <-> structured[n,m]          (n_out_of_m)

with the properties ``nonunique``, ``nonordered`` and ``soa`` carried over,
``dimToLvl`` (permutations, ``floordiv``/``mod`` blocks) kept as is and
``posWidth``/``crdWidth`` becoming ``pos_width``/``crd_width``. What has no
counterpart raises :class:`~sparsecomp.errors.FormatError` naming it:
dimension slices and explicit/implicit values on import; ELL
(``compressed_fixed``), ragged ``dense_varied`` levels and ``mma.sp``
metadata on export.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import sparse_tensor as st

from sparsecomp.errors import FormatError
from sparsecomp.formats.dimmap import DimMap
from sparsecomp.formats.layout import Layout
from sparsecomp.formats.levels import Level

_FORMATS = {
    int(st.LevelFormat.dense): "dense_fixed",
    int(st.LevelFormat.compressed): "compressed_varied",
    int(st.LevelFormat.loose_compressed): "loose_compressed",
    int(st.LevelFormat.singleton): "singleton",
}
_EXPORT = {
    v: k
    for k, v in {
        "dense": "dense_fixed",
        "compressed": "compressed_varied",
        "loose_compressed": "loose_compressed",
        "singleton": "singleton",
    }.items()
}
#: Property bits in the low byte of an upstream level type.
_PROPERTIES = {
    "nonunique": st.LevelProperty.non_unique.value,
    "nonordered": st.LevelProperty.non_ordered.value,
    "soa": st.LevelProperty.soa.value,
}
_FORMAT_MASK = 0xFFFF0000


def is_sparse_tensor_encoding(attr: ir.Attribute | None) -> bool:
    return attr is not None and str(attr).startswith("#sparse_tensor.encoding")


def _level(level_type: int, fmt: int, enc: st.EncodingAttr) -> Level:
    if fmt == int(st.LevelFormat.n_out_of_m):
        base = f"structured[{enc.structured_n},{enc.structured_m}]"
    elif fmt in _FORMATS:
        base = _FORMATS[fmt]
    else:
        raise FormatError(f"unknown upstream level format {fmt:#x}")
    props = [name for name, bit in _PROPERTIES.items() if level_type & bit]
    return Level.parse(f"{base}({', '.join(props)})" if props else base)


def layout_from_sparse_tensor(attr: ir.Attribute) -> Layout:
    """The ``#sparse_iter`` layout equivalent to an upstream encoding."""
    text = str(attr)
    if "slice(" in text:
        raise FormatError("dimension slices (#sparse_tensor<slice(...)>) have no sparse_iter form")
    enc = st.EncodingAttr(attr)
    if enc.explicit_val is not None or enc.implicit_val is not None:
        raise FormatError("explicitVal/implicitVal have no sparse_iter form")
    levels = tuple(
        _level(lt, fmt, enc) for lt, fmt in zip(enc.lvl_types, enc.lvl_formats_enum, strict=True)
    )
    rank = len(levels)
    dim_to_lvl = DimMap.parse(str(enc.dim_to_lvl)) if enc.dim_to_lvl else DimMap.identity(rank)
    return Layout(levels, dim_to_lvl, enc.pos_width, enc.crd_width)


def sparse_tensor_text(layout: Layout) -> str:
    """``#sparse_tensor.encoding<{...}>`` text for ``layout``."""
    if layout.nm_metadata.startswith("mma_sp"):
        raise FormatError(f"nm_metadata '{layout.nm_metadata}' has no #sparse_tensor form")
    blocks = {e.const for e in layout.dim_to_lvl.results if e.op == "mod"}
    if any(lv.kind == "structured" for lv in layout.levels) and len(blocks) > 1:
        raise FormatError(
            f"blocks of sizes {sorted(blocks)} with an n:m level have no #sparse_tensor form "
            "(MLIR's n:m levels need every blocked dimension to use one block size)"
        )
    exprs = []
    for level, expr in zip(layout.levels, layout.dim_to_lvl.results, strict=True):
        if level.kind == "structured" and level.m > 255:
            raise FormatError(f"'{level}': #sparse_tensor n:m levels need m < 256")
        if level.kind == "structured":
            base = f"structured[{level.n}, {level.m}]"
        elif level.name in _EXPORT:
            base = _EXPORT[level.name]
        else:
            raise FormatError(f"level format '{level}' has no #sparse_tensor form")
        props = [p for p in _PROPERTIES if getattr(level, p)]
        exprs.append(f"{expr} : {base}({', '.join(props)})" if props else f"{expr} : {base}")
    dims = ", ".join(f"d{d}" for d in range(layout.rank))
    widths = f", posWidth = {layout.pos_width}, crdWidth = {layout.crd_width}"
    return f"#sparse_tensor.encoding<{{ map = ({dims}) -> ({', '.join(exprs)}){widths} }}>"
