"""Pass ``sparse-iter-fold-encodings``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.passmanager import ExternalPass
from mlir.rewrite import (
    GreedyRewriteConfig,
    PatternRewriter,
    RewritePatternSet,
    apply_patterns_and_fold_greedily,
)

from sparsecomp.transforms.base import SparsecompPass

SET = "sparse_iter.set_encoding"
UNSET = "sparse_iter.unset_encoding"


def _producer(value: ir.Value, name: str) -> ir.Operation | None:
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    op = owner.operation
    return op if op.name == name else None


def roundtrip_to_source(op: ir.Operation, rewriter: PatternRewriter) -> bool:
    """``unset(set(x))`` -> ``x`` and ``set(unset(y))`` -> ``y`` when types agree."""
    inner_name = SET if op.name == UNSET else UNSET
    inner = _producer(op.operands[0], inner_name)
    if inner is None:
        return True
    source = inner.operands[0]
    if source.type != op.results[0].type:
        return True  # a change of encoding, not a round trip
    rewriter.replace_op(op, [source])  # the inner op is Pure: the driver erases it if dead
    return False


@dataclasses.dataclass(frozen=True)
class FoldEncodingsPass(SparsecompPass):
    """Fold round trips through sparse_iter.set_encoding / unset_encoding.

    Matches ``unset_encoding(set_encoding(%x))`` whose result type equals the
    type of ``%x`` and replaces it with ``%x``; likewise
    ``set_encoding(unset_encoding(%y))`` with the encoding of ``%y``. The inner
    op is erased once it has no uses. A round trip that changes the encoding
    (``#a`` -> plain -> ``#b``) is a layout conversion and is left alone.

    Before:

    ```mlir
    %1 = sparse_iter.set_encoding %0 : tensor<?x?xf32> to tensor<?x?xf32, #csr>
    %2 = sparse_iter.unset_encoding %1 : tensor<?x?xf32, #csr> to tensor<?x?xf32>
    return %2 : tensor<?x?xf32>
    ```

    After:

    ```mlir
    return %0 : tensor<?x?xf32>
    ```

    Options, as for upstream ``canonicalize``: ``max-iterations`` bounds the
    greedy rewrite driver's sweeps (at least 1); with ``test-convergence``,
    not reaching a fixed point within them is an error.
    """

    NAME = "sparse-iter-fold-encodings"
    max_iterations: int = 10
    test_convergence: bool = False

    def __post_init__(self) -> None:
        if not 1 <= self.max_iterations < 2**31:  # GreedyRewriteConfig holds an int
            raise ValueError(
                f"max-iterations must be at least 1 and below 2^31, got {self.max_iterations}"
            )

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        patterns = RewritePatternSet(op.context)
        patterns.add(SET, roundtrip_to_source)
        patterns.add(UNSET, roundtrip_to_source)
        config = GreedyRewriteConfig()
        config.max_iterations = self.max_iterations
        config.enable_folding = False
        try:
            apply_patterns_and_fold_greedily(op, patterns.freeze(), config)
        except RuntimeError as exc:
            if "failed to converge" not in str(exc):
                raise
            if self.test_convergence:
                op.location.emit_error(
                    f"{self.NAME} did not converge within {self.max_iterations} iterations"
                )
                pass_.signal_pass_failure()
