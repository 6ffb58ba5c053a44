"""Pass ``sparse-iter-cpu-function-targets``."""

from __future__ import annotations

import dataclasses
import json

from mlir import ir
from mlir.passmanager import ExternalPass

from sparsecomp.errors import TargetError
from sparsecomp.ir.targets import module_targets
from sparsecomp.ir.verify import TARGET_ATTR
from sparsecomp.targets import CpuTarget
from sparsecomp.targets.cpu import LLVM_CPUS
from sparsecomp.transforms.base import SparsecompPass


@dataclasses.dataclass(frozen=True)
class CpuFunctionTargetsPass(SparsecompPass):
    """Compile each ``llvm.func`` for its own CPU target's ISA.

    A module may name several CPU targets (``sparse_iter.targets``) and give
    each function one (``sparse_iter.target``). This pass copies the named
    target onto the function as LLVM sees it, ``target_cpu`` and
    ``target_features`` (``+avx2``, ``+fma``, ``+prefer-256-bit``), so that
    one library holds every target's code, each function compiled for its
    own instruction set, and calls between targets stay direct calls. Code
    without a target (entry wrappers, runtime helpers) compiles for the
    module's common target (``CpuTarget.common``), which ``opt``/``llc`` get
    as ``-mattr``; that is also why the module's flags must hold only what
    every target has.

    Functions whose target is not a CPU (a CUDA target) are an error: they
    need the CUDA back end. So are CPU targets of different architectures in
    one module (one library holds them all).

    ```mlir
    llvm.func @on_narrow(...) attributes {sparse_iter.target = "narrow"}
    // becomes
    llvm.func @on_narrow(...) attributes {sparse_iter.target = "narrow",
        target_cpu = "x86-64", target_features = #llvm.target_features<["+sse4.2"]>}
    ```
    """

    NAME = "sparse-iter-cpu-function-targets"

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        targets = module_targets(op)
        cpus = [t for t in targets.values() if isinstance(t, CpuTarget)]
        try:  # one library: the module's CPU targets share an architecture
            CpuTarget.common(cpus) if cpus else None
        except TargetError as exc:
            op.location.emit_error(f"{self.NAME}: {exc.message}")
            pass_.signal_pass_failure()
            return
        for func in op.regions[0].blocks[0].operations:
            func = func.operation
            if func.name != "llvm.func" or TARGET_ATTR not in func.attributes:
                continue
            name = ir.StringAttr(func.attributes[TARGET_ATTR]).value
            target = targets.get(name)
            if target is None:
                continue  # the verifier reports unknown target names
            if not isinstance(target, CpuTarget):
                func.location.emit_error(
                    f"'{ir.StringAttr(func.attributes['sym_name']).value}' is for the "
                    f"{target.attr_text()} target '{name}', which the CPU back end cannot compile"
                )
                pass_.signal_pass_failure()
                return
            func.attributes["target_cpu"] = ir.StringAttr.get(LLVM_CPUS[target.arch])
            features = json.dumps(target.llvm_features())
            func.attributes["target_features"] = ir.Attribute.parse(
                f"#llvm.target_features<{features}>"
            )
