"""Build step of the sparsecomp package: the sparse_iter dialect library and
the runtime's C call path.

Everything else is declared in pyproject.toml. The dialect library and its
Python op classes are generated from
``dialects/sparse_iter.td`` by ``dialects/build.py`` into
``sparsecomp/ir/_generated/`` (in the source tree for an editable install,
in the wheel otherwise), as any C extension is built by ``pip install``.

``sparsecomp.runtime._fastcall`` is an ordinary CPython extension (C, numpy's
C API). It is optional: where it cannot be built (no Python headers), pip
says so and calls take the Python path (``sparsecomp.runtime.fastcall``).
"""

from __future__ import annotations

import runpy
import shutil
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
NAME = "sparsecomp.ir._generated.libsparse_iter"
SOURCE_DIR = ROOT / "python" / "sparsecomp" / "ir" / "_generated"


class BuildDialect(build_ext):
    """Builds the one 'extension' with dialects/build.py instead of distutils' compiler."""

    def build_extension(self, ext: Extension) -> None:
        if ext.name != NAME:
            import numpy

            ext.include_dirs.append(numpy.get_include())
            super().build_extension(ext)
            return
        out_dir = Path(self.get_ext_fullpath(ext.name)).parent
        build = runpy.run_path(str(ROOT / "dialects" / "build.py"))
        build["build"](out_dir)
        if getattr(self, "editable_mode", False):  # the source tree is the package
            shutil.copytree(out_dir, SOURCE_DIR, dirs_exist_ok=True)

    def get_ext_filename(self, fullname: str) -> str:
        if fullname != NAME:
            return super().get_ext_filename(fullname)
        # A plain shared library loaded with ctypes, not a Python module.
        return fullname.replace(".", "/") + ".so"


setup(
    ext_modules=[
        Extension(NAME, sources=["dialects/SparseIterDialect.cpp"]),
        Extension(
            "sparsecomp.runtime._fastcall",
            sources=["python/sparsecomp/runtime/_fastcall.c"],
            extra_compile_args=["-O3"],
            optional=True,
        ),
    ],
    cmdclass={"build_ext": BuildDialect},
)
