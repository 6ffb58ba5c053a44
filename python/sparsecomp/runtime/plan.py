"""What a compiled program does besides its kernels: the layout conversions it runs,
and the data that crosses to a GPU.

A conversion is a ``sparse_iter.set_encoding`` left after layout
specialization: a value that one use (an op, a call into another target's
function, a sparsifying ``main()``) needs in another layout than the one it
has. ``exe.plan()`` lists them; ``sparse-iter-report-conversions`` prints
the same text as remarks in ``sparsecomp-opt``. Imports no MLIR.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sparsecomp.errors import SparsecompError

#: How a dense (unencoded) tensor is named in a conversion.
DENSE = "dense"
#: The words of the remark a GPU build gives a function none of whose loops it
#: launches ("in 'f': no loop runs on the GPU: ..."): its work stays in host code.
HOST_ONLY = "no loop runs on the GPU"


@dataclass(frozen=True)
class Conversion:
    """One layout conversion: where, in which function, from what to what.

    ``source`` and ``destination`` are layout attribute texts or
    ``"dense"``; ``shape`` has ``None`` for dynamic sizes.
    """

    function: str
    location: str
    source: str
    destination: str
    dtype: str
    shape: tuple[int | None, ...]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Conversion:
        return cls(
            data["function"],
            data["location"],
            data["source"],
            data["destination"],
            data["dtype"],
            tuple(data["shape"]),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "function": self.function,
            "location": self.location,
            "source": self.source,
            "destination": self.destination,
            "dtype": self.dtype,
            "shape": list(self.shape),
        }

    def bytes(self, shape: Sequence[int] | None = None, nse: int | None = None) -> int:
        """Bytes of the tensor the conversion builds (its destination's buffers).

        ``shape`` fills the dynamic sizes (default: the static shape); ``nse``
        is the number of stored entries, for sparse destinations. Raises
        :class:`~sparsecomp.errors.FormatError` where the size needs more
        (counts of several levels: see :func:`sparsecomp.formats.storage_bytes`).
        """
        from sparsecomp.formats import storage_bytes

        dims = tuple(shape) if shape is not None else self.shape
        if any(d is None for d in dims):
            raise SparsecompError(
                f"the conversion at {self.location} has a dynamic shape: pass shape="
            )
        concrete = tuple(int(d) for d in dims)  # type: ignore[arg-type]
        dtype = "float16" if self.dtype in ("bf16", "bfloat16") else self.dtype  # same size
        if self.destination == DENSE:
            return int(np.prod(concrete, dtype=np.int64)) * np.dtype(dtype).itemsize
        return storage_bytes(self.destination, concrete, dtype, nse=nse)

    def bytes_text(self) -> str:
        """The bytes it moves as the report prints them: a number, ``a + b*nse``, or why not."""
        if any(d is None for d in self.shape):
            return "bytes depend on the shape (dynamic)"
        if self.destination == DENSE:
            return f"{self.bytes()} bytes"
        try:
            fixed, one = self.bytes(nse=0), self.bytes(nse=1)
            if self.bytes(nse=2) - one != one - fixed:
                return "bytes depend on the data"
        except SparsecompError:
            return "bytes depend on the data"
        return f"{fixed} + {one - fixed}*nse bytes"

    def describe(self) -> str:
        """What it converts and the bytes it builds (the report line without the location)."""
        shape = "x".join("?" if d is None else str(d) for d in self.shape) or "scalar"
        return (
            f"in '{self.function}': converts a {shape} {self.dtype} tensor from "
            f"{self.source} to {self.destination}; {self.bytes_text()}"
        )

    def __str__(self) -> str:
        return f"{self.location}: {self.describe()}"


@dataclass(frozen=True)
class Transfer:
    """The data that crosses to a GPU at each call of one of its functions, in a
    program built for a CPU and a GPU (``device``: ``cuda:sm_90``; ``emulated``:
    built with ``target="cuda-emu"``, its launches run on this CPU)."""

    function: str
    device: str
    emulated: bool

    def __str__(self) -> str:
        if self.emulated:
            return (
                f"'{self.function}' runs on {self.device}, emulated on this CPU: its "
                "arguments and results stay in host memory"
            )
        return (
            f"'{self.function}' runs on {self.device}: host arguments are copied to the GPU "
            "at each call and results back (GPU arrays and DeviceTensors are passed as "
            "they are, and the results then stay on the GPU)"
        )


@dataclass(frozen=True)
class Plan:
    """The conversions of a compiled program, in program order, and the functions
    whose data crosses to a GPU; ``str`` is the report."""

    conversions: tuple[Conversion, ...]
    transfers: tuple[Transfer, ...] = ()
    #: functions cut into parts on different devices: (name, ((part, device), ...))
    cut: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()

    def __str__(self) -> str:
        lines = [f"{len(self.conversions)} layout conversion(s):"]
        lines += [f"  {c}" for c in self.conversions]
        if not self.conversions:
            lines = ["no layout conversions"]
        if self.transfers:
            lines.append(f"{len(self.transfers)} function(s) on a GPU:")
            lines += [f"  {t}" for t in self.transfers]
        for name, parts in self.cut:
            steps = ", then ".join(f"'{p}' on {d}" for p, d in parts)
            lines.append(f"'{name}' runs in {len(parts)} parts: {steps}; what a part "
                         "reads from an earlier one crosses at its call")  # fmt: skip
        return "\n".join(lines)
