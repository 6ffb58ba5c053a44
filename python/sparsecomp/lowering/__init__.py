"""Stage I -> II lowering: ``linalg.generic`` over encoded tensors to loops in position space.

:mod:`.plan` analyses one op (which operand drives the iteration, the loop
order, where the output is read and written, what the body does with zeros),
:mod:`.zeros` classifies the body, :mod:`.levels` emits one loop per storage
level, :mod:`.body` re-emits the op's body (scalar or vector), and
:mod:`.nest` builds the whole loop nest. ``sparse-iter-lower-iterations`` is
the pass that drives them.
"""
