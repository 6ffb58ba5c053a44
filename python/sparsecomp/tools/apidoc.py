"""Print docs/api.md, the Python API reference, from the docstrings.

    python -m sparsecomp.tools.apidoc > docs/api.md

The reference is generated, never kept by hand: :data:`API` names the
public objects, in reading order, and each entry prints its signature and
docstring (for a class, also its public methods and properties defined in
sparsecomp). reST markup becomes Markdown (``x`` and :func:`x` become
`` `x` ``, ``::`` blocks become fenced code); a test checks that
docs/api.md is what this prints.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
import sys
from typing import Any

#: (section title, introduction, [module:name, ...]) in reading order; a class
#: ending in ``()`` shows its constructor (the others are made by the API)
API: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "Compiling and loading",
        "`sparsecomp.compile` turns MLIR into an `Executable`; `sparsecomp.load` reads a "
        "saved one back without MLIR.",
        (
            "sparsecomp.compiler.driver:compile",
            "sparsecomp:load",
        ),
    ),
    (
        "Kernels in Python",
        "`sparsecomp.kernel` compiles a function written in index notation "
        "(`sparsecomp.script`); the guide is [script.md](script.md).",
        (
            "sparsecomp.script.kernel:kernel",
            "sparsecomp.script.kernel:Kernel",
            "sparsecomp.script.types:sparsity",
            "sparsecomp.script.kernel:assemble",
            "sparsecomp.script.printer:to_python",
            "sparsecomp.script.loops:loops",
            "sparsecomp.script.loops:op",
        ),
    ),
    (
        "Executables",
        "What `compile` and `load` return, and what calling a function takes.",
        (
            "sparsecomp.runtime.executable:Executable",
            "sparsecomp.runtime.executable:Function",
            "sparsecomp.runtime.prepared:Prepared",
            "sparsecomp.runtime.plan:Plan",
            "sparsecomp.runtime.plan:Transfer",
            "sparsecomp.runtime.profile:Profile",
            "sparsecomp.runtime.fastcall:available",
        ),
    ),
    (
        "Sparse data on the host",
        "Importable without MLIR (`sparsecomp.formats`).",
        (
            "sparsecomp.formats.tensor:SparseTensor",
            "sparsecomp.formats.names:parse_layout",
            "sparsecomp.formats.names:layout_from_attr",
            "sparsecomp.formats.layout:Layout",
            "sparsecomp.formats.composable:Composable",
            "sparsecomp.formats.sizes:storage_bytes",
        ),
    ),
    (
        "Choosing a layout",
        "",
        (
            "sparsecomp.formats.choice:choose",
            "sparsecomp.formats.choice:Choice",
        ),
    ),
    (
        "Sparsifiers",
        "",
        (
            "sparsecomp.sparsify:sparsify",
            "sparsecomp.formats.sparsifiers:Sparsifier",
        ),
    ),
    (
        "PyTorch",
        "`sparsecomp.torch` (the `torch` extra): sparse layers on compiled kernels, in STen's "
        "programming model; a walk through it is [torch.md](torch.md).",
        (
            "sparsecomp.torch.model:sparsify_",
            "sparsecomp.torch.model:Rule",
            "sparsecomp.torch.model:densify_",
            "sparsecomp.torch.model:mask_of",
            "sparsecomp.torch.nn:SparseLinear()",
            "sparsecomp.torch.nn:SparseMatrix()",
            "sparsecomp.torch.activation:SparseActivationLinear()",
            "sparsecomp.torch.activation:sparsify_activations_",
            "sparsecomp.torch.optim:resparsify_",
            "sparsecomp.torch.optim:ResparsifyEvery()",
            "sparsecomp.torch.tensors:call",
            "sparsecomp.torch.tensors:from_torch",
            "sparsecomp.torch.tensors:to_torch",
        ),
    ),
    (
        "Dask",
        "`sparsecomp.dask` (the `dask` extra): compiled kernels over the row partitions of a "
        "matrix on a Dask cluster; the guide is [dask.md](dask.md).",
        (
            "sparsecomp.dask.matrix:from_scipy",
            "sparsecomp.dask.matrix:from_files",
            "sparsecomp.dask.matrix:from_dask_array",
            "sparsecomp.dask.matrix:DistributedMatrix",
            "sparsecomp.dask.run:map",
            "sparsecomp.dask.partition:balanced",
        ),
    ),
    (
        "Targets",
        "",
        (
            "sparsecomp.targets.cpu:CpuTarget()",
            "sparsecomp.targets.cuda:CudaTarget",
            "sparsecomp.targets:detect_host",
            "sparsecomp.targets:target_from_attr",
        ),
    ),
    (
        "Errors and warnings",
        "Every error sparsecomp raises on purpose is a `SparsecompError`; "
        "[troubleshooting.md](troubleshooting.md) shows each with a real message.",
        (
            "sparsecomp.errors:SparsecompError",
            "sparsecomp.errors:ParseError",
            "sparsecomp.errors:PipelineError",
            "sparsecomp.errors:CompileError",
            "sparsecomp.errors:ArgumentError",
            "sparsecomp.errors:KernelError",
            "sparsecomp.script.parse:ScriptError",
            "sparsecomp.script.printing:Unprintable",
            "sparsecomp.errors:FormatError",
            "sparsecomp.formats.validate:IndexWidthError",
            "sparsecomp.errors:TargetError",
            "sparsecomp.errors:ToolchainError",
            "sparsecomp.runtime.executable:UnknownFunctionError",
            "sparsecomp.lowering.abi:NoAbiError",
            "sparsecomp.runtime.libs:RuntimeLibraryError",
            "sparsecomp.runtime.cuda:CudaUnavailableError",
            "sparsecomp.runtime.cuda:CudaError",
            "sparsecomp.errors:ConversionWarning",
        ),
    ),
    (
        "Environment",
        "Environment variables sparsecomp reads (`sparsecomp.knobs`).",
        (
            "sparsecomp.knobs:cache_dir",
            "sparsecomp.knobs:reproducer_dir",
            "sparsecomp.knobs:compile_in_process",
            "sparsecomp.knobs:compile_daemon",
            "sparsecomp.knobs:compile_daemon_idle",
            "sparsecomp.knobs:specialize",
            "sparsecomp.knobs:native_calls",
        ),
    ),
)

#: Error classes that never reach a caller: raised inside a pass and reported as
#: its located diagnostics (a :class:`~sparsecomp.errors.CompileError`).
INTERNAL = ("sparsecomp.lowering.plan:Unsupported", "sparsecomp.lowering.flatten:FlattenError")

_ROLE = re.compile(r":(?:func|class|meth|mod|attr|data|exc):`(~?)\.?([^`]+)`")
_LITERAL = re.compile(r"``([^`]+?)``", re.DOTALL)


def markdown(doc: str) -> str:
    """A docstring in Markdown: roles and double backquotes become code spans,
    ``::`` blocks fenced code."""
    lines = inspect.cleandoc(doc).splitlines()
    out: list[str] = []
    prose: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("::"):
            head = line.rstrip()[:-2].rstrip()
            prose.append(head + (":" if head else ""))
            out.append(_inline("\n".join(prose)))
            prose = []
            i += 1
            while i < len(lines) and not lines[i].strip():
                i += 1
            block = []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith("    ")):
                block.append(lines[i][4:])
                i += 1
            while block and not block[-1].strip():
                block.pop()
            out += ["", "```python", *block, "```", ""]
            continue
        prose.append(line)
        i += 1
    out.append(_inline("\n".join(prose)))
    return "\n".join(out).strip() + "\n"


def _inline(text: str) -> str:
    text = _LITERAL.sub(r"`\1`", text)
    return _ROLE.sub(lambda m: f"`{_role_name(m.group(1), m.group(2))}`", text)


def _role_name(tilde: str, name: str) -> str:
    """``~a.b.c`` names ``c``; ``a.b.c`` names itself."""
    return name.rsplit(".", 1)[-1] if tilde else name


class _Annotation:
    """An annotation kept as the string it was written as (printed without quotes)."""

    def __init__(self, text: Any) -> None:
        self.text = text if isinstance(text, str) else inspect.formatannotation(text)

    def __repr__(self) -> str:
        return self.text


def _resolve(path: str) -> tuple[str, Any]:
    module, name = path.split(":")
    return f"{module}.{name}", getattr(importlib.import_module(module), name)


def _signature(name: str, obj: Any) -> str:
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return name
    empty = inspect.Parameter.empty
    parameters = [
        p.replace(annotation=_Annotation(p.annotation)) if p.annotation is not empty else p
        for p in signature.parameters.values()
    ]
    returns = signature.return_annotation
    signature = signature.replace(
        parameters=parameters,
        return_annotation=_Annotation(returns) if returns is not empty else empty,
    )
    return f"{name}{signature}"


def _fields(cls: type) -> list[str]:
    """A dataclass's fields as ``name: type``, with the ``#:`` comment above each."""
    if not dataclasses.is_dataclass(cls):
        return []
    notes: dict[str, str] = {}
    comment: list[str] = []
    for line in inspect.getsource(cls).splitlines():
        stripped = line.strip()
        if stripped.startswith("#:"):
            comment.append(stripped[2:].strip())
        elif match := re.match(r"(\w+): ", stripped):
            notes[match.group(1)] = " ".join(comment)
            comment = []
        else:
            comment = []
    found = []
    for f in dataclasses.fields(cls):
        if f.name.startswith("_"):
            continue
        kind = f.type if isinstance(f.type, str) else inspect.formatannotation(f.type)
        note = notes.get(f.name, "")
        found.append(f"- `{f.name}: {kind}`" + (f": {_inline(note)}" if note else ""))
    return found


def _members(cls: type) -> list[tuple[str, Any]]:
    """Public methods and properties the class itself defines (``__call__`` included)."""
    found = []
    for name, value in vars(cls).items():
        if name.startswith("_") and name != "__call__":
            continue
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if (inspect.isfunction(value) or isinstance(value, property)) and value.__doc__:
            found.append((name, value))
    return found


def entry(path: str) -> list[str]:
    """The Markdown of one API object."""
    constructor = path.endswith("()")
    qualified, obj = _resolve(path.removesuffix("()"))
    short = qualified.rsplit(".", 1)[-1]
    kind = "class" if inspect.isclass(obj) else "function"
    out = [f"### `{qualified}`", ""]
    if kind == "class" and (issubclass(obj, BaseException) or not constructor):
        bases = ", ".join(b.__name__ for b in obj.__bases__ if b is not object)
        out += [f"`class {short}({bases})`" if bases else f"`class {short}`", ""]
    elif kind == "class":
        out += [f"`class {_signature(short, obj)}`", ""]
    else:
        out += [f"`{_signature(short, obj)}`", ""]
    out += [markdown(obj.__doc__ or "(undocumented)"), ""]
    if kind == "class" and not issubclass(obj, BaseException):
        if fields := _fields(obj):
            out += ["Fields:", "", *fields, ""]
        for name, member in _members(obj):
            if isinstance(member, property):
                out += [f"- **`{short}.{name}`** (property): " + _indented(member.__doc__)]
            else:
                title = _signature(name, member)
                for first in ("self", "cls"):
                    title = title.replace(f"({first}, ", "(").replace(f"({first})", "()")
                out += [f"- **`{short}.{title}`**: " + _indented(member.__doc__)]
        out.append("")
    return out


def _indented(doc: str | None) -> str:
    text = markdown(doc or "").rstrip("\n")
    return "\n  ".join(text.splitlines()).replace("\n  \n", "\n\n")


def page() -> str:
    """The whole of docs/api.md."""
    out = [
        "# Python API reference",
        "",
        "Generated from the docstrings by `python -m sparsecomp.tools.apidoc > docs/api.md`;",
        "a test fails when this page is stale. For a walk through the API, read",
        "[guide.md](guide.md).",
        "",
    ]
    for title, intro, paths in API:
        out += [f"## {title}", ""]
        if intro:
            out += [intro, ""]
        for path in paths:
            out += entry(path)
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        description="Print docs/api.md, the Python API reference, from the docstrings.",
    )
    parser.parse_args(argv)
    sys.stdout.write(page())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
