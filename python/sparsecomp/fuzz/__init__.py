"""A differential fuzzer: random ``linalg.generic`` programs over random encodings.

Each case (``seed``, ``index``) is a random kernel (:mod:`.programs`) over
random encodings (:mod:`.encodings`: upstream ``#sparse_tensor`` with every
level type, block and n:m maps and index widths; ``#sparse_iter.layout``,
``composable`` and ``sparsity``), with random data (:mod:`.data`) and a numpy
reference (:mod:`.reference`). It runs three ways (:mod:`.paths`):

* ``py``: ``sparsecomp.compile`` and a call with numpy/scipy/SparseTensor inputs;
* ``cli``: a ``main()`` that builds the inputs from dense constants
  (:mod:`.mainwrap`), through ``sparsecomp-opt --pass-pipeline=
  'builtin.module(sparsecomp-cpu)'`` and ``mlir-runner``;
* ``upstream``: the same ``main()`` through ``mlir-opt --sparsifier`` and
  ``mlir-runner`` (``#sparse_tensor`` programs only; a second opinion that
  never fails the run).

Cases run in worker processes (:mod:`.pool`), many per worker, restarted
after a crash or a timeout. ``scripts/fuzz --help`` for the options;
:mod:`.report` groups outcomes into classes and writes reproducers.
"""

from __future__ import annotations

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """``scripts/fuzz``: see :mod:`sparsecomp.fuzz.cli`."""
    from sparsecomp.fuzz.cli import main as _main

    return _main(argv)
