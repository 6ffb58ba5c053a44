"""``ptxas``, NVIDIA's PTX assembler: where it is, which chips it takes, and running it.

It comes from the ``nvidia-cuda-nvcc`` wheel (extra ``cuda``, and the test
extra) or from ``PATH``. Each release assembles its own range of chips
(CUDA 13 dropped sm_70), so ``target="cuda:sm_XY"`` is checked against
:func:`chips` before anything is built (:func:`check_chip`), not refused by
``ptxas`` at the end of the build. Imports no MLIR.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path

from sparsecomp.errors import TargetError, ToolchainError


def ptxas() -> Path | None:
    """``ptxas`` from the ``nvidia-cuda-nvcc`` wheel, else from ``PATH``; None if neither."""
    site = Path(sysconfig.get_paths()["purelib"]) / "nvidia"
    for found in sorted(site.glob("*/bin/ptxas")) + sorted(site.glob("cuda_nvcc/bin/ptxas")):
        return found
    on_path = shutil.which("ptxas")
    return Path(on_path) if on_path else None


@functools.cache
def chips() -> tuple[str, ...] | None:
    """The plain ``sm_XY`` chips the installed ``ptxas`` assembles for (its ``--help``
    lists them under ``--gpu-name``), lowest first; None without ``ptxas`` or list."""
    tool = ptxas()
    if tool is None:
        return None
    try:
        done = subprocess.run(
            [str(tool), "--help"], capture_output=True, text=True, check=False, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    names = set(re.findall(r"'(sm_\d+)'", done.stdout))
    return tuple(sorted(names, key=lambda n: int(n[3:]))) or None


def check_chip(chip: str) -> None:
    """A :class:`TargetError` now for a chip the installed ``ptxas`` does not assemble,
    naming the chips that both it and sparsecomp's CUDA lowering take."""
    from sparsecomp.targets.cuda import SM_VERSIONS

    known = chips()
    if known is None or chip in known:
        return
    usable = [f"sm_{v}" for v in SM_VERSIONS if f"sm_{v}" in known]
    raise TargetError(
        f"cuda:{chip}: the installed ptxas ({ptxas()}) does not assemble {chip}; "
        f"with it sparsecomp builds for {', '.join(usable)}",
        hint=f"compile for one of those, or for cuda-emu:{chip} to run the schedule on this "
        "CPU; nvidia-cuda-nvcc 12.x still assembles sm_70",
    )


def assemble(ptx_text: str, chip: str) -> bytes:
    """A cubin for ``chip`` (``sm_90``) from PTX, by ``ptxas``; its errors as ToolchainError."""
    tool = ptxas()
    if tool is None:
        raise ToolchainError("no ptxas", hint="pip install 'sparsecomp[cuda]' (nvidia-cuda-nvcc)")
    with tempfile.TemporaryDirectory(prefix="sparsecomp-ptxas-") as tmp:
        src, out = Path(tmp) / "k.ptx", Path(tmp) / "k.cubin"
        src.write_text(ptx_text)
        done = subprocess.run(
            [str(tool), f"-arch={chip}", str(src), "-o", str(out)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise ToolchainError(f"ptxas -arch={chip} failed:\n{done.stderr.strip()}")
        return out.read_bytes()
