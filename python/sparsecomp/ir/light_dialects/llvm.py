"""The LLVM dialect's module for the bindings' op lookup, without its generated classes.

A build wraps LLVM-dialect ops when it walks the lowered module (the checks
before translation, the runtime libraries it needs) and never builds one from
Python. Upstream's ``mlir.dialects.llvm`` defines a class for each of the
dialect's ~300 ops at import (12-24 ms on the 2-core EPYC); with this module
found first, the ops wrap as plain ``OpView`` s.
"""
