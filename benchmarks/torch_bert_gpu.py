"""The BERT layer of ``torch_bert.py`` on a CUDA GPU: ``SparseLinear`` on CUDA tensors
beside dense cuBLAS, torch.sparse CSR (cuSPARSE) and torch's semi-structured 2:4.

The GPU's machine has torch and ``cuda-bindings`` but no MLIR, and no
``transformers``. So the kernels are compiled here and carried there, and the
layer is HuggingFace's ``BertLayer`` written out in torch (:class:`BertLayer`:
``BertConfig()``'s sizes, hidden 768, 12 heads, FFN 3072; its eager attention,
as ``torch_bert.py`` sets it; eval mode, so no dropout), with the same module
names, so that ``sparsify_`` and ``fuse_activations_`` treat it as they treat
HuggingFace's::

    .venv/bin/python benchmarks/torch_bert_gpu.py --save .gpu/bert --sm 90   # here
    PYTHONPATH=python python3 benchmarks/torch_bert_gpu.py --load .gpu/bert \\
        --markdown bert_gpu.md                                               # there

``--save`` compiles, for ``cuda:sm_<sm>``, the kernels the layer's six linear
layers run in each layout of :data:`CONFIGS` (``linear_bias``, and
``linear_bias_gelu`` for the FFN's first layer, whose GELU the kernel
applies) and saves each executable. ``--load`` loads them in place of the
compile (``sparsecomp.torch.kernels`` finds them where a compile would put
them) and times, per configuration, batch 8 x sequence 128, the forward pass
under ``torch.inference_mode()``:

* ``dense`` (cuBLAS, float32; TF32 off, torch's default) with the same masked
  weights, the reference every output is checked against (``rtol 1e-4``);
* ``sparsecomp``: the layers as ``SparseLinear`` in the configuration's layout;
* ``torch CSR``: each weight a ``torch.sparse`` CSR tensor (cuSPARSE SpMM);
* at 50% (2:4): ``dense fp16`` and ``torch 2:4 fp16``
  (``to_sparse_semi_structured``, the sparse tensor cores, cuSPARSELt or
  CUTLASS), which take half precision only; ours runs float32.

Times are CUDA-event times, the median of ``--reps`` calls after warm-up.
"""

from __future__ import annotations

import argparse
import copy
import math
import statistics
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch_bert import LINEARS  # the six linear layers (transformers is imported lazily there)

import sparsecomp.torch as st
from sparsecomp.formats.names import parse_layout

#: (label, sparsifier, layout) per configuration
CONFIGS = [
    ("50% 2:4", "nm:2:4", "nm:2:4"),
    ("90% random", "random_fraction:0.9", "csr"),
    ("90% n:m:g 1:10:8", "nm:1:10:8", "bsr:8x1"),
]
#: the kernels a configuration's layers run (the FFN-in layer's GELU fused)
OPS = ("linear_bias", "linear_bias_gelu")


class _SelfAttention(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads, self.size = heads, hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        return x.view(b, s, self.heads, self.size).permute(0, 2, 1, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self._split(self.query(x)), self._split(self.key(x)), self._split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.size)
        context = torch.matmul(torch.softmax(scores, dim=-1), v)
        b, _, s, _ = context.shape
        return context.permute(0, 2, 1, 3).contiguous().view(b, s, -1)


class _Residual(nn.Module):
    """A dense layer, then LayerNorm over it plus the residual (BertSelfOutput, BertOutput)."""

    def __init__(self, inner: int, hidden: int) -> None:
        super().__init__()
        self.dense = nn.Linear(inner, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dense(x) + residual)


class _Attention(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.self = _SelfAttention(hidden, heads)
        self.output = _Residual(hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output(self.self(x), x)


class _Intermediate(nn.Module):
    def __init__(self, hidden: int, ffn: int) -> None:
        super().__init__()
        self.dense = nn.Linear(hidden, ffn)
        self.intermediate_act_fn = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.intermediate_act_fn(self.dense(x))


class BertLayer(nn.Module):
    """HuggingFace's ``BertLayer`` (eager attention, eval mode), written out in torch."""

    def __init__(self, hidden: int = 768, heads: int = 12, ffn: int = 3072) -> None:
        super().__init__()
        self.attention = _Attention(hidden, heads)
        self.intermediate = _Intermediate(hidden, ffn)
        self.output = _Residual(ffn, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        attended = self.attention(x)
        return self.output(self.intermediate(attended), attended)


class TorchCsrLinear(nn.Module):
    """A linear layer whose weight is a torch.sparse CSR tensor (cuSPARSE on CUDA)."""

    def __init__(self, dense: nn.Linear, mask: torch.Tensor) -> None:
        super().__init__()
        self.weight = (dense.weight.detach() * mask).to_sparse_csr()
        self.bias = dense.bias.detach().clone()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])
        y = torch.sparse.mm(self.weight, flat.t()).t() + self.bias
        return y.reshape(*x.shape[:-1], -1)


def _swap(model: nn.Module, make: Any) -> nn.Module:
    for name in LINEARS:
        parent, _, leaf = name.rpartition(".")
        setattr(model.get_submodule(parent), leaf, make(name, model.get_submodule(name)))
    return model


def attr(layout: str) -> str:
    return parse_layout(layout).attr_text()


def save(directory: Path, sm: int) -> None:
    """Compile every kernel of :data:`CONFIGS` for ``cuda:sm_<sm>`` into ``directory``."""
    from sparsecomp.torch import kernels

    target = f"cuda:sm_{sm}"
    for _, _, layout in CONFIGS:
        for op in OPS:
            exe = kernels.program(op, torch.float32, target=target)
            if attr(layout) != attr("csr"):
                exe = exe.recompile(op, {0: attr(layout)})
            out = directory / f"{op}-{layout.replace(':', '_')}"
            exe.save(out)
            print(f"saved {op} in {layout} for {target}: {out}")


def load(directory: Path) -> None:
    """Put the saved kernels where ``sparsecomp.torch.kernels`` looks first."""
    from sparsecomp.runtime import load as load_exe
    from sparsecomp.torch import device, kernels

    target = device.target(torch.device("cuda"))
    for _, _, layout in CONFIGS:
        for op in OPS:
            exe = load_exe(directory / f"{op}-{layout.replace(':', '_')}")
            fn = exe.functions[op]
            kernels.install(op, torch.float32, attr(layout), target, fn)


def timed(fn: Any, reps: int) -> float:
    """The median of ``reps`` CUDA-event times of ``fn()``, in ms."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def check(got: torch.Tensor, ref: torch.Tensor, rtol: float = 1e-4) -> str:
    bound = rtol * ref.abs() + rtol * ref.abs().max()
    bad = int(((got.float() - ref.float()).abs() > bound).sum())
    return "" if not bad else f"WRONG: {bad} outputs off"


def models(sparsifier: str, layout: str) -> tuple[nn.Module, nn.Module, nn.Module]:
    """The configuration's dense (masked), sparsecomp and torch CSR layers, on the GPU."""
    torch.manual_seed(0)
    dense = BertLayer().eval()
    with torch.no_grad():
        masks = {n: st.mask_of(dense.get_submodule(n).weight, sparsifier) for n in LINEARS}
        for n, m in masks.items():
            dense.get_submodule(n).weight.mul_(m)
    ours = _swap(copy.deepcopy(dense), lambda n, lin: st.SparseLinear.from_dense(
        lin.weight, lin.bias, layout, masks[n]))  # fmt: skip
    st.fuse_activations_(ours)
    dense, ours = dense.cuda(), ours.cuda()
    csr = _swap(copy.deepcopy(dense), lambda n, lin: TorchCsrLinear(lin, masks[n].cuda()))
    return dense, ours, csr


def run(args: argparse.Namespace) -> list[list[str]]:
    x = torch.randn(args.batch, args.seq, 768, device="cuda")
    rows = []
    for label, sparsifier, layout in CONFIGS:
        dense, ours, csr = models(sparsifier, layout)
        with torch.inference_mode():
            ref = dense(x)
            cells = {"dense": f"{timed(lambda: dense(x), args.reps):.3f}"}
            for name, model in (("sparsecomp", ours), ("torch CSR", csr)):
                why = check(model(x), ref)
                cells[name] = why or f"{timed(lambda m=model: m(x), args.reps):.3f}"
            if sparsifier == "nm:2:4":
                cells.update(semi_structured(dense, x, args.reps))
        rows.append([label, layout, *(cells.get(c, "n/a") for c in COLUMNS)])
        print(rows[-1], flush=True)
    return rows


COLUMNS = ["dense", "sparsecomp", "torch CSR", "dense fp16", "torch 2:4 fp16"]


def semi_structured(dense: nn.Module, x: torch.Tensor, reps: int) -> dict[str, str]:
    """Dense fp16 and torch's semi-structured 2:4 fp16 of the same (2:4-masked) layer."""
    half = copy.deepcopy(dense).half()
    xh = x.half()
    ref = half(xh)
    out = {"dense fp16": f"{timed(lambda: half(xh), reps):.3f}"}
    try:
        from torch.sparse import to_sparse_semi_structured

        with torch.inference_mode(False), torch.no_grad():
            for n in LINEARS:
                lin = half.get_submodule(n)
                lin.weight = nn.Parameter(to_sparse_semi_structured(lin.weight.detach()))
        why = check(half(xh), ref, rtol=1e-2)
        out["torch 2:4 fp16"] = why or f"{timed(lambda: half(xh), reps):.3f}"
    except Exception as exc:  # no sparse tensor cores, or no backend in this torch
        out["torch 2:4 fp16"] = f"{type(exc).__name__}: {str(exc)[:80]}"
    return out


def markdown(rows: list[list[str]], args: argparse.Namespace) -> str:
    head = ["config", "layout", *(f"{c} ms" for c in COLUMNS)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    gpu = torch.cuda.get_device_name()
    lines.append(f"\n{gpu}, torch {torch.__version__}, batch {args.batch} x sequence {args.seq}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--save", type=Path, help="compile the kernels into this directory")
    p.add_argument("--sm", type=int, default=90, help="compute capability for --save")
    p.add_argument("--load", type=Path, help="run with the kernels saved in this directory")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--markdown", type=Path, help="also write the table to this file")
    args = p.parse_args(argv)
    if args.save:
        save(args.save, args.sm)
        return 0
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to time (--save compiles without one)", file=sys.stderr)
        return 1
    if args.load:
        load(args.load)
    table = markdown(run(args), args)
    print(table)
    if args.markdown:
        args.markdown.write_text(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
