"""Pass ``sparse-iter-approximate-math``."""

from __future__ import annotations

import dataclasses

from mlir import ir
from mlir.dialects import arith
from mlir.passmanager import ExternalPass

from sparsecomp.ir.walk import preorder
from sparsecomp.transforms.base import SparsecompPass

#: ``erf(x) ~ x P(x^2) / Q(x^2)`` on ``[-4, 4]`` (beyond, ``erf`` is ``+-1`` in
#: f32): coefficients of ``P`` and ``Q`` from the constant term up, fitted for
#: this project by Loeb's iteration (linear least squares of ``x P - erf Q``,
#: reweighted by ``1 / |Q|``) on 40,001 points of ``[0, 4]``. In f64 the
#: rational function is within 3.2e-9 of ``erf``; evaluated in f32 as below,
#: within 3.8e-7 absolutely and relatively (about 3 ulp) over
#: ``[-5, 5]`` and down to 1e-30 (``test_approximate_math.py`` checks it
#: against ``scipy.special.erf``).
ERF_P = (
    1.128379225730896,
    0.18464221060276031,
    0.05432954430580139,
    0.003837554482743144,
    0.00038289703661575913,
    4.787274065165548e-06,
    -1.369479818436048e-08,
)
ERF_Q = (
    1.0,
    0.49696844816207886,
    0.1138034462928772,
    0.015450241975486279,
    0.0013094599125906825,
    6.407436012523249e-05,
)
#: where the rational form is clamped: ``erf(4) = 1 - 1.5e-8`` rounds to 1 in f32
ERF_EDGE = 4.0

#: the ops this pass can approximate
SUPPORTED = ("erf",)

_CONTRACT = "#arith.fastmath<contract>"


def _is_f32(ty: ir.Type) -> bool:
    """Whether ``ty`` is ``f32`` or a vector of ``f32``."""
    if isinstance(ty, ir.VectorType):
        ty = ty.element_type
    return isinstance(ty, ir.F32Type)


def _constant(ty: ir.Type, value: float) -> ir.Value:
    """``value`` as an ``f32`` constant of ``ty`` (splat for a vector)."""
    f32 = ir.F32Type.get()
    if isinstance(ty, ir.VectorType):
        splat = ir.DenseElementsAttr.get_splat(ty, ir.FloatAttr.get(f32, value))
        return arith.constant(ty, splat)
    return arith.constant(f32, value)


def _horner(coefficients: tuple[float, ...], s: ir.Value) -> ir.Value:
    """``c0 + c1 s + c2 s^2 + ...``, multiply-adds LLVM may contract into FMAs."""
    flags = ir.Attribute.parse(_CONTRACT)
    acc = _constant(s.type, coefficients[-1])
    for c in reversed(coefficients[:-1]):
        acc = arith.addf(arith.mulf(acc, s, fastmath=flags), _constant(s.type, c), fastmath=flags)
    return acc


def approximate_erf(x: ir.Value) -> ir.Value:
    """``erf(x)`` for an ``f32`` (or vector of ``f32``) ``x``, emitted at the insertion
    point: ``x`` clamped to ``[-4, 4]``, then :data:`ERF_P` over :data:`ERF_Q`,
    clamped to ``[-1, 1]``. NaN stays NaN (``maximumf``/``minimumf``
    propagate it), infinities give ``+-1``, ``-0.0`` gives ``-0.0``."""
    ty = x.type
    edge = _constant(ty, ERF_EDGE)
    clamped = arith.minimumf(arith.maximumf(x, _constant(ty, -ERF_EDGE)), edge)
    s = arith.mulf(clamped, clamped)
    ratio = arith.divf(arith.mulf(clamped, _horner(ERF_P, s)), _horner(ERF_Q, s))
    one = _constant(ty, 1.0)
    return arith.minimumf(arith.maximumf(ratio, _constant(ty, -1.0)), one)


@dataclasses.dataclass(frozen=True)
class ApproximateMathPass(SparsecompPass):
    """Replace ``f32`` math functions that have no vector instruction by arithmetic.

    LLVM has no intrinsic for ``math.erf``: ``convert-math-to-libm`` turns it
    into calls of libm's ``erff``, one per lane of a vector, so that a
    vectorized GELU (``x/2 (1 + erf(x / sqrt 2))``, a transformer's FFN
    activation) ran lane by lane. This pass rewrites ``math.erf`` on ``f32``
    and vectors of ``f32`` into a rational function of ``x^2`` (see
    :data:`ERF_P`): 14 multiply-adds, a division and four clamps, within
    3.8e-7 of ``erf`` (about 3 ulp), which vectorize like the rest of the
    kernel. Other element types (``f64``, whose users expect libm's accuracy;
    ``f16``, ``bf16``) are left to libm. MLIR's own polynomial approximations
    are test passes only, not in the pass registry or the Python bindings.

    Option: ``ops``, a comma-separated list of the math ops to approximate
    (``erf``, the default and the only one so far).

    Before:

    ```mlir
    %e = math.erf %x : vector<16xf32>
    ```

    After:

    ```mlir
    %c = arith.minimumf (arith.maximumf %x, -4.0), 4.0 : vector<16xf32>
    %s = arith.mulf %c, %c : vector<16xf32>
    %r = arith.divf %num, %den : vector<16xf32>     // %c * P(%s) / Q(%s)
    ... clamped to [-1, 1] ...
    ```
    """

    NAME = "sparse-iter-approximate-math"
    ops: str = "erf"

    def __post_init__(self) -> None:
        unknown = [op for op in self._names() if op not in SUPPORTED]
        if unknown or not self._names():
            raise ValueError(
                f"ops must name math ops among {', '.join(SUPPORTED)}, got '{self.ops}'"
            )

    def _names(self) -> list[str]:
        return [name.strip() for name in self.ops.split(",") if name.strip()]

    def run(self, op: ir.Operation, pass_: ExternalPass) -> None:
        wanted = {f"math.{name}" for name in self._names()}
        found = [
            inner
            for inner in preorder(op)
            if inner.name in wanted and _is_f32(inner.results[0].type)
        ]
        for erf in found:
            with ir.InsertionPoint(erf), erf.location:
                value = approximate_erf(erf.operands[0])
            erf.results[0].replace_all_uses_with(value)
            erf.erase()
