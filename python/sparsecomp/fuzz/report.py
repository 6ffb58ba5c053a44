"""Outcome classes, the summary and reproducers of failing cases.

A class is ``(path, status, message)`` with the message normalized: the
first error line, without locations, types and attributes (``TYPE``),
numbers (``N``) and temporary paths, so one bug is one class.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

FAILING = ("crash", "wrong", "traceback", "timeout")
#: paths whose failures fail the run (upstream is a second opinion)
OURS = ("gen", "py", "cli", "emu")
_BALANCED = re.compile(
    r"(tensor|memref|vector|affine_map|#sparse_tensor\.encoding|#sparse_iter\.\w+)<"
)


def _strip_balanced(text: str) -> str:
    out, pos = [], 0
    while (m := _BALANCED.search(text, pos)) is not None:
        out.append(text[pos : m.start()] + "TYPE")
        depth, i = 1, m.end()
        while i < len(text) and depth:
            if text.startswith("->", i):  # affine_map arrows are not brackets
                i += 2
                continue
            depth += {"<": 1, ">": -1}.get(text[i], 0)
            i += 1
        pos = i
    return "".join(out) + text[pos:]


def _first_line(message: str) -> str:
    lines = [ln for ln in message.splitlines() if ln.strip()]
    for ln in lines:
        if "error:" in ln and "stage '" not in ln:
            return ln
    return lines[0] if lines else ""


def normalize(message: str) -> str:
    """The part of a message that names the problem, not this case."""
    text = _first_line(message)
    text = re.sub(r"(\S*\.mlir|<source>|<module>)(:\d+)*:?\s*", "", text)
    text = text.replace("error: ", "")
    text = _strip_balanced(text)
    text = re.sub(r"\(\([^()]*\) -> \([^()]*\)\)", "MAP", text)  # printed affine maps
    text = re.sub(r"(\w)\[[^\]]*\]", r"\1[..]", text)  # shapes: float32[s0, ?]
    text = re.sub(r"/\S+", "PATH", text)
    text = re.sub(r"0x[0-9a-fA-F]+|\b\d+(\.\d+)?(e[+-]?\d+)?\b", "N", text)
    text = re.sub(r"\s+", " ", text).strip()
    return text[:220]


def classes(results: list[dict[str, Any]]) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
    """``(path, status, normalized message)`` -> the results in that class (not ok/skipped)."""
    found: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        for path, out in r["results"].items():
            if out["status"] not in ("ok", "skipped"):
                found[(path, out["status"], normalize(out["message"]))].append(r)
    return found


def summary(results: list[dict[str, Any]], seed: int, seconds: float) -> tuple[str, int]:
    """The report text and the number of failing results on our paths."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for r in results:
        for path, out in r["results"].items():
            counts[path][out["status"]] += 1
    statuses = ["ok", "refused", *FAILING, "skipped"]
    lines = [f"{'path':10s}" + "".join(f"{s:>11s}" for s in statuses)]
    for path in sorted(counts, key=lambda p: (p not in OURS, p)):
        lines.append(f"{path:10s}" + "".join(f"{counts[path][s]:>11d}" for s in statuses))
    failing = sum(counts[p][s] for p in OURS for s in FAILING)
    found = classes(results)
    for title, wanted in (("failures", FAILING), ("refusals", ("refused",))):
        picked = [(k, v) for k, v in found.items() if k[1] in wanted]
        picked.sort(key=lambda kv: (kv[0][0] not in OURS, -len(kv[1])))
        lines += ["", f"== {len(picked)} classes of {title}"]
        for (path, status, norm), rs in picked:
            example = rs[0]["results"][path]["message"]
            ex = "\n      ".join(example.splitlines()[:3])[:600]
            lines += [f"[{path} {status}] x{len(rs)} (e.g. case {seed}:{rs[0]['index']}): {norm}",
                      f"      {ex}"]  # fmt: skip
    mean = seconds / max(1, len(results))
    lines += ["", f"{len(results)} cases in {seconds:.1f} s ({mean:.2f} s per case); "
              f"{failing} failing results on paths {', '.join(OURS)}"]  # fmt: skip
    return "\n".join(lines), failing


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")[:60] or "x"


def write_reproducers(results: list[dict[str, Any]], seed: int, out: Path, per_class: int) -> int:
    """Up to ``per_class`` reproducers of every failing class under ``out``; how many."""
    from sparsecomp.fuzz.case import make_case
    from sparsecomp.fuzz.mainwrap import main_program

    written = 0
    for (path, status, norm), rs in classes(results).items():
        if status not in FAILING:
            continue
        for r in rs[:per_class]:
            d = out / f"{status}-{path}-{_slug(norm)}" / f"case-{seed}-{r['index']}"
            d.mkdir(parents=True, exist_ok=True)
            message = r["results"][path]["message"]
            head = (f"// fuzz case --seed {seed} --replay {r['index']}: {r['describe']}\n"
                    f"// {path}: {status}: " + message.replace("\n", "\n// ") + "\n")  # fmt: skip
            (d / "README.txt").write_text(
                f"{head}\nreplay: scripts/fuzz --seed {seed} --replay {r['index']}\n"
                "kernel.mlir: the kernel (python path); main.mlir: main() for sparsecomp-opt |"
                " mlir-runner; inputs.npz: arguments and 'expected'\n"
            )
            try:
                case = make_case(seed, r["index"])
            except Exception:
                continue
            (d / "kernel.mlir").write_text(head + case.kernel)
            (d / "main.mlir").write_text(head + main_program(case.prog, case.arrays))
            arrays: dict[str, Any] = {"expected": case.expected, **case.arrays}
            np.savez(d / "inputs.npz", **arrays)
            written += 1
    return written
