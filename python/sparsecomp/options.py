"""The options a CPU or GPU build takes (``compile(src, **options)``,
``sparsecomp-compile``'s flags), and what each may be.

They are checked where they are given, before a build: an option out of range
was reported at ``<pass-pipeline>:1:16`` in a pass the caller never named
(``sparse-iter-lower-iterations``), and ``unroll="2"`` went through as text.
The passes that take them (:mod:`sparsecomp.transforms.lower_iterations`,
:mod:`sparsecomp.transforms.lower_upstream`) check the same ranges, named here
once.
"""

from __future__ import annotations

from typing import Any

from sparsecomp.errors import SparsecompError

#: The vector widths a build takes: -1 the target's widest, 0 scalar code.
VECTOR_BITS = (-1, 0, 128, 256, 512)
#: Vectors in flight per loop iteration, least and most.
UNROLL = (1, 16)
#: The GPU row schedules (``gpu_balance``).
BALANCES = ("rows", "nonzeros")
#: Each option and the kind of value it takes.
KINDS = {
    "vector_bits": int,
    "unroll": int,
    "panel_bytes": int,
    "slice_bytes": int,
    "gpu_columns": bool,
    "gpu_balance": str,
    "gpu_tf32": bool,
}


def vector_bits_error(bits: int) -> str | None:
    """Why ``bits`` is no vector width, or None."""
    if bits in VECTOR_BITS:
        return None
    return f"must be -1 (the target's), 0, 128, 256 or 512, got {bits}"


def unroll_error(unroll: int) -> str | None:
    """Why ``unroll`` is no count of vectors in flight, or None."""
    low, high = UNROLL
    return None if low <= unroll <= high else f"must be between {low} and {high}, got {unroll}"


def check(options: dict[str, Any], flags: bool = False) -> None:
    """Raise a :class:`SparsecompError` naming the first option whose value it cannot
    take (``--vector-bits`` where ``flags``: the command line's spelling)."""
    for name, value in options.items():
        kind = KINDS.get(name)
        if kind is None:
            continue  # the caller reports unknown names with the known ones
        shown = f"--{name.replace('_', '-')}" if flags else f"{name}="
        if kind is bool:
            ok = isinstance(value, bool)
        elif kind is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        else:
            ok = isinstance(value, str)
        if not ok:
            raise SparsecompError(f"compile option {shown} takes {kind.__name__}, got {value!r}")
        why = None
        if name == "vector_bits":
            why = vector_bits_error(value)
        elif name == "unroll":
            why = unroll_error(value)
        elif name in ("panel_bytes", "slice_bytes") and value < 0:
            why = f"must be >= 0 (0: none), got {value}"
        elif name == "gpu_balance" and value not in BALANCES:
            why = f"must be 'rows' or 'nonzeros', got {value!r}"
        if why is not None:
            raise SparsecompError(f"compile option {shown} {why}")
