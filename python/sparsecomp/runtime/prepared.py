"""Prepared operands: a matrix packed once in the layout chosen for a function.

``exe.prepare(A)`` (:meth:`Executable.prepare`) chooses the layout of
``A`` for the function's op with :func:`sparsecomp.formats.choice.choose`
(on a CPU, the model's best few and CSR are then timed on a sample of
``A``: :mod:`.tournament`), packs ``A`` in it once, and readies the
function's variant for that layout (compiled on first need from the
executable's source, then kept by the compile cache). ``exe(prepared, B)``
then calls the variant with the packed tensor: no conversion per call.
``exe.prepare(A, layout="bsr:4x4")`` forces a layout.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sparsecomp.errors import SparsecompError
from sparsecomp.formats.choice import Choice, choose
from sparsecomp.formats.composable import Composable
from sparsecomp.formats.gpu_balance import OPS as BALANCED_OPS
from sparsecomp.formats.gpu_balance import choose_balance
from sparsecomp.formats.names import parse_layout
from sparsecomp.formats.stats import matrix_stats
from sparsecomp.formats.tensor import SparseTensor
from sparsecomp.runtime.abi import Signature
from sparsecomp.runtime.marshal import check_dtype
from sparsecomp.runtime.tournament import tournament, uncompiled

LOG = logging.getLogger("sparsecomp")


@dataclass(frozen=True)
class Prepared:
    """``A`` packed for one function: pass it where that function takes ``A``."""

    #: the packed operand
    tensor: SparseTensor
    #: the layout it is packed in (a name ``parse_layout`` accepts)
    layout: str
    #: how the layout was chosen (None when forced)
    choice: Choice | None
    #: the function it was prepared for (the original's name)
    function: str
    #: the variant that takes ``tensor`` (a :class:`~sparsecomp.runtime.executable.Function`)
    variant: Any
    #: the argument it stands for
    argument: int
    #: on a GPU, the variant's schedule for a CSR SpMV, SpMM or SDDMM (``"rows"`` or
    #: ``"nonzeros"``, :mod:`sparsecomp.formats.gpu_balance`); None elsewhere
    balance: str | None = None
    #: the directory of the executable that prepared it: a function of the same name
    #: in another one (another kernel) refuses it, for its variant runs this one's
    owner: str | None = None
    #: why the layout is this one where no choice was made: the caller asked for it
    #: (``layout=``), or a loaded executable has no other
    given: str = "forced"

    def call(self, args: tuple[Any, ...], out: Any = None) -> Any:
        """Call the variant with ``args``, this operand in its place (``out``: the
        arrays the results are written into, as in a call with ``out=``)."""
        args = (*args[: self.argument], self.tensor, *args[self.argument + 1 :])
        return self.variant(*args) if out is None else self.variant(*args, out=out)

    def __repr__(self) -> str:
        why = f" ({self.choice.why})" if self.choice is not None else f" ({self.given})"
        schedule = f", gpu_balance={self.balance}" if self.balance is not None else ""
        return f"Prepared({self.function}, {self.tensor.shape}, {self.layout}{schedule}{why})"


def infer_op(signature: Signature) -> tuple[str, int]:
    """``(op, sparse argument index)`` of a function: SDDMM if it returns a sparse tensor,
    SpMV if it takes a dense vector, else SpMM (for choosing a layout)."""
    sparse = [i for i, a in enumerate(signature.args) if a.kind == "sparse"]
    if len(sparse) != 1 or signature.args[sparse[0]].rank != 2:
        raise SparsecompError(
            f"prepare() needs a function with one sparse matrix argument; "
            f"'{signature.name}' has {len(sparse)} sparse arguments of rank 2 or other"
        )
    if any(r.kind == "sparse" for r in signature.results):
        return "sddmm", sparse[0]
    if any(a.kind == "dense" and a.rank == 1 for a in signature.args):
        return "spmv", sparse[0]
    return "spmm", sparse[0]


def prepare(
    signature: Signature,
    A: Any,
    layout: str | None,
    k: int,
    variant_for: Callable[[str, str | None], Any],
    target: str = "host",
    balance: str | None = None,
) -> Prepared:
    """:class:`Prepared` for ``signature``'s sparse argument (see the module); ``variant_for``
    returns the function compiled for a layout name and a GPU schedule (``balance``;
    None: the executable's own). ``balance`` forces the schedule; else a GPU's CSR
    SpMV, SpMM or SDDMM takes the one the choice gives."""
    import scipy.sparse as sp  # type: ignore[import-untyped]

    op, argument = infer_op(signature)
    given = A if isinstance(A, SparseTensor) else None
    if given is not None:  # packed from it; its scipy form (float32 for float16) for the choice
        A = given.to_scipy()
    if not sp.issparse(A):
        raise SparsecompError(
            f"prepare() takes a scipy.sparse matrix or a SparseTensor, not {type(A).__name__}"
        )
    if len(A.shape) != 2:
        raise SparsecompError(f"prepare() takes a matrix, not an operand of shape {A.shape}")
    if k < 1:
        raise SparsecompError(
            f"prepare(): k, the dense operand's columns, must be at least 1, got {k}"
        )
    spec = signature.args[argument]
    where = f"prepare() for {signature.name}: argument {argument} ({spec.describe()})"
    check_dtype(spec, given.dtype if given is not None else A.dtype, where, scipy=given is None)
    choice = None
    if layout is None:
        choice = choose(A, op=op, k=k, target=target)
        if target == "host":
            choice = tournament(signature, argument, A, choice, k, lambda n: variant_for(n, None))
        layout = choice.layout
        LOG.info("sparsecomp: %s(%s): %s", signature.name, op, choice)
    parsed = parse_layout(layout)
    if op == "sddmm" and isinstance(parsed, Composable):
        raise SparsecompError(
            f"prepare(): {signature.name} (SDDMM) returns its result in its operand's "
            f"layout, and a composable layout ({layout}) cannot be built as a result",
            hint="prepare it as csr, ell or bsr:RxC",
        )
    name = str(parsed)
    if balance not in (None, "rows", "nonzeros"):
        raise SparsecompError(f"prepare(): balance is 'rows' or 'nonzeros', not {balance!r}")
    if target != "host" and op in BALANCED_OPS and name == "csr":
        if balance is None:
            balance = choice.balance if choice is not None and choice.balance else None
            if balance is None:  # a forced CSR: the rule alone
                balance, why = choose_balance(matrix_stats(A), op)
                LOG.info("sparsecomp: %s(%s): csr on the GPU: %s", signature.name, op, why)
    elif balance == "nonzeros":
        raise SparsecompError(
            "prepare(): balance='nonzeros' splits a CSR SpMV's, SpMM's or SDDMM's entries on "
            f"a GPU, not {op} over {name}"
        )
    else:
        balance = None
    try:
        variant = variant_for(name, balance)
    except SparsecompError as why:
        if choice is None or name == "csr":  # a layout asked for: its error is the caller's
            raise
        # the model's pick, untimed (large operands), and not a form this kernel has
        choice = dataclasses.replace(
            choice, layout="csr", why=f"{choice.why}; {uncompiled(name, why)}"
        )
        name = "csr"
        variant = variant_for(name, balance)
    tensor = given.to(name) if given is not None else SparseTensor.from_scipy(A, name)
    return Prepared(tensor, name, choice, signature.name, variant, argument, balance)
