"""Modules that name a CPU target and a CUDA target: one executable in parts.

A module whose ``sparse_iter.targets`` holds ``#sparse_iter.cuda<...>``
targets besides (or instead of) CPU ones is split by device before its
stages run. Every public function belongs to the target its
``sparse_iter.target`` names (the module's only target where it names
none); the functions of all CPU targets make one part, those of each CUDA
target another. Each part is a copy of the module holding its own public
functions and the private functions they reach (``symbol-dce``): a private
helper called from both devices is in both copies, and each copy's layouts
are resolved for its own device, so the CPU part may read an operand as CSC
where the GPU part reads it as CSR, or a 2:4 operand with ``mma.sp``
metadata. The CPU part keeps the module's CPU targets (each function built
for its own ISA, as in any multi-target module); a CUDA part is a module
of the one GPU, built as ``target="cuda:sm_XX"`` builds one, or, when the
executable is compiled with ``target="cuda-emu"``, as ``cuda-emu:sm_XX``
builds one (its schedule run on this CPU).

The parts are built into one kernel directory: the first part (the CPU's,
where there is one) at its top, each other in ``part-N/``, listed in the
top manifest's ``parts``. :func:`sparsecomp.load` loads them all; the
executable's functions are the union of the parts', each called on its own
device, and ``exe.plan()`` lists each part's conversions and the data that
crosses to a GPU at each call (``Transfer``).

Placement is by function. A public function whose top-level ops are
marked for both devices is first cut into one public function per run of
ops on one device (:mod:`.segments`), called in turn as the function (a
*chain*, the manifest's ``chains``). An op marked for the other device
inside a loop or branch and a call from a function of one device to a
function of the other are refused, at their locations: data would cross
devices inside compiled code, which is not built.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mlir import ir

from sparsecomp.compiler.segments import Chain, cut
from sparsecomp.errors import CompileError
from sparsecomp.ir.parsing import location_text
from sparsecomp.ir.targets import module_targets
from sparsecomp.ir.verify import TARGET_ATTR, TARGETS_ATTR
from sparsecomp.targets import CpuTarget, CudaTarget, Target
from sparsecomp.transforms.pipeline import build_pass_manager

#: The key of the part that holds every CPU target's functions.
CPU = ""


@dataclass
class Part:
    """One device's share of a module.

    ``target``: the CUDA target's name in ``sparse_iter.targets`` (:data:`CPU`
    for the CPU part); ``device``: that target (None for the CPU part);
    ``module``: the part's own module; ``functions``: its public functions.
    """

    target: str
    device: CudaTarget | None
    module: ir.Module
    functions: list[str] = field(default_factory=list)


def has_devices(module: ir.Module) -> bool:
    """Whether the module names a CUDA target in its ``sparse_iter.targets``."""
    if TARGETS_ATTR not in module.operation.attributes:
        return False
    return any(isinstance(t, CudaTarget) for t in module_targets(module.operation).values())


def _name(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value


def _public(op: ir.Operation) -> bool:
    hidden = "sym_visibility" in op.attributes
    return not hidden or ir.StringAttr(op.attributes["sym_visibility"]).value == "public"


def _target_name(op: ir.Operation) -> str | None:
    if TARGET_ATTR not in op.attributes:
        return None
    return ir.StringAttr(op.attributes[TARGET_ATTR]).value


def _device_of(name: str | None, named: dict[str, Target]) -> str | None:
    """The part key of target ``name``: its own name for a CUDA target, :data:`CPU`
    for a CPU one, None for none."""
    if name is None or name not in named:
        return None
    return name if isinstance(named[name], CudaTarget) else CPU


def _describe(key: str) -> str:
    return "the CPU" if key == CPU else f"CUDA target '{key}'"


def split(module: ir.Module, filename: str) -> tuple[list[Part], list[Chain]]:
    """The module's parts, the CPU's first, and the functions cut into parts
    (:mod:`.segments`); raises :class:`CompileError` for code that would cross
    devices inside the program (see the module docstring)."""
    named = module_targets(module.operation)
    functions = [op.operation for op in module.body.operations if op.operation.name == "func.func"]
    owner: dict[str, str] = {}  # function -> part key
    for func in functions:
        own = _device_of(_target_name(func), named)
        if own is None and _public(func):
            if len(named) != 1:
                raise CompileError(
                    f"{location_text(func.location, filename)}: no sparse_iter.target on "
                    f"'{_name(func)}' and the module has several targets "
                    f"({', '.join(sorted(named))}); name one"
                )
            own = _device_of(next(iter(named)), named)
        if own is not None:
            owner[_name(func)] = own
    chains = _cut(functions, owner, named, filename)
    if chains:
        functions = [o.operation for o in module.body.operations if o.operation.name == "func.func"]
    problems = _crossings(functions, owner, named, filename)
    if problems:
        raise CompileError(
            f"{filename}: an executable places whole functions on a device; data would "
            "cross between the CPU and a GPU inside this program: " + "; ".join(problems),
            hint="mark ops for the other device at the top level of a function's body (not "
            "in a loop or branch: the function then runs in parts, one per device), or give "
            "the GPU's work a public function of its own (sparse_iter.target = the CUDA "
            "target) and call it from Python",
        )
    keys = sorted({owner[_name(f)] for f in functions if _public(f) and _name(f) in owner})
    parts = []
    for key in keys:  # CPU ("") sorts first
        mine = [_name(f) for f in functions if _public(f) and owner.get(_name(f)) == key]
        parts.append(Part(key, _cuda(named, key), _copy(module, key, mine, named), mine))
    return parts, chains


def _cut(
    functions: list[ir.Operation], owner: dict[str, str], named: dict[str, Target], filename: str
) -> list[Chain]:
    """Cut each public function whose top-level ops run on two devices (:mod:`.segments`);
    its parts take its place in ``owner``."""
    chains = []

    def device(op: ir.Operation) -> str | None:
        return _device_of(_target_name(op), named)

    for function in functions:
        name = _name(function)
        if not _public(function) or name not in owner:
            continue
        own = owner[name]
        target_of = {own: _target_name(function) or next(iter(named))}
        for op in function.regions[0].blocks[0].operations:
            key = device(op.operation)
            if key is not None and key not in target_of:
                target_of[key] = _target_name(op.operation)  # type: ignore[assignment]
        chain = cut(function, own, device, target_of, filename)
        if chain is None:
            continue
        del owner[name]
        for step in chain.steps:
            owner[step["function"]] = step["device"]
        chains.append(chain)
    return chains


def _quoted(name: str) -> str:
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _cuda(named: dict[str, Target], key: str) -> CudaTarget | None:
    target = named.get(key)
    return target if isinstance(target, CudaTarget) else None


def _crossings(
    functions: list[ir.Operation], owner: dict[str, str], named: dict[str, Target], filename: str
) -> list[str]:
    """Ops marked for another device than their function's, and calls between devices."""
    found: list[str] = []
    for func in functions:
        mine = owner.get(_name(func))
        if mine is None:  # a private helper: it goes with its callers
            continue

        def visit(op: ir.Operation, func: ir.Operation = func, mine: str = mine) -> ir.WalkResult:
            where = location_text(op.location, filename)
            other = _device_of(_target_name(op), named)
            if op is not func and other is not None and other != mine:
                found.append(
                    f"{where}: '{op.name}' is marked for {_describe(other)} inside "
                    f"'{_name(func)}', a function for {_describe(mine)}"
                )
            if op.name == "func.call":
                callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
                theirs = owner.get(callee)
                if theirs is not None and theirs != mine:
                    found.append(
                        f"{where}: '{_name(func)}' ({_describe(mine)}) calls '{callee}' "
                        f"({_describe(theirs)})"
                    )
            return ir.WalkResult.ADVANCE

        func.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def _copy(module: ir.Module, key: str, public: list[str], named: dict[str, Target]) -> ir.Module:
    """The module with the public functions of part ``key`` and what they reach.

    A CUDA part's copy names no targets (the build adds its GPU as the only
    one) and loses every ``sparse_iter.target``; the CPU part's keeps the CPU
    targets and the functions' own."""
    copy = ir.Module.parse(module.operation.get_asm(enable_debug_info=True))
    for op in list(copy.body.operations):
        op = op.operation
        if op.name == "func.func" and _public(op) and _name(op) not in public:
            op.erase()
    build_pass_manager("builtin.module(symbol-dce)", copy.context).run(copy.operation)
    attrs = copy.operation.attributes
    if key == CPU:
        cpu = {n: t for n, t in named.items() if isinstance(t, CpuTarget)}
        entries = ", ".join(f"{_quoted(n)} = {t.attr_text()}" for n, t in cpu.items())
        attrs[TARGETS_ATTR] = ir.Attribute.parse(f"{{{entries}}}")
        return copy
    del attrs[TARGETS_ATTR]

    def strip(op: ir.Operation) -> ir.WalkResult:
        if TARGET_ATTR in op.attributes:
            del op.attributes[TARGET_ATTR]
        return ir.WalkResult.ADVANCE

    copy.operation.walk(strip, ir.WalkOrder.PRE_ORDER)
    return copy
