"""The hardware floor of a benchmark: no honest call can take less than moving its bytes at the
device's peak memory bandwidth, or doing its FLOPs at the device's peak throughput.

A package's reference module may say what a case must at least do: `minimum_work(**case)`
returns `{"bytes": ..., "flops": ...}` (the bytes every correct kernel must read and write, and
the FLOPs no algorithm avoids, a multiply-add counted as two). The floor of a case is the larger
of bytes / peak bandwidth and FLOPs / peak throughput. A timed call charged less than that is
not a fast kernel but a hole in the timing (GPU MODE's leaderboard was topped by a score of
0.000 that way, reference-kernels #162, fixed with a per-shape floor in PR #159): the benchmark
fails with a message naming the floor, and is never ranked.

The peaks are the device's, queried when the trusted process starts (`query_cuda`): memory
bandwidth = 2 (double data rate) x memory clock x bus width; throughput = SMs x boost clock x
the densest tensor-core FLOPs per SM and cycle known for the architecture (FP8 on Hopper and
Ada, FP16 before), so that the floor is below anything the device can do. A package may set
`peak_bandwidth` / `peak_flops` itself (bytes/s, FLOP/s); the CPU stand-in has no figures, so
there a floor exists only where the package sets them.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

# Dense tensor-core FLOPs per SM per cycle of the fastest type each architecture has, by
# compute capability: Hopper FP8 8192 (H100 SXM: 132 SMs x 1.83 GHz x 8192 = 1979 TFLOP/s), Ada
# FP8 4096 (rounded up), Ampere FP16/BF16 2048 (A100: 108 x 1.41 GHz x 2048 = 312 TFLOP/s),
# Volta FP16 1024. An architecture not listed gets Hopper's, the largest: a lower floor, never
# a wrong refusal.
FLOPS_PER_SM_CYCLE = {(9, 0): 8192, (8, 9): 4096, (8, 0): 2048, (8, 6): 2048, (7, 0): 1024}
DEFAULT_FLOPS_PER_SM_CYCLE = 8192

# CUdevice_attribute numbers (cuda.h)
_ATTRIBUTES = {
    "clock_khz": 13,
    "sms": 16,
    "memory_clock_khz": 36,
    "bus_width_bits": 37,
    "major": 75,
    "minor": 76,
}


@dataclass(frozen=True)
class Peaks:
    """A device's peak memory bandwidth (bytes/s) and throughput (FLOP/s); 0 = unknown."""

    bandwidth: float = 0.0
    flops: float = 0.0
    source: str = "none"

    def floor_ns(self, work: dict[str, Any] | None) -> float:
        """The least time `work` ({"bytes", "flops"}) can take here, in ns (0: no floor)."""
        if not work:
            return 0.0
        floors = [0.0]
        if self.bandwidth > 0:
            floors.append(float(work.get("bytes", 0)) / self.bandwidth * 1e9)
        if self.flops > 0:
            floors.append(float(work.get("flops", 0)) / self.flops * 1e9)
        return max(floors)

    def to_json(self) -> dict[str, Any]:
        return {
            "bandwidthGBs": self.bandwidth / 1e9,
            "tflops": self.flops / 1e12,
            "source": self.source,
        }


def peaks_from(attributes: dict[str, int]) -> Peaks:
    """The peaks from the driver's attributes (clocks in kHz, bus width in bits)."""
    bandwidth = 2 * attributes["memory_clock_khz"] * 1e3 * attributes["bus_width_bits"] / 8
    per_cycle = FLOPS_PER_SM_CYCLE.get(
        (attributes["major"], attributes["minor"]), DEFAULT_FLOPS_PER_SM_CYCLE
    )
    flops = attributes["sms"] * attributes["clock_khz"] * 1e3 * per_cycle
    return Peaks(bandwidth, flops, "device")


def query_cuda(ordinal: int = 0) -> Peaks:
    """The CUDA device's peaks, from the driver (libcuda's cuDeviceGetAttribute); a Peaks of
    zeros naming what failed when the driver does not say."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as error:
        return Peaks(source=f"no driver library ({error})")
    device = ctypes.c_int()
    if lib.cuInit(0) != 0 or lib.cuDeviceGet(ctypes.byref(device), ordinal) != 0:
        return Peaks(source="the driver gave no device")
    found = {}
    for key, attribute in _ATTRIBUTES.items():
        value = ctypes.c_int()
        if lib.cuDeviceGetAttribute(ctypes.byref(value), attribute, device) != 0:
            return Peaks(source=f"the driver gave no {key}")
        found[key] = value.value
    return peaks_from(found)


def choose(queried: Peaks, bandwidth: float | None, flops: float | None) -> Peaks:
    """The package's own figures where it sets them, else the device's."""
    if bandwidth is None and flops is None:
        return queried
    return Peaks(
        queried.bandwidth if bandwidth is None else bandwidth,
        queried.flops if flops is None else flops,
        "package" if queried.source in ("none", "") else f"package, else {queried.source}",
    )
