"""Layouts by name: short names, attribute text, or layout objects.

Short names cover the common cases for matrices (:func:`parse_layout`)::

    dense  csr  csc  coo  dcsr  ell  ell:K  bsr:RxC  nm:N:M
    hyb  hyb:P:W  bsr+csr:RxC  bsr+csr:RxC:MIN

``dense``, ``csr``, ``coo`` and ``dcsr`` exist for every rank.
"""

from __future__ import annotations

import re

from sparsecomp.errors import FormatError
from sparsecomp.formats.attrtext import parse_attr
from sparsecomp.formats.composable import Composable
from sparsecomp.formats.layout import Layout, standard_layout

AnyLayout = Layout | Composable


def layout_from_attr(text: str) -> AnyLayout:
    """A layout from ``#sparse_iter.layout<...>`` or ``#sparse_iter.composable<...>`` text."""
    node = parse_attr(text)
    if node.mnemonic == "composable":
        return Composable.from_node(node)
    return Layout.from_node(node)


def parse_layout(text: str | AnyLayout, rank: int = 2) -> AnyLayout:
    """A layout from a short name, attribute text, or a layout object (returned as is)."""
    if isinstance(text, Layout | Composable):
        return text
    name = text.strip()
    if name.startswith("#sparse_iter."):
        return layout_from_attr(name)
    if rank < 1:
        raise FormatError(f"layouts need rank >= 1, got {rank}")
    single = standard_layout(name, rank)
    if single is not None:
        return single
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
