"""NVIDIA GPU target descriptions (``#sparse_iter.cuda``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sparsecomp.errors import TargetError
from sparsecomp.formats.attrtext import AttrNode, Field, Keyword, format_value

#: Compute capabilities the CUDA lowering knows (sm_XY -> XY).
SM_VERSIONS = (70, 75, 80, 86, 87, 89, 90)
#: Dense tensor-core shapes (``mma.sync``) and the first sm that has them.
MMA_SHAPES = {"m8n8k4": 70, "m16n8k8": 75, "m16n8k16": 80, "m16n8k32": 80}
#: Sparse (2:4) tensor-core shapes (``mma.sp``); all need sm_80.
SPARSE_MMA_SHAPES = {"m16n8k16": 80, "m16n8k32": 80}


@dataclass(frozen=True)
class CudaTarget:
    """Compute capability and the MMA shapes a resolver may plan for."""

    sm: int = 80
    mma_shapes: tuple[str, ...] = ("m16n8k16",)
    sparse_mma_shapes: tuple[str, ...] = ("m16n8k16", "m16n8k32")

    def __post_init__(self) -> None:
        if self.sm not in SM_VERSIONS:
            raise TargetError(f"unknown sm version {self.sm}; expected one of {SM_VERSIONS}")
        for kind, shapes, table in (
            ("MMA", self.mma_shapes, MMA_SHAPES),
            ("sparse MMA", self.sparse_mma_shapes, SPARSE_MMA_SHAPES),
        ):
            for shape in shapes:
                if shape not in table:
                    raise TargetError(
                        f"unknown {kind} shape '{shape}'; expected one of {', '.join(table)}"
                    )
                if table[shape] > self.sm:
                    raise TargetError(
                        f"{kind} shape {shape} needs sm_{table[shape]}, not sm_{self.sm}"
                    )

    @classmethod
    def for_sm(cls, sm: int) -> CudaTarget:
        """Target ``sm_XY`` with every MMA shape it has (``"cuda-emu:sm_75"`` and friends)."""
        if sm not in SM_VERSIONS:
            raise TargetError(f"unknown sm version {sm}; expected one of {SM_VERSIONS}")
        dense = tuple(s for s, need in MMA_SHAPES.items() if need <= sm)
        sparse = tuple(s for s, need in SPARSE_MMA_SHAPES.items() if need <= sm)
        return cls(sm, dense, sparse)

    @property
    def chip(self) -> str:
        return f"sm_{self.sm}"

    def attr_node(self) -> AttrNode:
        return AttrNode(
            "cuda",
            (
                Keyword(self.chip),
                Field("mma_shapes", [Keyword(s) for s in self.mma_shapes]),
                Field("sparse_mma_shapes", [Keyword(s) for s in self.sparse_mma_shapes]),
            ),
        )

    def attr_text(self) -> str:
        return format_value(self.attr_node())

    @classmethod
    def from_node(cls, node: AttrNode) -> CudaTarget:
        """The target an attribute describes; a shape list it leaves out is every shape
        of that kind the compute capability has (:meth:`for_sm`)."""
        keys = ("mma_shapes", "sparse_mma_shapes")
        (chip,), named = node.fields("cuda", 1, (), optional=keys)
        if not (isinstance(chip, Keyword) and re.fullmatch(r"sm_\d+", chip.name)):
            raise TargetError(f"expected a compute capability such as sm_90, got {chip}")
        every = cls.for_sm(int(chip.name[3:]))
        mma = named.get("mma_shapes", [Keyword(s) for s in every.mma_shapes])
        sparse = named.get("sparse_mma_shapes", [Keyword(s) for s in every.sparse_mma_shapes])
        if not all(isinstance(s, Keyword) for s in [*mma, *sparse]):
            raise TargetError("MMA shapes must be bare names: [m16n8k16]")
        shapes = (tuple(s.name for s in mma), tuple(s.name for s in sparse))
        return cls(every.sm, *shapes)
