"""The suite's strength: ``scripts/test`` runs every test; ``scripts/test --long`` (what
CI runs) sets ``SPARSECOMP_TEST_LONG=1``, and the long property runs (the fuzzer's
fixed seed sets, the emulated tensor-core and random call-graph properties, whose
every example compiles or emulates a kernel, the benchmarks' smoke runs) then take
all their cases:
:func:`strength` picks the count."""

from __future__ import annotations

import os

#: ``SPARSECOMP_TEST_LONG=1``: long property runs at full strength
LONG = os.environ.get("SPARSECOMP_TEST_LONG", "") not in ("", "0")


def strength(quick: int, long: int) -> int:
    """How many cases a long property run takes: ``long`` under ``--long``, else ``quick``."""
    return long if LONG else quick
