"""Memory traffic of an emulated GPU kernel, counted the way the hardware coalesces it.

An executable compiled with ``sparsecomp.compile(src, "cuda-emu:sm_80",
profile=True)`` reports every global load and store of its kernels: the
access site, the byte address and size, the block and the thread. Threads
run one after the other in emulation, so the ``k``-th access of a site by
each thread of a warp forms one warp-wide request, as the lanes of a warp
would issue it together. A request touches the 32-byte sectors its lanes'
bytes fall in. ``sector_efficiency`` is the coalescing: per request, the
distinct bytes its lanes asked for packed into sectors, over the sectors it
touched (1.0: no sector fetched for bytes nobody asked for).
``traffic_efficiency`` compares with the ideal of the whole call, every
distinct byte moved once (each stored entry, each needed dense element,
each output): below 1 where data is fetched again, which caches would
partly absorb and this count ignores. ``lane_utilization`` is the mean
fraction of a warp's 32 lanes active per request. Atomic adds
(``memref.atomic_rmw``, where parts of a composable layout share rows) count
with the stores and on their own (``atomics``). Shared-memory accesses are
not global traffic: they count as requests and bank conflicts
(:func:`bank_conflicts`). Tensor-core instructions
(``nvgpu.mma.sync``) are counted per warp, with their multiply-adds.
``h100_seconds`` is a roofline: the larger of the sectors' bytes at H100
HBM3's 3.35 TB/s and the MMAs' flops at the H100 SXM's dense tensor-core
peak for their input type (494.7 TFLOP/s tf32, 989.4 f16, 1978.9 for 2:4
f16, counting the dense product's flops); it ignores
caches, latency and everything else the SMs do.

Blocks of one launch run in no fixed order on a GPU, and nothing orders
their memory accesses. Emulation runs them one after the other, so a result
that depends on their order still comes out right here: ``races`` counts the
global addresses two blocks of one launch write, one of them without an
atomic (:func:`cross_block_races`), each a result a GPU may get wrong.

Imports no MLIR.
"""

from __future__ import annotations

import ctypes
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sparsecomp.errors import SparsecompError

SECTOR = 32
WARP = 32
H100_BYTES_PER_SECOND = 3.35e12
#: Tensor-core peaks of the H100 SXM5, flop/s, by the kind code an MMA reports (2:4
#: counts the flops of the dense product it stands for, at the sparse peak).
H100_TENSOR_FLOPS = {2: 494.7e12, 3: 989.4e12, 4: 1978.9e12}
#: The kind column of a record: 0 load, 1 store, 2 tf32 MMA, 3 f16 MMA, 4 2:4 f16 MMA
#: (bytes: its m*n*k).
LOAD, STORE, MMA_TF32, MMA_F16, MMA_SP_F16, ATOMIC, SHARED_LOAD, SHARED_STORE = range(8)
#: Shared memory: 32 banks of 4 bytes.
BANKS, BANK_WIDTH = 32, 4
HOOK = "sparsecomp_emu_hook"
#: The recorder a build links in (``profile_recorder.c``), and how many records it
#: keeps before it samples blocks (48 bytes each).
RECORDER = "sparsecomp_profile_record"
MAX_RECORDS = 4_000_000
#: Its records: site, address, bytes, block, thread, kind, and the request's key.
FIELDS = 7
#: One reported access: site, address, bytes, block, thread, is_store.
_Hook = ctypes.CFUNCTYPE(None, *[ctypes.c_int64] * 6)


@dataclass(frozen=True)
class Traffic:
    """Global-memory traffic of some accesses (all, loads or stores)."""

    accesses: int
    requests: int
    sectors: int
    #: Per request, the distinct bytes its lanes asked for, packed into sectors.
    coalesced_sectors: int
    #: Every distinct byte of the whole call moved once.
    ideal_sectors: int
    active_lanes: int

    @property
    def sector_efficiency(self) -> float:
        """Coalescing: 1.0 when every request moves only sectors its lanes need."""
        return self.coalesced_sectors / self.sectors if self.sectors else 1.0

    @property
    def traffic_efficiency(self) -> float:
        """The ideal over the counted sectors: below 1 where data is read again (no caches)."""
        return self.ideal_sectors / self.sectors if self.sectors else 1.0

    @property
    def lane_utilization(self) -> float:
        return self.active_lanes / (WARP * self.requests) if self.requests else 1.0


@dataclass(frozen=True)
class Profile:
    """What :meth:`Function.profile` counted for one call; ``str`` is a report."""

    total: Traffic
    loads: Traffic
    stores: Traffic
    #: Per access site: launch ``k``'s sites are ``1000 k + i``, ``i`` in program order.
    sites: dict[int, Traffic]
    result: Any = None
    #: Warp-wide MMA instructions issued, by kind (:data:`MMA_TF32`, :data:`MMA_F16`,
    #: :data:`MMA_SP_F16`).
    mma_instructions: dict[int, int] = dataclasses.field(default_factory=dict)
    #: Their flops (2 per multiply-add), by kind.
    mma_flops: dict[int, int] = dataclasses.field(default_factory=dict)
    #: Atomic read-modify-writes (one per thread that issued one); their sectors
    #: count with the stores'.
    atomics: int = 0
    #: Warp requests to shared (workgroup) memory, and the extra passes their bank
    #: conflicts cost (:func:`bank_conflicts`).
    shared_requests: int = 0
    bank_conflicts: int = 0
    #: Global addresses two blocks of one launch write, one with a plain store
    #: (:func:`cross_block_races`): 0 for a schedule whose result is order-free.
    races: int = 0
    #: Global-memory requests of the busiest warp of any launch, and the mean over
    #: the warps that made any (:func:`warp_requests`): a warp issues its requests
    #: one after the other, so where the busiest has many times the mean (a power-law
    #: row on a warp's lanes), it, not the bytes, sets the time.
    longest_warp: int = 0
    mean_warp: float = 0.0
    #: The warps that made any global request (all launches).
    warps: int = 0
    #: The fraction of global accesses whose records were counted (1.0: all; less
    #: where the recorder sampled blocks of a large call, and the counts above are
    #: scaled up from them; races are then among the sampled blocks only).
    sampled: float = 1.0

    @property
    def h100_bandwidth_seconds(self) -> float:
        return self.total.sectors * SECTOR / H100_BYTES_PER_SECOND

    @property
    def h100_tensor_seconds(self) -> float:
        return sum(f / H100_TENSOR_FLOPS[k] for k, f in self.mma_flops.items())

    @property
    def h100_seconds(self) -> float:
        """The roofline: memory or tensor cores, whichever takes longer."""
        return max(self.h100_bandwidth_seconds, self.h100_tensor_seconds)

    def model_features(self) -> dict[str, float]:
        """The counts :func:`sparsecomp.runtime.gpu_model.estimate_seconds` takes."""
        return {
            "launches": len({site // 1000 for site in self.sites}),
            "bytes": self.total.sectors * SECTOR,
            "requests": self.total.requests + self.shared_requests,
            "busiest": self.longest_warp,
        }

    def __str__(self) -> str:
        rows = [("all", self.total), ("loads", self.loads), ("stores", self.stores)]
        lines = [f"{'':9s}{'accesses':>10s}{'requests':>10s}{'sectors':>10s}{'ideal':>10s}"
                 f"{'coalesced':>11s}{'traffic':>9s}{'lanes':>7s}"]  # fmt: skip
        named = [*rows, *((f"site {k}", t) for k, t in sorted(self.sites.items()))]
        for name, t in named:
            lines.append(
                f"{name:9s}{t.accesses:>10d}{t.requests:>10d}{t.sectors:>10d}"
                f"{t.ideal_sectors:>10d}{t.sector_efficiency:>11.2f}"
                f"{t.traffic_efficiency:>9.2f}{t.lane_utilization:>7.2f}"
            )
        if self.atomics:
            lines.append(f"atomics: {self.atomics}")
        if self.longest_warp:
            lines.append(f"warps: the busiest made {self.longest_warp} requests, the mean "
                         f"{self.mean_warp:.1f}")  # fmt: skip
        if self.sampled < 1.0:
            lines.append(f"sampled: counts scaled from {self.sampled:.1%} of the global "
                         "accesses (every block's warps counted)")  # fmt: skip
        if self.races:
            lines.append(f"races: {self.races} addresses written by two blocks of one "
                         "launch, not both atomically")  # fmt: skip
        if self.shared_requests:
            lines.append(f"shared memory: {self.shared_requests} requests, "
                         f"{self.bank_conflicts} bank-conflict passes")  # fmt: skip
        names = {MMA_TF32: "tf32", MMA_F16: "f16", MMA_SP_F16: "2:4 f16"}
        for kind, count in sorted(self.mma_instructions.items()):
            lines.append(f"MMA {names[kind]}: {count} warp instructions, "
                         f"{self.mma_flops[kind]} flops")  # fmt: skip
        lines.append(
            f"H100 roofline: {self.h100_seconds * 1e6:.3f} us (memory "
            f"{self.h100_bandwidth_seconds * 1e6:.3f} us, tensor cores "
            f"{self.h100_tensor_seconds * 1e6:.3f} us)"
        )
        return "\n".join(lines)


def _ids(*columns: np.ndarray) -> tuple[np.ndarray, int]:
    """Per row of ``columns`` (equal-length int64 arrays), a dense id of its distinct
    tuple, and how many there are; each column is made dense first, so that the
    tuple packs into one int64 (addresses are up to 2^56, no two fit as they are)."""
    key, size = np.zeros(len(columns[0]), np.int64), 1
    for column in columns:
        values, dense = np.unique(column, return_inverse=True)
        if size * len(values) >= 1 << 62:  # the key would overflow: make it dense first
            found, key = np.unique(key, return_inverse=True)
            key, size = key.reshape(-1), len(found)
        key, size = key * len(values) + dense.reshape(-1), size * len(values)
    values, dense = np.unique(key, return_inverse=True)
    return dense.reshape(-1), len(values)


def _request_ids(records: np.ndarray) -> np.ndarray:
    """Per record, its warp request: the ``k``-th access of a site by a warp's threads.

    Records of the recorder carry their request's key in a seventh column
    (``profile_recorder.c``); for others (or where a key did not fit), ``k``
    is found by sorting.
    """
    if records.shape[1] > 6 and (records[:, 6] >= 0).all():
        return np.unique(records[:, 6], return_inverse=True)[1].reshape(-1)
    site, block, thread = records[:, 0], records[:, 3], records[:, 4]
    # k: how many earlier accesses the same thread made at the same site.
    order = np.lexsort((np.arange(len(records)), site, thread, block))
    keys = np.stack([block[order], thread[order], site[order]], axis=1)
    starts = np.ones(len(order), dtype=bool)
    starts[1:] = np.any(keys[1:] != keys[:-1], axis=1)
    run = np.cumsum(starts) - 1
    first = np.flatnonzero(starts)
    occurrence = np.empty(len(order), dtype=np.int64)
    occurrence[order] = np.arange(len(order)) - first[run]
    return _ids(block, thread // WARP, site, occurrence)[0]


def _spans(first: np.ndarray, last: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each record's units ``first .. last`` (sectors, words) expanded: (record, unit)."""
    spans = last - first + 1
    repeat = np.repeat(np.arange(len(first)), spans)
    unit = first[repeat] + (np.arange(spans.sum()) - np.repeat(np.cumsum(spans) - spans, spans))
    return repeat, unit


def bank_conflicts(records: np.ndarray) -> tuple[int, int]:
    """``(requests, conflicts)`` of shared-memory ``records`` (rows as :func:`traffic`'s).

    Shared memory has 32 banks of 4-byte words (word ``w`` in bank ``w mod 32``);
    a warp request takes as many passes as the most distinct words any one bank
    must deliver (lanes reading the same word share it: a broadcast).
    Wider accesses are served a part of the warp at a time, as the GPU does:
    8-byte ones per half warp, 16-byte ones per quarter warp, so 32 lanes
    reading 16 consecutive bytes each take four passes and no conflict.
    ``conflicts`` sums the passes beyond the first of each part over all
    requests.
    """
    if len(records) == 0:
        return 0, 0
    warp_request = _request_ids(records)
    size = records[:, 2]
    lanes = np.where(size >= 16, WARP // 4, np.where(size >= 8, WARP // 2, WARP))
    request_id = _ids(warp_request, (records[:, 4] % WARP) // lanes)[0]
    repeat, word = _spans(records[:, 1] // BANK_WIDTH,
                          (records[:, 1] + records[:, 2] - 1) // BANK_WIDTH)  # fmt: skip
    # Distinct words per request, then how many fall in each (request, bank).
    words_id, _ = _ids(request_id[repeat], word)
    first = np.unique(words_id, return_index=True)[1]
    request, bank = request_id[repeat][first], word[first] % BANKS
    pair, _ = _ids(request, bank)
    counts = np.bincount(pair)
    pair_request = np.zeros(len(counts), np.int64)
    pair_request[pair] = request
    passes = np.zeros(int(request_id.max()) + 1, dtype=np.int64)
    np.maximum.at(passes, pair_request, counts)
    return int(warp_request.max()) + 1, int((passes - 1).clip(min=0).sum())


def cross_block_races(records: np.ndarray) -> int:
    """Global addresses that two blocks of one launch write, one of them with a plain store.

    ``records`` are rows as :func:`traffic`'s, in execution order (loads,
    stores and atomics). A launch's run is a stretch of consecutive records
    of one launch (site ``// 1000``); an address is matched by its first byte.
    Atomic adds race only with plain stores. Reads are left out: a guarded
    thread past the end reads a clamped address and drops what it read.
    """
    if len(records) == 0:
        return 0
    writes = records[records[:, 5] != LOAD]
    if len(writes) == 0:
        return 0
    launch = records[:, 0] // 1000
    run = np.concatenate([[0], np.cumsum(launch[1:] != launch[:-1])])[records[:, 5] != LOAD]
    place, _ = _ids(run, writes[:, 1])
    # Per place: the blocks that write it, and whether one stores plainly.
    touch, _ = _ids(place, writes[:, 3])
    first = np.unique(touch, return_index=True)[1]
    blocks = np.bincount(place[first])
    stored = np.bincount(place, weights=writes[:, 5] == STORE, minlength=len(blocks))
    return int(((blocks > 1) & (stored > 0)).sum())


def warp_requests(records: np.ndarray) -> tuple[int, float]:
    """The requests of the busiest warp (a launch's block and warp) and the mean over the
    warps that made any."""
    if len(records) == 0:
        return 0, 0.0
    request_id = _request_ids(records)
    first = np.unique(request_id, return_index=True)[1]
    warp, _ = _ids(records[first, 0] // 1000, records[first, 3], records[first, 4] // WARP)
    counts = np.bincount(warp)
    return int(counts.max()), float(counts.mean())


def traffic(records: np.ndarray) -> Traffic:
    """Count requests and sectors of ``records`` (rows: site, address, bytes, block, thread,
    kind), grouping the ``k``-th access of a site by the threads of one warp."""
    if len(records) == 0:
        return Traffic(0, 0, 0, 0, 0, 0)
    address, size, thread = records[:, 1], records[:, 2], records[:, 4]
    request_id = _request_ids(records)
    # Sectors: every sector a lane's bytes touch, unique per request.
    repeat, sector = _spans(address // SECTOR, (address + size - 1) // SECTOR)
    sectors = _ids(request_id[repeat], sector)[1]
    requests = int(request_id.max()) + 1
    # Per request, the distinct bytes of its lanes.
    access, _ = _ids(address, size)
    asked, _ = _ids(request_id, access)
    once = np.unique(asked, return_index=True)[1]
    per_request = np.bincount(request_id[once], weights=size[once], minlength=requests)
    lanes = _ids(request_id, thread % WARP)[1]
    return Traffic(
        accesses=len(records),
        requests=requests,
        sectors=sectors,
        coalesced_sectors=int(np.ceil(per_request / SECTOR).sum()),
        ideal_sectors=_ideal_sectors(records),
        active_lanes=lanes,
    )


def _ideal_sectors(records: np.ndarray) -> int:
    """Every distinct byte the accesses touch, moved once, in sectors."""
    if len(records) == 0:
        return 0
    access, _ = _ids(records[:, 1], records[:, 2])
    first = np.unique(access, return_index=True)[1]
    return -(-int(records[first, 2].sum()) // SECTOR)


def _summed(parts: list[Traffic], records: np.ndarray) -> Traffic:
    """The traffic of ``records`` from that of its sites (requests never span sites)."""
    fields = [sum(getattr(t, f.name) for t in parts) for f in dataclasses.fields(Traffic)]
    return dataclasses.replace(Traffic(*fields), ideal_sectors=_ideal_sectors(records))


def profile_call(
    library: ctypes.CDLL, call: Callable[[], Any], max_records: int = MAX_RECORDS
) -> Profile:
    """Run ``call`` with the library's access hook recording; count what it recorded.

    A build carries its own recorder in C (``profile_recorder.c``): it counts
    every warp's requests exactly, and keeps the accesses themselves for the
    sector counts, sampling blocks (every 2nd, 4th, ... block of a launch)
    once ``max_records`` are kept, so that a large matrix profiles in bounded
    memory; the counts are then scaled by the global accesses seen over those
    kept (``Profile.sampled``). Executables built before it existed record
    through a Python callback, every access.
    """
    try:
        hook = ctypes.c_void_p.in_dll(library, HOOK)
    except ValueError:
        raise SparsecompError(
            "this executable was not compiled for profiling",
            hint="sparsecomp.compile(source, 'cuda-emu:sm_80', profile=True)",
        ) from None
    try:
        record = getattr(library, RECORDER)
    except AttributeError:
        return _profile_in_python(hook, call)
    begin, end, kept = (
        getattr(library, f"sparsecomp_profile_{n}") for n in ("begin", "end", "records")
    )
    begin.argtypes, kept.restype = [ctypes.c_int64], ctypes.c_void_p
    if not begin(max_records):
        raise SparsecompError("the profiler could not allocate its counters")
    stats = (ctypes.c_int64 * 8)()
    hook.value = ctypes.cast(record, ctypes.c_void_p).value
    try:
        result = call()
    finally:
        hook.value = None
        end(stats)
    n, _stride, seen, kept_globals, busiest, warps, requests, failed = stats
    if failed:
        raise SparsecompError(
            "the profiler ran out of memory for its records",
            hint=f"profile with fewer records kept (max_records, now {max_records})",
        )
    everything = np.zeros((0, FIELDS), np.int64)
    if n:
        pointer = ctypes.cast(kept(), ctypes.POINTER(ctypes.c_int64))
        everything = np.ctypeslib.as_array(pointer, shape=(n, FIELDS)).copy()
    sampled = kept_globals / seen if seen else 1.0
    mean = requests / warps if warps else 0.0
    return _count(everything, result, busiest, mean, warps, sampled)


def _profile_in_python(hook: ctypes.c_void_p, call: Callable[[], Any]) -> Profile:
    recorded: list[tuple[int, int, int, int, int, int]] = []

    def record(site: int, address: int, size: int, block: int, thread: int, store: int) -> None:
        recorded.append((site, address, size, block, thread, store))

    callback = _Hook(record)
    hook.value = ctypes.cast(callback, ctypes.c_void_p).value
    try:
        result = call()
    finally:
        hook.value = None
    everything = np.array(recorded, dtype=np.int64).reshape(-1, 6)
    kind = everything[:, 5]
    globals_ = everything[(kind <= STORE) | (kind == ATOMIC)]
    longest, mean = warp_requests(globals_)
    warps = round(len(np.unique(_request_ids(globals_))) / mean) if mean else 0
    return _count(everything, result, longest, mean, warps, 1.0)


def _scaled(t: Traffic, factor: float) -> Traffic:
    """``t``'s counts times ``factor`` (a sampled profile), rounded, with the bounds the
    exact counts keep: each rounded alone, 15557 active lanes came out of 486 requests
    (a lane utilization above 1)."""
    if factor == 1.0:
        return t
    s = Traffic(*(round(v * factor) for v in dataclasses.astuple(t)))
    return dataclasses.replace(
        s,
        active_lanes=min(s.active_lanes, WARP * s.requests),
        coalesced_sectors=min(s.coalesced_sectors, s.sectors),
        ideal_sectors=min(s.ideal_sectors, s.sectors),
    )


def _count(everything: np.ndarray, result: Any, longest: int, mean: float, warps: int,
           sampled: float) -> Profile:  # fmt: skip
    """The profile of the recorded rows; counts scaled by ``1 / sampled``."""
    factor = 1.0 / sampled if sampled else 1.0
    kind = everything[:, 5]
    records = everything[(kind <= STORE) | (kind == ATOMIC)]
    stores = records[:, 5] != LOAD  # an atomic add writes (in L2) like a store
    # Each site's accesses, in their order, counted once; loads, stores and the
    # total are sums of sites (an op's accesses are all loads or all writes).
    by_site = records[np.argsort(records[:, 0], kind="stable")]
    names, starts = np.unique(by_site[:, 0], return_index=True)
    groups = np.split(by_site, starts[1:])
    raw = {int(k): traffic(g) for k, g in zip(names, groups)}
    writes = {int(k) for k, g in zip(names, groups) if g[0, 5] != LOAD}
    total = _summed(list(raw.values()), records)
    loaded = _summed([t for k, t in raw.items() if k not in writes], records[~stores])
    stored = _summed([t for k, t in raw.items() if k in writes], records[stores])
    sites = {k: _scaled(t, factor) for k, t in raw.items()}
    shared = everything[(kind == SHARED_LOAD) | (kind == SHARED_STORE)]
    shared_requests, conflicts = bank_conflicts(shared)
    instructions, flops = {}, {}
    for code in (MMA_TF32, MMA_F16, MMA_SP_F16):
        mmas = everything[kind == code]
        if len(mmas):
            issued = round(traffic(mmas).requests * factor)  # one per warp: a site's k-th MMA
            instructions[code] = issued
            flops[code] = 2 * issued * int(mmas[0, 2])
    return Profile(
        _scaled(total, factor),
        _scaled(loaded, factor),
        _scaled(stored, factor),
        sites,
        result,
        instructions,
        flops,
        round(int((kind == ATOMIC).sum()) * factor),
        round(shared_requests * factor),
        round(conflicts * factor),
        cross_block_races(records),
        longest,
        mean,
        warps,
        sampled,
    )
