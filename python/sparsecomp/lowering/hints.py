"""Attributes a composable layout's part carries from stage II to the GPU schedule.

:mod:`sparsecomp.lowering.parts` sets them on each part's op, the loop
lowering moves them onto the part's parallel row loop
(``sparse-iter-lower-iterations``), ``sparse-iter-parallelize`` keeps them on
the ``scf.parallel`` and ``sparse-iter-gpu-map-loops`` on the mapped block
loop:

* ``sparse_iter.min_row_entries = n``: every non-empty row of the part has at
  least ``n`` entries (hyb's rest): lanes per row for the GPU schedule;
* ``sparse_iter.parts_group = g``: the parts of one op share ``g`` (unique in
  the function), so ``sparse-iter-horizontal-fusion`` may put them in one
  launch;
* ``sparse_iter.disjoint_rows``: the part writes only rows no other part
  writes (hyb's ELL buckets with one column partition: each lists its rows),
  so its launch may run beside theirs with no atomics. A part with dense rows
  (hyb's rest) writes every row, its empty ones too, and never has it;
* ``sparse_iter.atomic_writes``: set by ``sparse-iter-lower-atomics`` on a
  part's row loop whose writes it made atomic: parts that share rows may then
  share a launch too.
"""

from __future__ import annotations

MIN_ROW_ENTRIES = "sparse_iter.min_row_entries"
PARTS_GROUP = "sparse_iter.parts_group"
DISJOINT_ROWS = "sparse_iter.disjoint_rows"
ATOMIC_WRITES = "sparse_iter.atomic_writes"
ALL = (MIN_ROW_ENTRIES, PARTS_GROUP, DISJOINT_ROWS, ATOMIC_WRITES)
