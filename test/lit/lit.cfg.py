"""lit configuration: sparsecomp-opt and LLVM's FileCheck on PATH, internal shell."""

import os
import shutil
import sys

import lit.formats

from sparsecomp.ir import odsgen

config.name = "sparsecomp"  # noqa: F821 (lit injects `config`)
config.test_format = lit.formats.ShTest(execute_external=False)  # noqa: F821
config.suffixes = [".mlir"]  # noqa: F821
config.excludes = ["lit.cfg.py", "Inputs"]  # noqa: F821
config.test_source_root = os.path.dirname(__file__)  # noqa: F821

# The venv's scripts (sparsecomp-opt) and the pinned LLVM tools (FileCheck, not).
bin_dirs = [os.path.dirname(sys.executable), str(odsgen.tool("FileCheck").parent)]
config.environment["PATH"] = os.pathsep.join([*bin_dirs, os.environ.get("PATH", "")])  # noqa: F821
for knob in ("SPARSECOMP_CACHE_DIR", "HOME", "XDG_CACHE_HOME", "PYTHONPATH"):
    if knob in os.environ:
        config.environment[knob] = os.environ[knob]  # noqa: F821
assert shutil.which("sparsecomp-opt", path=config.environment["PATH"]), "pip install -e ."  # noqa: F821

# MLIR's JIT runner and the libraries a sparsecomp-cpu program needs at run
# time (vector.print's c_runner_utils; printMemref*'s runner_utils; libomp for
# the OpenMP loops).
from sparsecomp.runtime.libs import library_path  # noqa: E402

config.substitutions.append(("%mlir-runner", str(odsgen.tool("mlir-runner"))))  # noqa: F821
libs = ("c_runner_utils", "runner_utils", "omp")
runner_libs = " ".join(f"-shared-libs={library_path(n)}" for n in libs)
config.substitutions.append(("%runner-libs", runner_libs))  # noqa: F821
