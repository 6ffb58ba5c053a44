"""linalg's generated op and enum classes, without the OpDSL's named ops (see the package)."""

from mlir.dialects._linalg_enum_gen import *  # noqa: F403
from mlir.dialects._linalg_ops_gen import *  # noqa: F403
