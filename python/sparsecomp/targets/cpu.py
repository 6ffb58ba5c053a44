"""CPU target descriptions (``#sparse_iter.cpu``) and host detection."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path

from sparsecomp.errors import TargetError
from sparsecomp.formats.attrtext import AttrNode, Field, Keyword, format_value

#: ISA features the CPU lowering knows, per architecture.
FEATURES = {
    "x86_64": ("sse4.2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq"),
    "aarch64": ("neon", "sve", "sve2"),
}
#: The widest vector each feature provides, in bits.
_VECTOR_BITS = {"sse4.2": 128, "avx": 256, "avx2": 256, "avx512f": 512, "neon": 128}
#: Core families a target may be tuned for (``tune``; empty: none in particular):
#: where code generation chooses differently, :mod:`sparsecomp.compiler.aot` says why.
TUNINGS = ("intel", "amd")
#: ``vendor_id`` in ``/proc/cpuinfo`` -> :data:`TUNINGS` entry.
_VENDORS = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}
#: LLVM target triple and baseline CPU name per architecture.
TRIPLES = {"x86_64": "x86_64-unknown-linux-gnu", "aarch64": "aarch64-unknown-linux-gnu"}
LLVM_CPUS = {"x86_64": "x86-64", "aarch64": "generic"}


@dataclass(frozen=True)
class CpuTarget:
    """Architecture, ISA features, vector width in bits (0: scalar code), threads (0: all
    cores), and the cores the code is tuned for (``tune``: ``intel``, ``amd``, or empty;
    printed only where set): a choice of code generation, never of what runs where."""

    arch: str = "x86_64"
    features: tuple[str, ...] = ()
    vector_bits: int = 128
    threads: int = 0
    tune: str = ""

    def __post_init__(self) -> None:
        if self.arch not in FEATURES:
            raise TargetError(f"unknown CPU architecture '{self.arch}'; expected {list(FEATURES)}")
        unknown = [f for f in self.features if f not in FEATURES[self.arch]]
        if unknown:
            raise TargetError(
                f"unknown {self.arch} feature(s) {', '.join(unknown)}; "
                f"known: {', '.join(FEATURES[self.arch])}"
            )
        if self.vector_bits not in (0, 128, 256, 512):
            raise TargetError(
                f"vector_bits must be 0 (scalar code), 128, 256 or 512, got {self.vector_bits}"
            )
        if self.vector_bits > self.max_vector_bits:
            raise TargetError(
                f"vector_bits {self.vector_bits} needs a feature that provides it; "
                f"{', '.join(self.features) or 'no features'} give at most {self.max_vector_bits}"
            )
        if self.threads < 0:
            raise TargetError(f"threads must be >= 0 (0: all cores), got {self.threads}")
        if self.tune and self.tune not in TUNINGS:
            raise TargetError(f"unknown tune '{self.tune}'; known: {', '.join(TUNINGS)}")

    @property
    def max_vector_bits(self) -> int:
        return max([128, *(_VECTOR_BITS.get(f, 0) for f in self.features)])

    def attr_node(self) -> AttrNode:
        return AttrNode(
            "cpu",
            (
                Keyword(self.arch),
                Field("features", [Keyword(f) for f in self.features]),
                Field("vector_bits", self.vector_bits),
                Field("threads", self.threads),
                *([Field("tune", Keyword(self.tune))] if self.tune else []),
            ),
        )

    def attr_text(self) -> str:
        return format_value(self.attr_node())

    def llvm_features(self) -> list[str]:
        """LLVM ``-mattr`` / ``target-features`` entries: ``+avx2``, ``+prefer-256-bit``, ..."""
        features = [f"+{f}" for f in self.features]
        if self.arch == "x86_64" and 0 < self.vector_bits < self.max_vector_bits:
            features.append(f"+prefer-{self.vector_bits}-bit")
        return features

    def missing_on(self, host: CpuTarget) -> list[str]:
        """What ``host`` lacks to run this target's code: its architecture or features."""
        if host.arch != self.arch:
            return [self.arch]
        return [f for f in self.features if f not in host.features]

    @staticmethod
    def common(targets: list[CpuTarget]) -> CpuTarget:
        """The target every one of ``targets`` can run: shared features, narrowest vectors.

        Code that belongs to no one target (entry wrappers, runtime helpers)
        compiles for it. All must share one architecture.
        """
        arches = sorted({t.arch for t in targets})
        if len(arches) != 1:
            raise TargetError(
                f"one module's CPU targets must share an architecture, got {', '.join(arches)}",
                hint="compile the functions of each architecture as their own module",
            )
        shared = tuple(f for f in targets[0].features if all(f in t.features for t in targets))
        bits = min(t.vector_bits for t in targets)
        threads = max(t.threads for t in targets) if all(t.threads for t in targets) else 0
        tunes = {t.tune for t in targets}
        return CpuTarget(arches[0], shared, min(bits, CpuTarget(arches[0], shared).max_vector_bits),
                         threads, tunes.pop() if len(tunes) == 1 else "")  # fmt: skip

    @classmethod
    def from_node(cls, node: AttrNode) -> CpuTarget:
        keys = ("features", "vector_bits", "threads")
        (arch,), named = node.fields("cpu", 1, keys, optional=("tune",))
        features = named["features"]
        if not isinstance(arch, Keyword) or not isinstance(features, list):
            raise TargetError(f"expected x86_64 or aarch64 and a feature list, got {arch}")
        if not all(isinstance(f, Keyword) for f in features):
            raise TargetError("cpu features must be bare names: [avx2, fma]")
        if not all(isinstance(named[k], int) for k in ("vector_bits", "threads")):
            raise TargetError("vector_bits and threads must be integers")
        names = tuple(f.name for f in features)
        tune = named.get("tune", Keyword(""))
        if not isinstance(tune, Keyword):
            raise TargetError(f"tune must be a bare name ({', '.join(TUNINGS)}), got {tune}")
        return cls(arch.name, names, named["vector_bits"], named["threads"], tune.name)


def detect_host(cpuinfo: Path = Path("/proc/cpuinfo")) -> CpuTarget:
    """The target for this machine: architecture, ISA features, widest vectors, and
    the vendor's cores to tune for (``vendor_id``)."""
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), "")
    arch = arch or platform.machine().lower()
    if arch not in FEATURES:
        raise TargetError(f"unsupported host architecture '{platform.machine()}'")
    flags: set[str] = set()
    vendor = ""
    if cpuinfo.exists():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "vendor_id" and not vendor:
                vendor = value.strip()
            if key.strip() in ("flags", "Features"):
                flags = set(value.split())
                break
    aliases = {"sse4_2": "sse4.2", "asimd": "neon"}
    present = {aliases.get(f, f) for f in flags}
    features = tuple(f for f in FEATURES[arch] if f in present)
    if arch == "aarch64" and "neon" not in features:
        features = ("neon", *features)  # every AArch64 core has Advanced SIMD
    probe = CpuTarget(arch, features, 128, 0)
    # AVX-512 registers are 512 bits, but 256-bit vectors are the faster
    # default on many cores (frequency licences); the resolver may widen.
    bits = min(probe.max_vector_bits, 256) if arch == "x86_64" else 128
    tune = _VENDORS.get(vendor, "") if arch == "x86_64" else ""
    return CpuTarget(arch, features, bits, len(os.sched_getaffinity(0)), tune)
