"""The compiler driver: MLIR source to a loadable kernel.

:mod:`.driver` (``sparsecomp.compile``) runs the stages of :mod:`.build` and
caches results (:mod:`.cache`); :mod:`.aot` compiles and links ``kernel.so``.
Nothing here imports MLIR until a build actually runs, so a cache hit costs
only loading the library.
"""
