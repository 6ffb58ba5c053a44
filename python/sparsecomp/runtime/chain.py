"""A function of a program that runs on a CPU and a GPU: its parts called in turn.

:mod:`sparsecomp.compiler.segments` cuts a public function whose ops are
marked for two devices into one function per run of ops; the manifest's
``chains`` says, per cut function, which part runs when and where each
part's arguments come from (the function's arguments, results of earlier
parts). Calling it calls the parts in that order, each as its own
:class:`~sparsecomp.runtime.executable.Function` on its own device, which
converts what it is given to its layouts and, on a GPU, copies it there.
Imports no MLIR.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sparsecomp.errors import SparsecompError
from sparsecomp.formats.tensor import SparseTensor
from sparsecomp.runtime.plan import Conversion


class ChainFunction:
    """``exe.<name>(*args)`` for a function cut into parts; ``parts`` lists them with
    their devices (``"host"``, ``"cuda:sm_90"``)."""

    def __init__(
        self,
        name: str,
        entry: dict[str, Any],
        functions: Mapping[str, Any],
        devices: Mapping[str, str],
    ) -> None:
        self.name = name
        self._steps = entry["steps"]
        self._results = entry["results"]
        self._functions = functions
        self.parts = [(s["function"], devices.get(s["function"], "host")) for s in self._steps]
        self._arity = 1 + max(
            [a[1] for s in self._steps for a in s["args"] if a[0] == "arg"]
            + [r[1] for r in self._results if r[0] == "arg"],
            default=-1,
        )

    def __call__(self, *args: Any, out: Any = None) -> Any:
        if out is not None:
            raise SparsecompError(
                f"'{self.name}' runs in parts on two devices and takes no out=",
                hint="copy its result into your array, or call its last part with out=",
            )
        if len(args) < self._arity:
            raise SparsecompError(f"'{self.name}' takes {self._arity} arguments, got {len(args)}")
        made: list[tuple[Any, ...]] = []
        for step in self._steps:
            function = self._functions[step["function"]]
            given = [args[a[1]] if a[0] == "arg" else made[a[1]][a[2]] for a in step["args"]]
            for i, (a, spec) in enumerate(zip(step["args"], function.signature.args, strict=False)):
                value = given[i]
                # an earlier part's result in another layout: converted here, as plan() lists
                # it (the part's own conversion warned of an argument the caller never passed)
                if a[0] != "arg" and isinstance(value, SparseTensor) and spec.layout is not None:
                    given[i] = value.to(spec.layout)
            out = function(*given)
            count = len(function.signature.results)
            made.append(() if count == 0 else (out,) if count == 1 else tuple(out))
        results = [args[r[1]] if r[0] == "arg" else made[r[1]][r[2]] for r in self._results]
        if not results:
            return None
        return results[0] if len(results) == 1 else tuple(results)

    def conversions(self) -> list[Conversion]:
        """The layout conversions between parts: an earlier part's sparse result that a
        later one takes in another layout."""
        found = []
        for step in self._steps:
            consumer = self._functions[step["function"]].signature
            for i, a in enumerate(step["args"]):
                if a[0] == "arg" or i >= len(consumer.args):
                    continue
                producer = self._functions[self._steps[a[1]]["function"]].signature
                made, taken = producer.results[a[2]], consumer.args[i]
                if made.layout is None or taken.layout is None or made.layout == taken.layout:
                    continue
                found.append(
                    Conversion(
                        self.name,
                        f"between '{self._steps[a[1]]['function']}' and '{step['function']}'",
                        made.layout.attr_text(),
                        taken.layout.attr_text(),
                        str(taken.dtype),
                        tuple(d if isinstance(d, int) else None for d in taken.shape),
                    )
                )
        return found

    def describe(self) -> str:
        """``name: part (device) -> part (device)``."""
        return f"{self.name}: " + " -> ".join(f"{p} ({d})" for p, d in self.parts)

    def __repr__(self) -> str:
        return f"<sparsecomp function in parts {self.describe()}>"
