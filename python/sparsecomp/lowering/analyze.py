"""Build the :class:`~sparsecomp.lowering.plan.Plan` of one ``linalg.generic``.

Raises :class:`~sparsecomp.lowering.plan.Unsupported` with a one-line reason
for ops outside the sparse_iter lowering (the caller reports it at the op's
location, or hands the function to the upstream sparsifier).
"""

from __future__ import annotations

from mlir import ir

from sparsecomp.ir.linalg_ops import iterator_types
from sparsecomp.lowering.plan import Access, Plan, Step, Unsupported, _dims_of, accesses
from sparsecomp.lowering.zeros import Zero, classify

_VECTOR_OPS = ("arith.", "math.")


def _check_driver(driver: Access) -> None:
    dims = driver.dims
    if None in dims or len(set(dims)) != len(dims):
        raise Unsupported(
            f"the sparse operand's indexing map {driver.map} must be a projected permutation"
        )
    # DimMap.check guarantees that a 'mod' level follows its 'floordiv' level,
    # which the nest relies on to rebuild block coordinates.


def _shared_inputs(ins: list[Access], driver: int) -> tuple[int, ...]:
    d = ins[driver]
    shared = []
    for i, acc in enumerate(ins):
        if i == driver or acc.layout is None:
            continue
        same = acc.value.type == d.value.type and acc.map == d.map
        if not (same and acc.layout.index_group):
            raise Unsupported(
                "co-iteration over sparse operands with different index structures "
                "(give both the same layout and map with an index_group to share it)"
            )
        shared.append(i)
    return tuple(shared)


def _check_output(out: Access, driver: Access, op: ir.Operation) -> None:
    if out.layout is None:
        return
    if out.value.type != driver.value.type or out.map != driver.map:
        raise Unsupported(
            "a sparse output with the structure of a sparse input must have its type "
            "and indexing map"
        )
    init = out.value.owner
    if isinstance(init, ir.Block) or init.name != "tensor.empty":
        if out.value != driver.value:
            raise Unsupported("a sparse output's init must be tensor.empty or the sparse input")


def _defined(plan_steps: list[Step], level_dims: list[tuple[int, str]]) -> list[set[int]]:
    """Loop dims known before each step (and after the last)."""
    known: set[int] = set()
    out = [set(known)]
    for step in plan_steps:
        if step.kind == "dense":
            known.add(step.dim)
        else:
            dim, kind = level_dims[step.level]
            if kind != "floordiv":
                known.add(dim)
        out.append(set(known))
    return out


def _contiguous(dim: int, accs: list[Access]) -> bool:
    """``dim`` is only ever the last, plain index of dense operands."""
    for acc in accs:
        if not acc.uses(dim):
            continue
        if acc.layout is not None or not acc.dims or acc.dims[-1] != dim:
            return False
        if any(dim in _dims_of(e) for e in acc.map.results[:-1]):
            return False
    return True


def _transposed(dim: int, accs: list[Access], gathered: set[int]) -> bool:
    """``dim`` is the last, plain index of some dense operands and the *first*
    index of the others, each a matrix: the output (``Y[j, i]``), or an input
    whose other index is a driver level's (``X[j, k]``: gathered, so packed
    into panels with ``j`` innermost, see ``NestEmitter.pack``).

    ``Y = X W^T`` with a sparse ``W`` (a linear layer, ``Y[j, i] = sum_k
    W[i, k] X[j, k]``) vectorizes along the tokens ``j`` this way, with
    ``X`` and ``Y`` row-major as the caller holds them."""
    found = False
    for acc in accs:
        if not acc.uses(dim) or _contiguous(dim, [acc]):
            continue
        if acc.layout is not None or len(acc.dims) != 2 or acc.dims[0] != dim:
            return False
        other = acc.dims[1]
        if other is None or other == dim:
            return False
        if acc is not accs[-1] and other not in gathered:
            return False
        found = True
    return found


def _vector_body(block: ir.Block) -> bool:
    return all(
        op.operation.name == "linalg.yield" or op.operation.name.startswith(_VECTOR_OPS)
        for op in block.operations
    )


def _is_sum_into_out(block: ir.Block, out_arg: int) -> bool:
    """The body yields ``out + g`` (add), with ``out`` used nowhere else."""
    out = block.arguments[out_arg]
    ops = list(block.operations)
    yielded = ops[-1].operands[0]
    owner = yielded.owner
    if isinstance(owner, ir.Block) or owner.name not in ("arith.addf", "arith.addi"):
        return False
    if out not in list(owner.operands):
        return False
    return sum(1 for op in ops for v in op.operands if v == out) == 1


def make_plan(op: ir.Operation, vectorize: bool) -> Plan:
    """Analyse ``op`` (a ``linalg.generic`` with sparse operands)."""
    ins, outs = accesses(op)
    if len(outs) != 1:
        raise Unsupported(f"ops with {len(outs)} outputs are not supported (one output)")
    out = outs[0]
    sparse_ins = [i for i, a in enumerate(ins) if a.layout is not None]
    if not sparse_ins:
        raise Unsupported("only the output is sparse; a sparse input must drive the iteration")
    driver = sparse_ins[0]
    _check_driver(ins[driver])
    shared = _shared_inputs(ins, driver)
    _check_output(out, ins[driver], op)
    iterators = tuple(iterator_types(op))
    block = op.regions[0].blocks[0]
    zero = classify(block, [driver, *shared], len(ins))
    if zero == Zero.OTHER:
        raise Unsupported(
            "the body does not vanish where the sparse operand is zero "
            "(e.g. sparse + dense); iterating only stored entries would be wrong"
        )
    layout = ins[driver].layout
    assert layout is not None
    drv_dims = ins[driver].dims
    out_dims = set().union(*(_dims_of(e) for e in out.map.results)) if out.map.results else set()
    if zero == Zero.ZERO and any(d is not None and d not in out_dims for d in drv_dims):
        raise Unsupported(
            "the body overwrites the output (it yields zero where the sparse operand is "
            "zero) in a reduction over the sparse operand; skipping its zeros would be wrong"
        )
    level_dims = [(int(drv_dims[e.dim] or 0), str(e.op)) for e in layout.dim_to_lvl.results]
    n_loops = len(iterators)
    free = [d for d in range(n_loops) if d not in drv_dims]
    free_par = [d for d in free if d in out_dims]
    free_red = [d for d in free if d not in out_dims]
    lead = 0
    for dim, _ in level_dims:
        if dim in out_dims and iterators[dim] == "parallel":
            lead += 1
        else:
            break
    vec_dim, vec_red = -1, False
    if vectorize and _vector_body(block):
        every = [*ins, out]
        cands = [d for d in free_par if _contiguous(d, every)]
        driven = {dim for dim, _ in level_dims}
        flipped = [d for d in free_par if _transposed(d, every, driven)]
        if cands:
            vec_dim = cands[-1]
        elif flipped:
            vec_dim = flipped[-1]
        else:
            reds = [d for d in free_red if _contiguous(d, every)]
            if reds and not out.uses(reds[-1]) and _is_sum_into_out(block, len(ins)):
                vec_dim, vec_red = reds[-1], True
    free_par = [d for d in free_par if d != vec_dim] + ([vec_dim] if vec_dim in free_par else [])
    free_red = [d for d in free_red if d != vec_dim] + ([vec_dim] if vec_red else [])
    levels = [Step("level", level=lv) for lv in range(len(level_dims))]
    steps = [
        *levels[:lead],
        *(Step("dense", dim=d) for d in free_par),
        *levels[lead:],
        *(Step("dense", dim=d) for d in free_red),
    ]
    defined = _defined(steps, level_dims)
    if out.layout is not None:
        hoist = max(i for i, s in enumerate(steps) if s.kind == "level") + 1
    else:
        hoist = next(i for i, known in enumerate(defined) if out_dims <= known)
    first = level_dims[0]
    parallel = (
        lead > 0
        and first[1] != "mod"
        and layout.levels[0].is_unique
        and layout.levels[0].name in ("dense_fixed", "compressed_varied")
    )
    return Plan(
        op,
        iterators,
        tuple(ins),
        out,
        driver,
        shared,
        zero,
        tuple(steps),
        hoist,
        parallel,
        vec_dim,
        vec_red,
    )
