"""The package's version, apart from ``sparsecomp/__init__.py``, so that modules the
package imports (``compiler.stages`` writes it into each manifest) need not import the
package itself."""

__version__ = "0.1.0"
