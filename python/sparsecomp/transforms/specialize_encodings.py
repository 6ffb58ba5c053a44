"""Pass ``sparse-iter-specialize-encodings``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.passmanager import ExternalPass

from sparsecomp.transforms._specialize import Failure, Specializer, function_targets
from sparsecomp.transforms.base import SparsecompPass


@dataclasses.dataclass(frozen=True)
class SpecializeEncodingsPass(SparsecompPass):
    """Resolve #sparse_iter.sparsity / #sparse_iter.encoding types to layouts for a target.

    Every tensor type in the module whose encoding is a ``#sparse_iter.sparsity``
    or ``#sparse_iter.encoding`` gets the ``#sparse_iter.layout`` the target's
    resolver chooses (``sparsecomp.targets.resolve``: unstructured -> CSR, CSC
    for a transposed read on CPU, block -> BSR, nm -> n:m, ragged -> ELL, rank 1
    a compressed vector, rank 3 batched CSR; 32-bit indices unless static sizes
    need 64), in function signatures, block arguments and op results; plain
    and layout types are left alone. IREE's ``SpecializeEncodings``. It runs
    on the module, since calls need every function's signature.

    Which layout a value gets:

    - an ``#encoding`` type: its own sparsity and recorded use;
    - a ``#sparsity`` function argument or op result: what its first use (in
      program order) resolves to: a linalg operand (op, operand index, maps),
      a ``set_encoding`` to an ``#encoding`` or layout, a call argument (the
      callee's signature) or a ``return`` (the function's result); the
      sparsity alone when no use decides;
    - a ``#sparsity`` made by ``set_encoding`` from an encoded value keeps that
      value's layout; other ops' results keep the layout of an operand that
      had the same type (``tensor.cast``-like ops), else the first-use rule;
    - a function result: its declared encoding, resolved without use; linalg
      results: their init's type.

    Where a value's layout differs from what a use needs (a second use that
    resolves differently, a call into a function of another target, a
    ``return``), an explicit conversion ``set_encoding`` from layout to
    layout is inserted before the use (the first use wins), left for the
    lowering; ``set_encoding`` ops whose two sides end up equal are erased.
    After this pass and ``sparse-iter-fold-encodings`` no ``#sparsity`` or
    ``#encoding`` is left and no set/unset round trip.

    Option ``target``: ``"host"`` (the detected host CPU), a name from the
    module's ``sparse_iter.targets`` (a module target called ``host`` wins over
    the detected one), or empty: each function's ``sparse_iter.target``, else
    the module's only target, else the host. With ``densify``, unstructured
    tensors with a known density of at least 0.5 get the all-dense layout.

    Errors, at the op or function location: an unknown target, a function
    that cannot tell which of several targets it is for, an encoding the
    resolver cannot lay out (block/ragged sparsity on rank != 2, rank 0, an
    indexing map that does not fit the tensor), unresolved encodings carried
    through region-holding ops other than linalg (``scf.for`` iter_args) or
    through non-entry block arguments.

    Before:

    ```mlir
    #sp = #sparse_iter.sparsity<unstructured, density = 0.01>
    func.func @spmm(%a: tensor<?x?xf32, #sp>, %b: tensor<?x?xf32>,
                    %c: tensor<?x?xf32>) -> tensor<?x?xf32> {
      %0 = linalg.matmul ins(%a, %b : tensor<?x?xf32, #sp>, tensor<?x?xf32>)
                         outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
      return %0 : tensor<?x?xf32>
    }
    ```

    After (``#csr`` stands for ``#sparse_iter.layout<{map = (d0, d1) ->
    (d0 : dense, d1 : compressed), posWidth = 32, crdWidth = 32}>``):

    ```mlir
    func.func @spmm(%a: tensor<?x?xf32, #csr>, %b: tensor<?x?xf32>,
                    %c: tensor<?x?xf32>) -> tensor<?x?xf32> {
      %0 = linalg.matmul ins(%a, %b : tensor<?x?xf32, #csr>, tensor<?x?xf32>)
                         outs(%c : tensor<?x?xf32>) -> tensor<?x?xf32>
      return %0 : tensor<?x?xf32>
    }
    ```
    """

    NAME = "sparse-iter-specialize-encodings"
    target: str = ""
    densify: bool = False

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        try:
            specializer = Specializer(op, function_targets(op, self.target), self.densify)
            for name in specializer.funcs:
                specializer.signature(name)
            for name in specializer.funcs:
                specializer.rewrite(name)
        except Failure as failure:
            failure.loc.emit_error(failure.message)
            pass_.signal_pass_failure()
