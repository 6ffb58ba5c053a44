"""Target descriptions: what layout resolvers and lowerings know about a device.

:class:`CpuTarget` and :class:`CudaTarget` are the host-side twins of
``#sparse_iter.cpu`` and ``#sparse_iter.cuda`` (no MLIR import). A module
names its targets in the attribute ``sparse_iter.targets``
(``{name = #sparse_iter.cpu<...>, ...}``) and a function picks one with
``sparse_iter.target = "name"``.
"""

from __future__ import annotations

from sparsecomp.targets.cpu import CpuTarget, detect_host
from sparsecomp.targets.cuda import CudaTarget

Target = CpuTarget | CudaTarget


def target_from_attr(text: str) -> Target:
    """A target from ``#sparse_iter.cpu<...>`` or ``#sparse_iter.cuda<...>`` text."""
    from sparsecomp.errors import TargetError
    from sparsecomp.formats.attrtext import parse_attr

    node = parse_attr(text)
    if node.mnemonic == "cpu":
        return CpuTarget.from_node(node)
    if node.mnemonic == "cuda":
        return CudaTarget.from_node(node)
    raise TargetError(f"not a target attribute: {text}")


__all__ = ["CpuTarget", "CudaTarget", "Target", "detect_host", "target_from_attr"]
