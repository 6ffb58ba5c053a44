"""Rewrite one function so that encoded tensors travel as flat buffers (stage II -> III).

Each encoded value becomes a :class:`Bundle` (its buffers and dimension
sizes). Entry block arguments are replaced by their bundles' parameters;
``sparse_iter.positions``/``coordinates``/``values`` and ``tensor.dim`` with
a constant index read a bundle; ``sparse_iter.with_values`` and
``sparse_iter.assemble`` make new bundles, ``sparse_iter.get_part`` picks a
composable bundle's part, ``sparse_iter.storage_size`` sums the buffers' bytes; ``func.return`` and
``func.call`` pass bundles flattened. Any other use of an encoded value is
an error at that op.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith
from mlir.dialects import func as func_d
from mlir.dialects import tensor as tensor_d

from sparsecomp.errors import SparsecompError
from sparsecomp.formats.layout import Layout
from sparsecomp.ir import attrs
from sparsecomp.ir.walk import preorder
from sparsecomp.lowering.abi import AnyLayout, buffer_types, flat_types

STORAGE_SIZE = "sparse_iter.storage_size"


def _bytes(ty: ir.Type) -> int:
    """Bytes per element of a tensor type (``index``: 8; ``complex<f64>``: 16)."""
    element = ir.RankedTensorType(ty).element_type
    if isinstance(element, ir.IndexType):
        return 8
    if isinstance(element, ir.ComplexType):
        return 2 * _bytes(ir.RankedTensorType.get([1], ir.ComplexType(element).element_type))
    width = element.width
    return max(1, width // 8)


class FlattenError(SparsecompError):
    """An encoded value is used by an op the buffer lowering does not know."""

    def __init__(self, message: str, op: ir.Operation) -> None:
        super().__init__(message)
        self.op = op


@dataclass
class Bundle:
    names: list[str]
    buffers: list[ir.Value]
    dims: list[ir.Value]

    def flat(self) -> list[ir.Value]:
        return [*self.buffers, *self.dims]

    def buffer(self, name: str) -> ir.Value:
        return self.buffers[self.names.index(name)]


def layout_of(ty: ir.Type) -> AnyLayout | None:
    """The layout of an encoded tensor type (a single or a composable one)."""
    return attrs.layout_of(ty)


def flatten_types(types: list[ir.Type]) -> list[ir.Type]:
    out: list[ir.Type] = []
    for ty in types:
        layout = layout_of(ty)
        out += [ty] if layout is None else flat_types(ty, layout)
    return out


def _bundle(ty: ir.Type, values: list[ir.Value]) -> Bundle:
    layout = layout_of(ty)
    assert layout is not None
    names = [n for n, _ in buffer_types(layout, ir.RankedTensorType(ty).element_type)]
    return Bundle(names, values[: len(names)], values[len(names) :])


def _unpack(types: list[ir.Type], values: list[ir.Value]) -> list[ir.Value | Bundle]:
    """Group flat ``values`` back into one entry per original type."""
    out: list[ir.Value | Bundle] = []
    at = 0
    for ty in types:
        layout = layout_of(ty)
        n = 1 if layout is None else len(flat_types(ty, layout))
        out.append(values[at] if layout is None else _bundle(ty, values[at : at + n]))
        at += n
    return out


class Flattener:
    """Rewrites the body of one ``func.func``; ``signatures`` maps callee -> old function type."""

    def __init__(self, signatures: dict[str, ir.FunctionType]) -> None:
        self.signatures = signatures
        self.bundles: dict[ir.Value, Bundle] = {}
        self.dead: list[ir.Operation] = []  # ops whose encoded results live on as bundles

    def run(self, func: ir.Operation) -> None:
        entry = func.regions[0].blocks[0]
        old_args = list(entry.arguments)
        # Block arguments can only be appended: re-create every argument in
        # order (flattened where encoded), then drop the originals.
        for arg in old_args:
            layout = layout_of(arg.type)
            if layout is None:
                arg.replace_all_uses_with(entry.add_argument(arg.type, arg.location))
                continue
            new = [entry.add_argument(t, arg.location) for t in flat_types(arg.type, layout)]
            self.bundles[arg] = _bundle(arg.type, new)
        for op in preorder(func)[1:]:
            self.rewrite(op)
        for op in reversed(self.dead):
            op.erase()
        for _ in old_args:
            entry.erase_argument(0)

    def _encoded_operands(self, op: ir.Operation) -> bool:
        return any(v in self.bundles for v in op.operands)

    def rewrite(self, op: ir.Operation) -> None:
        name = op.name
        if name == "sparse_iter.assemble":
            self._assemble(op)
            return
        if name == "func.return":
            if self._encoded_operands(op):
                with ir.InsertionPoint(op), op.location:
                    func_d.ReturnOp(self._flat(list(op.operands)))
                op.erase()
            return
        if name == "func.call":
            self._call(op)
            return
        if name == STORAGE_SIZE:
            self._storage_size(op)
            return
        if not self._encoded_operands(op):
            return
        bundle = self.bundles[op.operands[0]]
        if name in ("sparse_iter.positions", "sparse_iter.coordinates"):
            level = ir.IntegerAttr(op.attributes["level"]).value
            prefix = "pos" if name.endswith("positions") else "crd"
            self._replace(op, bundle.buffer(f"{prefix}{level}"))
        elif name == "sparse_iter.get_part":
            prefix = f"part{ir.IntegerAttr(op.attributes['index']).value}."
            chosen = [(n, b) for n, b in zip(bundle.names, bundle.buffers, strict=True)
                      if n.startswith(prefix)]  # fmt: skip
            names = [n.removeprefix(prefix) for n, _ in chosen]
            self.bundles[op.results[0]] = Bundle(names, [b for _, b in chosen], bundle.dims)
            self.dead.append(op)
        elif name == "sparse_iter.values":
            self._replace(op, bundle.buffer("values"))
        elif name == "tensor.dim" and self._constant(op.operands[1]) is not None:
            self._replace(op, bundle.dims[self._constant(op.operands[1])])  # type: ignore[index]
        elif name == "sparse_iter.with_values":
            buffers = [*bundle.buffers[:-1], op.operands[1]]
            self.bundles[op.results[0]] = Bundle(bundle.names, buffers, bundle.dims)
            self.dead.append(op)
        else:
            raise FlattenError(f"'{name}' on a sparse tensor is not supported by the lowering", op)

    def _assemble(self, op: ir.Operation) -> None:
        ty = op.results[0].type
        layout = layout_of(ty)
        assert isinstance(layout, Layout)  # verified: a single layout
        rank = ir.RankedTensorType(ty).rank
        operands = list(op.operands)
        n_pos = sum(lv.has_positions for lv in layout.levels)
        n_crd = sum(lv.has_coordinates for lv in layout.levels)
        pos, crd = iter(operands[:n_pos]), iter(operands[n_pos : n_pos + n_crd])
        names, buffers = [], []
        for lv, level in enumerate(layout.levels):
            if level.has_positions:
                names.append(f"pos{lv}")
                buffers.append(next(pos))
            if level.has_coordinates:
                names.append(f"crd{lv}")
                buffers.append(next(crd))
        values, dims = operands[n_pos + n_crd], operands[len(operands) - rank :]
        self.bundles[op.results[0]] = Bundle([*names, "values"], [*buffers, values], dims)
        self.dead.append(op)

    def _storage_size(self, op: ir.Operation) -> None:
        """``sum(len(buffer) * element bytes)`` over the tensor's buffers (dense: its size)."""
        value = op.operands[0]
        with ir.InsertionPoint(op), op.location:
            index = ir.IndexType.get()

            def dim(tensor: ir.Value, d: int) -> ir.Value:
                return tensor_d.dim(tensor, arith.constant(index, d))

            if value in self.bundles:
                total = arith.constant(index, 0)
                for buffer in self.bundles[value].buffers:
                    size = arith.muli(dim(buffer, 0), arith.constant(index, _bytes(buffer.type)))
                    total = arith.addi(total, size)
            else:
                total = arith.constant(index, _bytes(value.type))
                for d in range(ir.RankedTensorType(value.type).rank):
                    total = arith.muli(total, dim(value, d))
        self._replace(op, total)

    @staticmethod
    def _constant(value: ir.Value) -> int | None:
        owner = value.owner
        if isinstance(owner, ir.Block) or owner.name != "arith.constant":
            return None
        return ir.IntegerAttr(owner.attributes["value"]).value

    @staticmethod
    def _replace(op: ir.Operation, value: ir.Value) -> None:
        op.results[0].replace_all_uses_with(value)
        op.erase()

    def _flat(self, values: list[ir.Value]) -> list[ir.Value]:
        out: list[ir.Value] = []
        for v in values:
            out += self.bundles[v].flat() if v in self.bundles else [v]
        return out

    def _call(self, op: ir.Operation) -> None:
        callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
        old = self.signatures.get(callee)
        if old is None:
            return
        results = list(old.results)
        if (
            flatten_types(list(old.inputs)) == list(old.inputs)
            and flatten_types(results) == results
        ):
            return
        with ir.InsertionPoint(op), op.location:
            call = func_d.CallOp(flatten_types(results), callee, self._flat(list(op.operands)))
        for old_res, new in zip(op.results, _unpack(results, list(call.results)), strict=True):
            if isinstance(new, Bundle):
                self.bundles[old_res] = new
            else:
                old_res.replace_all_uses_with(new)
        self.dead.append(op)
