"""Text for ``sparsecomp-opt --list-passes`` / ``--show-dialects`` and docs/passes.md.

Everything here is derived from the pass registry and the pass docstrings, so
the listings and the generated documentation never drift from the code.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import typing

from sparsecomp.ir import odsgen
from sparsecomp.transforms import get_all_passes
from sparsecomp.transforms.base import SparsecompPass, kebab
from sparsecomp.transforms.pipeline import named_pipelines


def _type_name(annotation: typing.Any) -> str:
    if typing.get_origin(annotation) is typing.Literal:
        return "|".join(map(str, typing.get_args(annotation)))
    return getattr(annotation, "__name__", str(annotation))


def option_lines(cls: type[SparsecompPass]) -> list[str]:
    hints = typing.get_type_hints(cls)
    lines = []
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else "required"
        lines.append(f"{kebab(f.name)}: {_type_name(hints[f.name])} = {default}")
    return lines


def pipeline_summary(path) -> str:
    """The first sentence (or two, if the first is short) of a named pipeline file's
    leading comment, without the name prefix (``# name: ...``)."""
    words: list[str] = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        words += line.lstrip("# ").split()
    text = " ".join(words).split(": ", 1)[-1]
    summary = ""
    for sentence in re.split(r"(?<=\.)\s+", text):  # "stage III." alone says too little
        summary = f"{summary} {sentence}".strip()
        if len(summary) >= 30:
            break
    return summary


def list_passes() -> str:
    lines = ["Passes:"]
    for name, load in get_all_passes().items():
        cls = load()
        lines.append(f"  {name}: {cls.summary()}")
        lines += [f"      --{opt}" for opt in option_lines(cls)]
    lines.append("Pipelines:")
    lines += [f"  {name}: {pipeline_summary(p)}" for name, p in named_pipelines().items()]
    lines.append(
        "Upstream MLIR passes are available by name as well "
        "(sparsecomp-opt --list-upstream-passes)."
    )
    return "\n".join(lines)


def list_upstream_passes() -> str:
    """MLIR's own passes and pipelines, as the pinned ``mlir-opt --help`` lists them."""
    help_text = subprocess.run(
        [odsgen.tool("mlir-opt"), "--help"], capture_output=True, text=True, check=False
    ).stdout
    lines: list[str] = []
    section = False
    for line in help_text.splitlines():
        if line.strip() in ("Passes:", "Pass Pipelines:"):
            section = True
            lines.append("Upstream " + line.strip().lower())
        elif section and line.startswith("  --"):
            section = False  # the next top-level option ends the section
        elif section and line.startswith("      --"):
            name, _, summary = line.strip()[2:].partition(" - ")
            lines.append(f"  {name.strip()}: {summary.strip()}")
    return "\n".join(lines)


def show_dialects() -> str:
    """Dialects a sparsecomp context can load, as mlir-opt prints them."""
    from sparsecomp.ir.context import make_context

    ctx = make_context()
    out = subprocess.run(
        [odsgen.tool("mlir-opt"), "--show-dialects"], capture_output=True, text=True, check=False
    ).stdout
    names = [n.strip() for n in out.partition(":")[2].split(",") if n.strip()]
    available = []
    for name in [*names, "sparse_iter"]:
        try:
            ctx.dialects[name]
            available.append(name)
        except (IndexError, KeyError, ValueError):
            continue
    return "Available Dialects: " + ", ".join(sorted(set(available)))


def passes_markdown() -> str:
    """docs/passes.md: every pass's docstring and options."""
    parts = [
        "# sparsecomp passes",
        "",
        "Generated from the pass docstrings by `python -m sparsecomp.tools.listing`;",
        "do not edit.",
        "",
    ]
    for name, load in get_all_passes().items():
        cls = load()
        parts += [f"## `{name}`", "", cls.description(), ""]
        if opts := option_lines(cls):
            parts += ["Options:", "", *[f"- `{o}`" for o in opts], ""]
    parts += ["# Named pipelines", ""]
    for name, path in named_pipelines().items():
        parts += [f"## `{name}`", "", "```", path.read_text().strip(), "```", ""]
    return "\n".join(parts)


if __name__ == "__main__":
    import argparse

    argparse.ArgumentParser(
        description="Print docs/passes.md, the passes and named pipelines, from the registry.",
    ).parse_args()
    print(passes_markdown(), end="")
