"""``SparseLinear``: ``nn.Linear`` with a sparse weight run by compiled kernels.

The weight is a pattern (CSR ``indptr`` and ``indices`` buffers) and a
``values`` parameter holding one number per kept entry, in CSR order (see
:mod:`.structure`). In a layout whose blocks span rows (BSR ``R x C`` with
``R >= 2``, grouped n:m as ``bsr:Gx1``) or stored row by row (CSR, ELL,
n:m) the forward pass computes ``Y = X W^T`` with
``sparsecomp::sparse_linear``, reading ``X`` and writing ``Y`` row-major as
torch holds them (the kernel transposes in registers, see :mod:`.kernels`).
In other layouts it computes ``Y^T = W X^T`` with ``sparsecomp::sparse_mm``
on the input transposed (shared between layers reading one input,
:mod:`.transpose`) and returns ``Y`` contiguous, as ``nn.Linear`` does (a
transposed view of the product saved a copy, but failed the ``.view()`` calls
that merge the features with the dimension before them). The backward pass
gives ``values`` a gradient only at kept entries, so any optimizer keeps the
pattern (see :mod:`.optim` for the policies); a ``state_dict`` of another
pattern drops an optimizer's state of the old one (:mod:`.stale_state`).

A layer may end with an activation (``activation = "gelu"`` or ``"relu"``,
set by :func:`sparsecomp.torch.fuse_activations_`). Where no gradient is
recorded (inference, ``torch.no_grad``) and the layout runs the row-major
kernels, the kernel applies it as it stores ``Y`` (one pass over ``Y``, not
two); where autograd records the call, torch applies it after the layer, so
that its input is kept for the backward pass.

``state_dict`` holds ``values``, ``indptr``, ``indices``, ``bias`` and an
extra state naming the layout; loading one into a ``SparseLinear`` of any
pattern adopts the saved pattern and layout.
"""

from __future__ import annotations

import itertools
import json
import logging
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from sparsecomp.errors import SparsecompError
from sparsecomp.formats.names import parse_layout
from sparsecomp.torch import kernels, ops, shared, stale_state, structure, tracing
from sparsecomp.torch.tracing import refuse_func_grad
from sparsecomp.torch.transpose import transposed_input

LOG = logging.getLogger("sparsecomp")

#: a key for each ``SparseLinear``, which a traced forward passes to
#: :func:`_choose_while_tracing` (an object cannot be a constant result's argument)
_KEYS = itertools.count()
#: the layers with layout ``"auto"`` not yet chosen, by key
_UNCHOSEN: weakref.WeakValueDictionary[int, SparseLinear] = weakref.WeakValueDictionary()


def _kept_state() -> Any:
    """A context for state a layer keeps across calls: outside ``torch.inference_mode``
    (a tensor made there is an inference tensor, which a later call recording
    gradients cannot save: "Inference tensors cannot be saved for backward")."""
    import contextlib

    if torch.is_inference_mode_enabled() and not torch.compiler.is_compiling():
        return torch.inference_mode(False)
    return contextlib.nullcontext()


def _torch(array: np.ndarray) -> Tensor:
    """``array`` as a tensor sharing its memory; an empty one made by torch: a program
    ``torch.export`` captured with two empty ``from_numpy`` tensors failed in
    ``torch.export.save`` ("numel: integer multiplication overflow")."""
    tensor = torch.from_numpy(array)
    return tensor if tensor.numel() else torch.empty(0, dtype=tensor.dtype)


def _bucket(rows: Any) -> int:
    """``rows`` rounded up to a power of two (at most 65536) by comparisons: under
    dynamic shapes ``rows`` is symbolic, and Dynamo turns each comparison into a
    guard and a plain bool, so the result is a constant it can pass on."""
    k = 1
    while k < 65536 and rows > k:
        k *= 2
    return k


@torch.compiler.assume_constant_result
def _choose_while_tracing(key: int, batch: int) -> str:
    """Choose layer ``key``'s layout while ``torch.compile`` traces its first call.

    Dynamo runs this function as it traces (not in the graph) and keeps its
    result, the layout's name, as a constant. The choice is the one the
    eager first call makes (timed on this machine, for ``batch``: the first
    call's rows rounded up to a power of two, see :func:`_bucket`); the traced
    forward then reads what it placed from the layer's ``_traced_choice``, a
    list Dynamo has not read before, so it sees the new tensors (the layer's
    own ``_placed`` it has already read as ``None``). The next call finds
    ``_placed`` set and compiles again, once, the way a chosen layer does.
    """
    layer = _UNCHOSEN.pop(key, None)
    if layer is None:  # a trace Dynamo restarted: the choice is made
        return ""
    layer._choose(batch)
    layer._traced_choice[:] = [(layer._placed, layer._row_major)]
    return layer.layout


class SparseLinear(nn.Module):
    """``y = x W^T + b`` with ``W`` sparse (``out_features x in_features``).

    Build one with :meth:`from_dense` (keep a dense weight's nonzeros, or
    those a mask selects) or let :func:`sparsecomp.torch.sparsify_` replace
    a model's ``nn.Linear`` modules. ``layout`` is the storage the kernels
    read: a short name (``"csr"``, ``"bsr:4x4"``, ``"nm:2:4"``, ``"hyb"``...)
    or ``"auto"``, which picks the layout on the first call, for this weight
    and the batch seen then (``Executable.prepare``'s choice, timed on this
    machine), or at construction given ``batch=``. Under ``torch.compile`` the
    first call's trace makes the choice (no graph break); the next call
    compiles once more, for the chosen layout.
    """

    indptr: Tensor
    indices: Tensor
    values: nn.Parameter
    bias: nn.Parameter | None
    #: the sparsifier that chose the pattern (``sparsify_``), as text
    sparsifier: str = ""
    #: how ``"auto"`` chose the layout (``Choice``), once it has
    chosen: Any = None
    #: an activation applied to the output (``""``: none; ``"gelu"``, ``"relu"``),
    #: set by :func:`sparsecomp.torch.fuse_activations_`
    activation: str = ""
    #: the class of the dense module it replaced where that is not ``nn.Linear``
    #: (HuggingFace's ``Conv1D``), for :func:`sparsecomp.torch.densify_`
    dense_class: type[nn.Module] | None = None

    def __init__(
        self,
        in_features: int,
        out_features: int,
        indptr: Any,
        indices: Any,
        values: Any,
        bias: Tensor | None = None,
        layout: str = "csr",
        *,
        batch: int | None = None,
    ) -> None:
        super().__init__()
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.values = nn.Parameter(torch.as_tensor(values).detach().clone().contiguous())
        stale_state.track(self.values)
        if self.values.dim() != 1:
            raise SparsecompError(f"values must be 1-D, got shape {tuple(self.values.shape)}")
        self.register_buffer("indptr", torch.as_tensor(indptr, dtype=torch.int32).clone())
        self.register_buffer("indices", torch.as_tensor(indices, dtype=torch.int32).clone())
        self.bias = None if bias is None else nn.Parameter(bias.detach().clone())
        self.layout = layout
        self._placed: tuple[Any, ...] | None = None
        #: the pattern buffers ``_placed`` was made from, and their versions
        self._source: tuple[Any, ...] = ()
        #: a placement of buffers the layer was called with instead (``functional_call``)
        self._borrowed: tuple[tuple[Any, ...], tuple[Any, ...], bool] | None = None
        self._row_major = False
        self._key = next(_KEYS)
        #: what the choice made while tracing placed (see :func:`_choose_while_tracing`)
        self._traced_choice: list[tuple[Any, bool]] = []
        self._adopt(layout, batch)

    # -- construction -------------------------------------------------------------
    @classmethod
    def from_dense(
        cls,
        weight: Tensor,
        bias: Tensor | None = None,
        layout: str = "csr",
        mask: Tensor | None = None,
        *,
        batch: int | None = None,
    ) -> SparseLinear:
        """Keep ``weight``'s entries where ``mask`` is true (default: its nonzeros)."""
        if weight.dim() != 2:
            raise SparsecompError(f"a linear weight is a matrix, got shape {tuple(weight.shape)}")
        if not weight.is_floating_point():
            raise SparsecompError(
                f"a sparse weight holds floating-point values, got {weight.dtype}",
                hint="weight.float()",
            )
        w = weight.detach().cpu()
        keep = (w != 0) if mask is None else mask.detach().cpu().bool()
        if keep.shape != w.shape:
            raise SparsecompError(f"mask shape {tuple(keep.shape)} != weight {tuple(w.shape)}")
        rows, cols = np.nonzero(keep.numpy())
        indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=w.shape[0]))])
        values = w[torch.from_numpy(rows), torch.from_numpy(cols)]
        module = cls(w.shape[1], w.shape[0], indptr, cols, values, bias, layout, batch=batch)
        return module.to(weight.device)

    # -- layout -------------------------------------------------------------------
    def _adopt(self, layout: str, batch: int | None = None) -> None:
        """Pack the pattern for ``layout`` (``"auto"`` waits for a batch size)."""
        with _kept_state():
            self._adopted(layout, batch)

    def _adopted(self, layout: str, batch: int | None) -> None:
        self._check_pattern()
        self._traced_choice = []  # (a new list: one Dynamo has read keeps its old items)
        if layout == "auto":
            self.layout = "auto"
            self._placed = None
            _UNCHOSEN[self._key] = self
            if batch is not None:
                self._choose(batch)
            return
        _UNCHOSEN.pop(self._key, None)
        shape = (self.out_features, self.in_features)
        indptr, indices = self.indptr.cpu().numpy(), self.indices.cpu().numpy()
        fwd = structure.place(indptr, indices, shape, layout)
        bwd = structure.place(
            indptr, indices, shape, structure.transposed_layout(layout), transpose=True
        )
        csr = fwd if fwd.layout == ops.CSR else structure.place(indptr, indices, shape, "csr")
        self.layout = str(parse_layout(layout))
        self._row_major = kernels.row_major(fwd.layout)
        pattern = (_torch(csr.index[0].copy()), self.indptr, self.indices)
        structure.remember(csr.layout, shape, pattern, csr.tensor)
        torch_of = lambda p: tuple(_torch(a.copy()) for a in p.index)  # noqa: E731
        fwd_index, bwd_index = torch_of(fwd), torch_of(bwd)
        structure.remember(fwd.layout, fwd.shape, fwd_index, fwd.tensor)
        structure.remember(bwd.layout, bwd.shape, bwd_index, bwd.tensor)
        self._placed = (
            list(pattern),
            _torch(fwd.perm),
            list(fwd_index),
            _torch(bwd.perm),
            list(bwd_index),
            fwd.layout,
            bwd.layout,
        )
        self._source = _buffers_seen(self.indptr, self.indices)

    def _choose(self, batch: int) -> None:
        from sparsecomp.torch.kernels import program

        matrix = self.to_scipy()
        where = self.values.device
        if where.type == "cuda":  # the GPU's model (no timing)
            from sparsecomp.torch.device import target

            exe = program("spmm", self.values.dtype, target=target(where))
        else:
            exe = program("spmm", self.values.dtype)
        choice = exe.prepare(matrix, k=max(1, int(batch))).choice
        LOG.info(
            "sparsecomp.torch: %s weight %s: %s",
            self.__class__.__name__,
            tuple(matrix.shape),
            choice,
        )
        self._adopt(choice.layout)
        self.chosen = choice

    def _check_pattern(self) -> None:
        n = self.indptr.shape[0]
        if n != self.out_features + 1:
            raise SparsecompError(
                f"indptr has {n} entries; a {self.out_features}-row weight "
                f"needs {self.out_features + 1}"
            )
        if self.indices.shape != self.values.shape:
            raise SparsecompError(
                f"{self.indices.shape[0]} indices but {self.values.shape[0]} values"
            )

    def __setstate__(self, state: dict[str, Any]) -> None:
        """A copy (``copy.deepcopy``, pickle, ``torch.load`` of a whole model) is a layer
        of its own: a new key, and a layout ``"auto"`` not yet chosen is chosen for the
        copy at its first call, as for a new layer (the original's key would have
        chosen for the original, or found its choice taken)."""
        super().__setstate__(state)
        self._key = next(_KEYS)
        self._traced_choice = []
        if self._placed is None and self.layout == "auto":
            _UNCHOSEN[self._key] = self

    # -- use ----------------------------------------------------------------------
    __prepare_scriptable__ = tracing.refuse_script

    def forward(self, x: Tensor) -> Tensor:
        tracing.refuse_jit()
        if x.dim() == 0:
            raise SparsecompError(
                f"SparseLinear({self.in_features} -> {self.out_features}) needs an input "
                "of at least one dimension, got a 0-dim tensor"
            )
        if (
            x.dtype != self.values.dtype
            and x.is_floating_point()
            and torch.is_autocast_enabled(x.device.type)
        ):  # autocast: an op with no low-precision kernel runs in its own dtype, as torch's do
            x = x.to(self.values.dtype)
        if x.shape[-1] != self.in_features:
            raise SparsecompError(
                f"SparseLinear({self.in_features} -> {self.out_features}) got an input "
                f"with {x.shape[-1]} features (shape {tuple(x.shape)})"
            )
        lead = x.shape[:-1]
        if self.in_features == 0:  # a product over nothing: the bias alone, as nn.Linear's
            y = x.new_zeros((*lead, self.out_features), dtype=self.values.dtype)
            return y if self.bias is None else y + self.bias
        refuse_func_grad(x, self.values, self.bias)
        traced = tracing.traced(x, self.values, self.bias)
        placed, row_major = self._placed, self._row_major
        borrowed = False
        if not torch.compiler.is_compiling() and placed is not None:  # (this order: a
            # frame Dynamo traces again must take the same branches, see below)
            placed, row_major, borrowed = self._placement_for_buffers()
        if torch.compiler.is_compiling():
            # layout "auto" chosen while tracing its first call; a frame Dynamo traces
            # again (after a graph break) must make the same calls in the same order
            # (else SpeculationLogDivergence): the trace that chose, and every one after
            # it, reads the choice from _traced_choice
            exporting = torch.compiler.is_exporting()
            if placed is None or self._traced_choice:
                if exporting and placed is None:
                    raise SparsecompError(
                        f"torch.export of SparseLinear({self.in_features} -> "
                        f"{self.out_features}) with layout 'auto': the layout is chosen at "
                        "the first call, by timing kernels, which an export cannot run",
                        hint="call the model once before exporting, or sparsify_(..., batch=N)",
                    )
                rows = x.numel() // max(self.in_features, 1)
                _choose_while_tracing(self._key, _bucket(rows))
                placed, row_major = self._traced_choice[0]
        elif placed is None:  # layout "auto", on its first call
            self._choose(int(x.numel() // max(self.in_features, 1)))
            placed, row_major = self._placed, self._row_major
        assert placed is not None
        pattern, fwd_perm, fwd_index, bwd_perm, bwd_index, lay, lay_t = placed
        shape = [self.out_features, self.in_features]
        args = (pattern, fwd_perm, fwd_index, bwd_perm, bwd_index, lay, lay_t, shape, self.bias)
        act = self.activation
        if self.values.device.type == "cuda":
            return self._forward_cuda(x, fwd_perm, fwd_index, lay, row_major, traced)
        if row_major:  # X and Y row-major: no transposes
            flat = x.reshape(-1, self.in_features)
            if traced and not self._wants_grad(x):
                y = ops.linear(self.values, flat, fwd_perm, fwd_index, lay, shape, self.bias, act)
                return y.reshape(*lead, self.out_features)
            if not self._wants_grad(x) and not borrowed:  # the kernel applies the activation
                # as it stores Y; eager: the op's implementation itself (a dispatch costs
                # 0.1-0.2 ms), stacked with the layers that read the same input (.shared)
                return shared.run(self, x, flat).reshape(*lead, self.out_features)
            y = ops.sparse_linear(self.values, flat, *args)
            return _activate(y, act).reshape(*lead, self.out_features)
        yt = ops.sparse_mm(self.values, transposed_input(x, self), *args)
        # contiguous, as nn.Linear's output is: a transposed view failed the .view()s
        # that merge the features with the dimension before them (y.view(B, T * C))
        return _activate(yt.t(), act).contiguous().reshape(*lead, self.out_features)

    def _placement_for_buffers(self) -> tuple[tuple[Any, ...], bool, bool]:
        """``_placed`` (and ``_row_major``) for the pattern buffers this call holds, and
        whether they are borrowed (the layer's own changed in place are placed again and
        kept: ``indices.copy_(...)``; others the call was given, by ``functional_call``
        with another layer's state, are placed for the call only). Under ``vmap`` (a
        model ensemble) every member must hold this layer's pattern.

        The placement was made once and kept: ``functional_call`` with another layer's
        buffers, an ensemble of layers of other patterns and a write into the buffers
        ran this layer's pattern with their values, silently."""
        assert self._placed is not None
        indptr, indices = self.indptr, self.indices
        if _same(_buffers_seen(indptr, indices), self._source):
            return self._placed, self._row_major, False
        if tracing.is_batched(indptr) or tracing.is_batched(indices):
            own = self._source[:2]
            for mine, theirs in zip(own, (indptr, indices), strict=True):
                every = tracing.members(theirs)
                if every.shape[1:] != mine.shape or not bool((every == mine).all()):
                    raise SparsecompError(
                        f"SparseLinear({self.in_features} -> {self.out_features}) under vmap "
                        "with another sparsity pattern in some members (a model ensemble "
                        "of layers sparsified apart): a member runs the layer's kernels, "
                        "which hold one pattern",
                        hint="vmap over values and bias only (members sharing one pattern: "
                        "sparsify one model, then copy it), or run the members one by one",
                    )
            return self._placed, self._row_major, False
        if self._source and indptr is self._source[0] and indices is self._source[1]:
            self._adopt(self.layout)  # its own buffers, written in place
            assert self._placed is not None
            return self._placed, self._row_major, False
        seen = _buffers_seen(indptr, indices)
        if self._borrowed is None or not _same(self._borrowed[0], seen):
            owned = (self._placed, self._source, self._row_major, self._traced_choice)
            try:
                self._adopt(self.layout)
                assert self._placed is not None
                self._borrowed = (seen, self._placed, self._row_major)
            finally:
                self._placed, self._source, self._row_major, self._traced_choice = owned
        return self._borrowed[1], self._borrowed[2], True

    def _forward_cuda(
        self,
        x: Tensor,
        perm: Tensor,
        index: list[Tensor],
        layout: str,
        row_major: bool,
        traced: bool,
    ) -> Tensor:
        """The forward pass on a GPU (:mod:`.device`): inference only."""
        if self._wants_grad(x):
            raise SparsecompError(
                "SparseLinear on CUDA runs inference only: this call records autograd",
                hint="run it under torch.no_grad() or torch.inference_mode(); "
                "training runs on the CPU",
            )
        shape = [self.out_features, self.in_features]
        flat = x.reshape(-1, self.in_features)
        if row_major:
            run = ops.linear if traced else ops.run_linear
            y = run(self.values, flat, perm, index, layout, shape, self.bias, self.activation)
        else:
            mm = ops.layout_mm if traced else ops.run_layout_mm
            yt = mm(self.values, flat.t().contiguous(), perm, index, layout, shape, self.bias)
            y = _activate(yt.t(), self.activation).contiguous()  # as nn.Linear's
        return y.reshape(*x.shape[:-1], self.out_features)

    def _wants_grad(self, x: Tensor) -> bool:
        """Whether this call records a graph for autograd (the fused activation
        then runs in torch, which keeps its input for the backward pass)."""
        if not torch.is_grad_enabled():
            return False
        return (
            x.requires_grad
            or self.values.requires_grad
            or (self.bias is not None and self.bias.requires_grad)
        )

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "weight":  # torch's own answer was a KeyError ("already exists")
            raise SparsecompError(
                "a SparseLinear's weight is its pattern and values; it is not assigned",
                hint="SparseLinear.from_dense(w, bias, layout) makes a layer of another "
                "weight, layer.values holds the kept entries, and st.densify_(model) gives "
                "back nn.Linear layers",
            )
        super().__setattr__(name, value)

    # -- conversions --------------------------------------------------------------
    @property
    def weight(self) -> Tensor:
        """The weight as a dense tensor (a new one; gradients flow to ``values``).

        Some models read it at every forward pass (T5's FFN checks its dtype): the
        entries' flat positions are kept from one read to the next, until the
        pattern's buffers change (a 512 x 2048 weight at 50%: 1.7 ms a read before)."""
        dense = self.values.new_zeros(self.out_features * self.in_features)
        flat = self._flat_positions()
        return dense.index_put((flat,), self.values).reshape(self.out_features, self.in_features)

    def _flat_positions(self) -> Tensor:
        """Each stored entry's position in the row-major dense weight (kept, see
        :attr:`weight`; made afresh while tracing, where no state is kept)."""
        # torch.fx's symbolic trace (fuse_activations_ traces models: T5's FFN reads
        # .weight) hands proxies: a mark kept of them broke every later call
        compiling = torch.compiler.is_compiling() or any(
            isinstance(t, torch.fx.Proxy) for t in (self.values, self.indptr, self.indices)
        )
        mark: tuple[Any, ...] = ()
        if not compiling:
            mark = (self.indptr.data_ptr(), structure.version(self.indptr),
                    self.indices.data_ptr(), structure.version(self.indices),
                    self.values.device)  # fmt: skip
            kept = getattr(self, "_flat", None)
            if kept is not None and kept[0] == mark:
                return kept[1]
        rows, cols = structure.coordinates(self.indptr.cpu().numpy(), self.indices.cpu().numpy())
        with _kept_state():
            flat = torch.from_numpy(rows * self.in_features + cols).to(self.values.device)
        if not compiling:
            self._flat = (mark, flat)
        return flat

    def to_scipy(self) -> Any:
        """The weight as a ``scipy.sparse.csr_array`` (a copy)."""
        import scipy.sparse as sp  # type: ignore[import-untyped]

        return sp.csr_array(
            (
                self.values.detach().cpu().numpy().copy(),
                self.indices.cpu().numpy().copy(),
                self.indptr.cpu().numpy().copy(),
            ),
            shape=(self.out_features, self.in_features),
        )

    def to_dense_linear(self) -> nn.Linear:
        """An ``nn.Linear`` holding the same (masked) weight."""
        linear = nn.Linear(
            self.in_features,
            self.out_features,
            bias=self.bias is not None,
            device=self.values.device,
            dtype=self.values.dtype,
        )
        with torch.no_grad():
            linear.weight.copy_(self.weight)
            if self.bias is not None:
                linear.bias.copy_(self.bias)
        return linear

    @property
    def density(self) -> float:
        return self.values.shape[0] / max(1, self.out_features * self.in_features)

    def extra_repr(self) -> str:
        lay = self.layout
        act = f", activation={self.activation}" if self.activation else ""
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"density={self.density:.3f}, layout={lay}, bias={self.bias is not None}{act}"
        )

    # -- state_dict -----------------------------------------------------------------
    def get_extra_state(self) -> Tensor:
        """The layout and shape, as JSON in a ``uint8`` tensor: a state dict holding
        only tensors is what safetensors and HuggingFace's ``save_pretrained`` take
        (a dict here failed in their sharding code)."""
        text = json.dumps({"layout": self.layout, "shape": [self.out_features, self.in_features]})
        return torch.frombuffer(bytearray(text.encode()), dtype=torch.uint8)

    def set_extra_state(self, state: Any) -> None:
        if isinstance(state, Tensor):  # (a dict: state dicts saved before the tensor form)
            state = json.loads(bytes(state.cpu().numpy()).decode())
        self._loaded_layout = state.get("layout", "csr")

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any) -> None:
        with _kept_state():
            self._load_pattern(state_dict, prefix, *args)

    def _load_pattern(self, state_dict: dict[str, Any], prefix: str, *args: Any) -> None:
        # Adopt the saved pattern's sizes first, so that loading never fails on a
        # pattern with another number of entries.
        replaced = any(
            _differs(state_dict.get(prefix + name), getattr(self, name))
            for name in ("indptr", "indices")
        )
        if replaced:  # an optimizer's per-entry state is of the old pattern
            stale_state.pattern_replaced(self.values)
        for name in ("values", "indptr", "indices"):
            saved = state_dict.get(prefix + name)
            old = getattr(self, name)
            if saved is not None and saved.shape != old.shape:
                fresh = torch.empty_like(saved, dtype=old.dtype, device=old.device)
                if name == "values":
                    structure.set_entries(old, fresh)  # the same Parameter (optimizers)
                    # a gradient of the old pattern's size fits no entry of the new one
                    # (backward after zero_grad(set_to_none=False) failed on it)
                    old.grad = None
                else:
                    setattr(self, name, fresh)
        self._loaded_layout = self.layout
        super()._load_from_state_dict(state_dict, prefix, *args)
        self._adopt(self._loaded_layout)

    def _apply(self, fn: Any, recurse: bool = True) -> SparseLinear:
        moved = _same(_buffers_seen(self.indptr, self.indices), self._source)
        super()._apply(fn, recurse)
        if moved:  # the same pattern, copied (.to(device), .cuda()): no new placement
            self._source = _buffers_seen(self.indptr, self.indices)
        if self.values.device.type not in ("cpu", "cuda"):
            raise SparsecompError(
                f"SparseLinear runs on the CPU or a CUDA GPU; it was moved to {self.values.device}",
                hint="move it to 'cpu' or 'cuda'",
            )
        return self


#: the activations a layer can apply, as torch computes them (the backward pass)
TORCH_ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "gelu": nn.functional.gelu,
    "relu": nn.functional.relu,
}


def _buffers_seen(indptr: Tensor, indices: Tensor) -> tuple[Any, ...]:
    """The pattern buffers and their versions (an in-place write bumps them)."""
    return (indptr, indices, indptr._version, indices._version)


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Whether two :func:`_buffers_seen` are of the same tensors at the same versions
    (by identity: ``==`` of tensors compares their elements)."""
    return len(a) == len(b) == 4 and a[0] is b[0] and a[1] is b[1] and a[2:] == b[2:]


def _differs(saved: Tensor | None, current: Tensor) -> bool:
    """Whether a saved pattern buffer is another than the layer's."""
    if saved is None:
        return False
    return saved.shape != current.shape or not torch.equal(saved.to(current.device), current)


def _activate(y: Tensor, activation: str) -> Tensor:
    """``activation(y)`` in torch (``""``: ``y``)."""
    if not activation:
        return y
    return TORCH_ACTIVATIONS[kernels.activation(activation)](y)


class SparseMatrix(nn.Module):
    """A fixed sparse matrix ``A`` as a module: ``module(B) = A @ B`` (a graph's adjacency...).

    Built from a scipy.sparse matrix or a ``torch.sparse`` tensor (float32 or
    float64); stored in ``layout`` like a :class:`SparseLinear` weight (it is
    one). ``A @ B`` is the layout's SpMM on ``B`` as it is (row-major, no copy
    of a contiguous ``B``); layouts that compute ``Y^T = W X^T`` (``hyb``,
    ``bsr:1xC``) take it as ``linear(B^T)^T``, which needs no copy either.
    Gradients flow to ``B``; to ``A``'s values too with ``trainable=True``.
    """

    def __init__(self, matrix: Any, layout: str = "csr", *, trainable: bool = False) -> None:
        super().__init__()
        import scipy.sparse as sp

        if isinstance(matrix, Tensor):
            from sparsecomp.torch.tensors import from_torch

            if matrix.layout == torch.strided:
                raise SparsecompError(
                    "SparseMatrix takes a scipy.sparse or torch.sparse matrix, got a dense tensor",
                    hint="pass matrix.to_sparse() (its nonzeros are kept)",
                )
            if matrix.dtype not in (torch.float32, torch.float64):  # to_scipy widens f16
                raise SparsecompError(
                    f"SparseMatrix holds float32 or float64 values, got {matrix.dtype}",
                    hint="convert it first, e.g. matrix.to(torch.float32)",
                )
            if matrix.requires_grad:
                warnings.warn(
                    "SparseMatrix copies the matrix's values: a gradient reaches its own "
                    "values (S.linear.values, with trainable=True), not the tensor they came "
                    "from; for a gradient to that tensor, torch.sparse.mm computes one",
                    stacklevel=2,
                )
            matrix = from_torch(matrix.detach(), "the matrix").to_scipy()
        if not sp.issparse(matrix) or len(matrix.shape) != 2:
            raise SparsecompError("SparseMatrix takes a scipy.sparse or torch.sparse matrix")
        if matrix.dtype not in (np.float32, np.float64):
            raise SparsecompError(
                f"SparseMatrix holds float32 or float64 values, got {matrix.dtype}",
                hint="convert it first, e.g. matrix.astype(numpy.float32)",
            )
        m = sp.csr_array(matrix)
        m.sum_duplicates()
        m.sort_indices()
        rows, cols = m.shape
        self.linear = SparseLinear(
            cols, rows, m.indptr, m.indices, torch.from_numpy(m.data), None, layout
        )
        self.linear.values.requires_grad_(trainable)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.linear.out_features, self.linear.in_features)

    __prepare_scriptable__ = tracing.refuse_script

    def forward(self, b: Tensor) -> Tensor:
        tracing.refuse_jit()
        if b.layout != torch.strided:
            raise SparsecompError(
                f"SparseMatrix {self.shape} @ B takes a dense B, got a {b.layout} tensor",
                hint="B.to_dense(), or a SparseMatrix of a product's other operand",
            )
        if b.dim() != 2 or b.shape[0] != self.linear.in_features:
            raise SparsecompError(
                f"SparseMatrix {self.shape} @ B needs a 2-D B with {self.linear.in_features} "
                f"rows, got shape {tuple(b.shape)}",
                hint="a vector as one column: B[:, None]" if b.dim() == 1 else None,
            )
        lin = self.linear
        if (
            b.dtype != lin.values.dtype
            and b.is_floating_point()
            and torch.is_autocast_enabled(b.device.type)
        ):  # autocast: in the weight's own dtype, as SparseLinear does
            b = b.to(lin.values.dtype)
        if lin._placed is None or not lin._row_major or lin.values.device.type == "cuda":
            # an "auto" layout's first call, Y^T = W X^T layouts, GPUs; the result is
            # contiguous, as the row-major path's is (an "auto" layout that chose a
            # row-major one in this call gave a transposed view)
            return lin(b.t()).t().contiguous()
        refuse_func_grad(b, lin.values)
        pattern, fwd_perm, fwd_index, bwd_perm, bwd_index, lay, lay_t = lin._placed
        shape = [lin.out_features, lin.in_features]
        return ops.sparse_mm(lin.values, b.contiguous(), pattern, fwd_perm, fwd_index,
                             bwd_perm, bwd_index, lay, lay_t, shape)  # fmt: skip
