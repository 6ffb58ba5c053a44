"""STen's Figure 2 on this machine: one BERT encoder layer, sparsified, on the CPU.

The model is one HuggingFace ``BertLayer`` (``transformers``, ``BertConfig()``:
hidden 768, FFN 3072, 12 heads; random weights from a fixed seed, nothing
downloaded), in ``eval`` mode (no dropout), batch 8, sequence 128, float32.
Its six linear layers (query, key, value, attention output, FFN in and out)
are sparsified at each sparsity level, two ways:

* ``random``: a random fraction sparsifier (``random_fraction:S``), an
  unstructured pattern;
* ``n:m``: magnitude n:m (``nm:N:M``) where the level is a ratio n/m with
  m <= 20 (50% 1:2, 60% 2:5, 70% 3:10, 80% 1:5, 90% 1:10, 95% 1:20);
* ``n:m:g``: grouped n:m (``nm:N:M:8``, STen's n:m:g idea): 8 consecutive
  output rows share their kept columns, stored as ``bsr:8x1`` blocks.

Each configuration runs, in the same process, as:

* ``dense``: torch with the masked dense weights (the reference);
* ``sparsecomp``: ``sparsecomp.torch.sparsify_`` in layout ``csr`` (random),
  ``nm:N:M`` (n:m) or ``bsr:8x1`` (n:m:g), and ``auto`` (the layout
  ``exe.prepare`` picks, timed) for the random pattern; then
  ``fuse_activations_``: the FFN's GELU is applied by its first layer's
  kernel as it stores its output (in the forward pass without autograd;
  with autograd torch applies it, as in the dense model);
* ``torch CSR`` / ``torch COO``: each weight a ``torch.sparse`` tensor, the
  layer computing ``(W @ X^T)^T`` with ``torch.sparse.mm``;
* ``STen``: ``sten.SparsityBuilder`` with ``CsrTensor`` (and ``CooTensor``) weights, where the
  ``sten`` package imports (it is installed with ``pip install --no-deps
  sten``: its declared dependencies include notebook and boto3); else the
  reason;
* torch's semi-structured 2:4 (``to_sparse_semi_structured``) at 50%, which
  torch builds for CUDA only: the reason it does not run is printed.

Every output is checked against the dense masked model (``rtol 1e-4`` in
float32: ``|got - ref| <= 1e-4 |ref| + 1e-4 max|ref|``) before it is timed;
a wrong result is printed and not timed. Times are the best of ``--reps``
rounds of ``--calls`` calls, the peers of a row taking turns in each round
(so that a slow spell of this shared machine falls on all of them; forward
under ``torch.no_grad``; forward plus
backward with gradients for the input and every parameter; the COO peers'
forward plus backward only from 90% up, where it takes seconds rather than
tens of seconds). Threads: torch's
default and OpenMP's (both use every core), with OMP_WAIT_POLICY=PASSIVE unless set.

    .venv/bin/python benchmarks/torch_bert.py                 # the table (minutes)
    .venv/bin/python benchmarks/torch_bert.py --quick         # a smoke run (seconds)
    .venv/bin/python benchmarks/torch_bert.py --markdown F --plot P
"""

from __future__ import annotations

import os

# Both OpenMP runtimes (torch's GNU one, the kernels' LLVM one) share the
# cores: torch's workers spin after each op unless told to sleep, and took the
# cores from the kernels that follow (docs/torch.md, "Threads"). Set before
# torch is imported; OMP_WAIT_POLICY=ACTIVE in the environment measures the
# default. Dense torch runs under the same policy.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import copy
import json
import math
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import torch
from torch import nn

import sparsecomp.torch as st

#: rows that share their kept columns in the grouped n:m pattern
GROUP = 8

LINEARS = (
    "attention.self.query",
    "attention.self.key",
    "attention.self.value",
    "attention.output.dense",
    "intermediate.dense",
    "output.dense",
)


def nm_for(sparsity: float, max_m: int = 20) -> tuple[int, int] | None:
    """``(n, m)`` with ``1 - n/m == sparsity`` and ``m <= max_m`` (smallest m), if any."""
    keep = Fraction(1 - sparsity).limit_denominator(1000)
    if keep.denominator > max_m or keep <= 0:
        return None
    return keep.numerator, keep.denominator


def bert_layer(seed: int, hidden: int, heads: int, ffn: int) -> nn.Module:
    from transformers import BertConfig
    from transformers.models.bert.modeling_bert import BertLayer

    torch.manual_seed(seed)
    config = BertConfig(hidden_size=hidden, num_attention_heads=heads, intermediate_size=ffn)
    config._attn_implementation = "eager"
    return BertLayer(config).eval()


class TorchSparseLinear(nn.Module):
    """A linear layer whose weight is a ``torch.sparse`` tensor (CSR or COO)."""

    def __init__(self, dense: nn.Linear, mask: torch.Tensor, layout: str) -> None:
        super().__init__()
        w = (dense.weight.detach() * mask).to_sparse_coo().coalesce()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            w = w.to_sparse_csr() if layout == "csr" else w
        self.weight = nn.Parameter(w)
        self.bias = nn.Parameter(dense.bias.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])
        y = torch.sparse.mm(self.weight, flat.t()).t() + self.bias
        return y.reshape(*x.shape[:-1], -1)


def masks(layer: nn.Module, sparsifier: str) -> dict[str, torch.Tensor]:
    return {n: st.mask_of(layer.get_submodule(n).weight, sparsifier) for n in LINEARS}


def masked_dense(layer: nn.Module, keep: dict[str, torch.Tensor]) -> nn.Module:
    out = copy.deepcopy(layer)
    with torch.no_grad():
        for name, mask in keep.items():
            out.get_submodule(name).weight.mul_(mask)
    return out


def ours(layer: nn.Module, keep: dict[str, torch.Tensor], layout: str, rows: int) -> nn.Module:
    out = copy.deepcopy(layer)
    for name, mask in keep.items():
        dense = out.get_submodule(name)
        sparse = st.SparseLinear.from_dense(dense.weight, dense.bias, layout, mask, batch=rows)
        parent, _, leaf = name.rpartition(".")
        setattr(out.get_submodule(parent), leaf, sparse)
    st.fuse_activations_(out)  # FFN-in's kernel applies GELU (forward without autograd)
    return out


def torch_sparse(layer: nn.Module, keep: dict[str, torch.Tensor], layout: str) -> nn.Module:
    out = copy.deepcopy(layer)
    for name, mask in keep.items():
        parent, _, leaf = name.rpartition(".")
        setattr(
            out.get_submodule(parent),
            leaf,
            TorchSparseLinear(out.get_submodule(name), mask, layout),
        )
    return out


def sten_model(layer: nn.Module, keep: dict[str, torch.Tensor], fmt: str) -> nn.Module:
    """STen's model: the masked weights in its CSR or COO format (``KeepAll``)."""
    import sten  # type: ignore[import-not-found]

    out = masked_dense(layer, keep)
    builder = sten.SparsityBuilder()
    for name in LINEARS:
        builder.set_weight(
            name=name + ".weight",
            initial_sparsifier=sten.KeepAll(),
            out_format=getattr(sten, f"{fmt}Tensor"),
        )
    return builder.get_sparse_model(out)


@dataclass
class Cell:
    seconds: float | None = None
    note: str = ""


@dataclass
class Row:
    sparsifier: str
    sparsity: float
    cells: dict[str, dict[str, Cell]] = field(default_factory=dict)


def first(out: Any) -> torch.Tensor:
    """The hidden states a ``BertLayer`` returns (a tuple in older transformers)."""
    return out[0] if isinstance(out, tuple) else out


def check(got: torch.Tensor, ref: torch.Tensor) -> str:
    bound = 1e-4 * ref.abs() + 1e-4 * ref.abs().max()
    bad = (got - ref).abs() > bound
    return "" if not bool(bad.any()) else f"WRONG: {int(bad.sum())} outputs off"


def interleaved(fns: dict[str, Callable[[], Any]], reps: int, calls: int) -> dict[str, float]:
    """The best of ``reps`` rounds of ``calls`` calls of each function, in seconds
    per call. Each round times every function in turn, so that a slow spell of
    this shared machine falls on all of them, not on one peer's rounds."""
    for fn in fns.values():
        fn()  # warm up: first-call compiles and allocations
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            times[name].append((time.perf_counter() - t0) / calls)
    return {name: min(ts) for name, ts in times.items()}


@dataclass
class Timed:
    """A peer that ran right: what to time (a failure is a note in ``cells``)."""

    cells: dict[str, Cell]
    fwd: Callable[[], Any] | None = None
    fwd_bwd: Callable[[], Any] | None = None


def prepare(model: nn.Module, x: torch.Tensor, ref: torch.Tensor, backward: bool) -> Timed:
    """Check ``model`` against ``ref``; its forward (and backward) to time if right.

    Checked on its first two calls: sparsecomp's layers learn on the first
    which of them read the same input, and run those as one kernel from the
    second on (``sparsecomp.torch.shared``).
    """
    try:
        with torch.no_grad(), warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            wrong = check(first(model(x)), ref) or check(first(model(x)), ref)
        if wrong:
            return Timed({"fwd": Cell(None, wrong), "fwd+bwd": Cell(None, wrong)})
        if any("Fallback to dense" in str(w.message) for w in seen):
            # STen has no sparse kernel for this op and format: it densifies the weight
            note = "falls back to dense (no sparse kernel)"
            return Timed({"fwd": Cell(None, note), "fwd+bwd": Cell(None, note)})
    except Exception as e:  # a peer that cannot run says why
        return Timed({"fwd": Cell(None, _reason(e)), "fwd+bwd": Cell(None, _reason(e))})

    def fwd() -> None:
        with torch.no_grad():
            model(x)

    timed = Timed({}, fwd)
    if backward:
        xg = x.clone().requires_grad_()

        def fwd_bwd() -> None:
            first(model(xg)).sum().backward()

        try:
            fwd_bwd()
            timed.fwd_bwd = fwd_bwd
        except Exception as e:
            timed.cells["fwd+bwd"] = Cell(None, _reason(e))
    return timed


def measure(timed: dict[str, Timed], reps: int, calls: int) -> None:
    """Time every peer's forward, then every forward plus backward, interleaved."""
    for what, calls_of in (("fwd", calls), ("fwd+bwd", max(1, calls // 2))):
        key = "fwd" if what == "fwd" else "fwd_bwd"
        fns = {n: getattr(t, key) for n, t in timed.items() if getattr(t, key) is not None}
        try:
            for name, seconds in interleaved(fns, reps, calls_of).items():
                timed[name].cells[what] = Cell(seconds)
        except Exception:  # a peer failing mid-run: time each alone, with its reason
            for name, fn in fns.items():
                try:
                    timed[name].cells[what] = Cell(interleaved({name: fn}, reps, calls_of)[name])
                except Exception as e:
                    timed[name].cells[what] = Cell(None, _reason(e))


def _reason(e: Exception) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"


def run(args: argparse.Namespace) -> list[Row]:
    layer = bert_layer(args.seed, args.hidden, args.heads, args.ffn)
    x = torch.randn(args.batch, args.seq, args.hidden)
    rows_in = args.batch * args.seq
    out: list[Row] = []
    have_sten = _sten_status()
    for sparsity in args.sparsity:
        kinds = [("random", f"random_fraction:{sparsity}", ["csr", "auto"])]
        nm = nm_for(sparsity)
        if nm is not None:
            n, m = nm
            kinds.append((f"n:m {n}:{m}", f"nm:{n}:{m}", [f"nm:{n}:{m}", "auto"]))
            kinds.append((f"n:m:g {n}:{m}:{GROUP}", f"nm:{n}:{m}:{GROUP}", [f"bsr:{GROUP}x1"]))
        for kind, sparsifier, layouts in kinds:
            row = Row(f"{kind} ({layouts[0]})", sparsity)
            keep = masks(layer, sparsifier)
            dense = masked_dense(layer, keep)
            with torch.no_grad():
                ref = first(dense(x))
            peers: dict[str, Callable[[], nn.Module]] = {"dense": lambda: dense}
            for lay in layouts:
                name = "sparsecomp auto" if lay == "auto" else "sparsecomp"
                peers[name] = lambda lay=lay: ours(layer, keep, lay, rows_in)
            peers["torch CSR"] = lambda: torch_sparse(layer, keep, "csr")
            if not args.no_coo:
                peers["torch COO"] = lambda: torch_sparse(layer, keep, "coo")
            if have_sten is None:
                peers["STen CSR"] = lambda: sten_model(layer, keep, "Csr")
                if not args.no_coo:
                    peers["STen COO"] = lambda: sten_model(layer, keep, "Coo")
            timed: dict[str, Timed] = {}
            for name, make in peers.items():
                try:
                    model = make()
                except Exception as e:
                    row.cells[name] = {"fwd": Cell(None, _reason(e))}
                    continue
                backward = not (name.endswith("COO") and sparsity < 0.9 and not args.quick)
                timed[name] = prepare(model, x, ref, backward)
                row.cells[name] = timed[name].cells
                if name.endswith("auto") and hasattr(model.get_submodule(LINEARS[-1]), "layout"):
                    chosen = {model.get_submodule(n).layout for n in LINEARS}
                    note = "chose " + ", ".join(sorted(chosen))
                    row.cells[name].setdefault("fwd", Cell()).note = note
            measure(timed, args.reps, args.calls)
            for name in row.cells:
                _progress(row, name)
            out.append(row)
    return out


def _sten_status() -> str | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import sten  # type: ignore[import-not-found]  # noqa: F401
    except Exception as e:
        return _reason(e)
    return None


def _semi_structured_status() -> str:
    try:
        from torch.sparse import to_sparse_semi_structured

        w = torch.zeros(64, 64)
        w[:, ::2] = 1
        to_sparse_semi_structured(w)
        return "ran"
    except Exception as e:
        return _reason(e)


def _progress(row: Row, name: str) -> None:
    cells = row.cells[name]
    text = ", ".join(
        f"{k} {c.seconds * 1e3:.1f} ms" if c.seconds is not None else f"{k} {c.note}"
        for k, c in cells.items()
    )
    print(f"  {row.sparsifier} {row.sparsity:.0%} {name}: {text}", file=sys.stderr, flush=True)


def table(rows: list[Row], what: str) -> str:
    peers = list(dict.fromkeys(p for r in rows for p in r.cells if p != "dense"))
    head = ["sparsity", "pattern", "dense ms"] + [f"{p} ms (dense/peer)" for p in peers]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        d = r.cells["dense"].get(what)
        cells = [f"{r.sparsity:.0%}", r.sparsifier, _ms(d)]
        for p in peers:
            c = r.cells.get(p, {}).get(what)
            if c is None or c.seconds is None:
                cells.append("n/a" if c is None else c.note[:60])
            else:
                ratio = d.seconds / c.seconds if d and d.seconds else math.nan
                cells.append(f"{c.seconds * 1e3:.1f} ({ratio:.2f}x)")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _ms(c: Cell | None) -> str:
    return "n/a" if c is None or c.seconds is None else f"{c.seconds * 1e3:.1f}"


def plot(rows: list[Row], path: str, setting: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5), sharey=False)
    for ax, what in zip(axes, ("fwd", "fwd+bwd"), strict=True):
        series: dict[str, list[tuple[float, float]]] = {}
        for r in rows:
            d = r.cells["dense"].get(what)
            for p, cells in r.cells.items():
                c = cells.get(what)
                if p == "dense" or c is None or c.seconds is None or not d or not d.seconds:
                    continue
                label = f"{p} ({r.sparsifier.split()[0]})"
                series.setdefault(label, []).append((r.sparsity * 100, d.seconds / c.seconds))
        for label, pts in sorted(series.items()):
            xs, ys = zip(*sorted(pts), strict=True)
            ax.plot(xs, ys, marker="o", label=label)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_xlabel("sparsity (%)")
        ax.set_ylabel("speedup over dense torch")
        ax.set_title(f"BertLayer {what}, {setting}, CPU")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="center right")
    fig.tight_layout(rect=(0, 0, 0.8, 1))
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a small layer, two levels (smoke)")
    p.add_argument(
        "--sparsity", type=float, nargs="*", help="levels (0.5 ... 0.95; quick: 0.5 0.9)"
    )
    p.add_argument("--batch", type=int, help="8 (quick: 2)")
    p.add_argument("--seq", type=int, help="128 (quick: 16)")
    p.add_argument("--reps", type=int, help="rounds (3; quick: 1)")
    p.add_argument("--calls", type=int, help="calls per round (2; quick: 1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-coo", action="store_true", help="leave torch COO out (slow)")
    p.add_argument("--markdown", help="also write the tables to this file")
    p.add_argument("--json", help="also write the raw times to this file")
    p.add_argument("--plot", help="write the speedup plot (PNG) to this file")
    p.add_argument("--from-json", help="print the tables and plot of a saved --json run")
    args = p.parse_args(argv)
    args.hidden, args.heads, args.ffn = (64, 4, 128) if args.quick else (768, 12, 3072)
    defaults = {  # --quick changes the defaults only: an option given stays as given
        "batch": (8, 2), "seq": (128, 16), "reps": (3, 1), "calls": (2, 1),
        "sparsity": ([0.5, 0.6, 0.7, 0.8, 0.9, 0.95], [0.5, 0.9]),
    }  # fmt: skip
    for name, (full, quick) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    setting = (
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}; "
        f"batch {args.batch}, sequence {args.seq}, hidden {args.hidden}, FFN {args.ffn}"
    )
    title = f"batch {args.batch} x seq {args.seq}"
    if args.from_json:
        rows, saved = load(args.from_json)
        setting = saved.get("setting", "the run's setting was not saved with it")
        title = saved.get("title", "a saved run")
    else:
        rows = run(args)
    notes = [
        setting,
        f"STen: {_sten_status() or 'ran (sten ' + _sten_version() + ')'}",
        f"torch semi-structured 2:4 on the CPU: {_semi_structured_status()}",
    ]
    text = "\n\n".join(
        [
            f"### Forward\n\n{table(rows, 'fwd')}",
            f"### Forward + backward\n\n{table(rows, 'fwd+bwd')}",
            "\n".join(f"- {n}" for n in notes),
        ]
    )
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")
    if args.json:
        raw = [
            {
                "sparsifier": r.sparsifier,
                "sparsity": r.sparsity,
                "cells": {
                    p: {k: [c.seconds, c.note] for k, c in cs.items()} for p, cs in r.cells.items()
                },
            }
            for r in rows
        ]
        with open(args.json, "w") as f:
            json.dump({"setting": setting, "title": title, "rows": raw}, f, indent=1)
    if args.plot:
        plot(rows, args.plot, title)
    return 0


def load(path: str) -> tuple[list[Row], dict[str, Any]]:
    """The rows of a run saved with ``--json``, and its setting (``setting``, ``title``:
    none for a file of an older run, a bare list of rows)."""
    with open(path) as f:
        raw = json.load(f)
    saved = raw if isinstance(raw, dict) else {"rows": raw}
    rows = [
        Row(
            r["sparsifier"],
            r["sparsity"],
            {p: {k: Cell(*c) for k, c in cs.items()} for p, cs in r["cells"].items()},
        )
        for r in saved["rows"]
    ]
    return rows, {k: v for k, v in saved.items() if k != "rows"}


def _sten_version() -> str:
    from importlib.metadata import version

    return version("sten")


if __name__ == "__main__":
    sys.exit(main())
