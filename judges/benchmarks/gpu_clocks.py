"""The GPU's SM clock, temperature and power through a benchmark run, so that two timings can be
compared at the clocks they ran at (a GPU kept busy back to back may clock lower than one with
pauses between calls).

    with GpuClocks() as clocks:
        started = time.time(); ...; clocks.during(started, time.time())

Reads `nvidia-smi --query-gpu=... --loop-ms=200` in a thread, stamping each line with the time it
arrived; without `nvidia-smi` (the CPU host) every figure is None. Used by
`trimul_acceptance.py`: each judging's and each loop's medians in its JSON.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import threading
import time
from typing import Any

FIELDS = ("utilization.gpu", "clocks.sm", "temperature.gpu", "power.draw")
KEYS = ("utilizationPct", "smClockMHz", "temperatureC", "powerW")


class GpuClocks:
    def __init__(self, gpu: int = 0, every_ms: int = 200) -> None:
        self.samples: list[tuple[float, tuple[float | None, ...]]] = []
        self.process: subprocess.Popen[str] | None = None
        binary = shutil.which("nvidia-smi")
        if binary is not None:
            self.process = subprocess.Popen(
                [binary, f"--id={gpu}", f"--query-gpu={','.join(FIELDS)}",
                 "--format=csv,noheader,nounits", f"--loop-ms={every_ms}"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            )  # fmt: skip
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            values = tuple(_number(part) for part in line.split(","))
            if len(values) == len(FIELDS) and values[0] is not None:
                self.samples.append((time.time(), values))

    def during(self, started: float, ended: float) -> dict[str, Any]:
        """Medians of the samples taken between `started` and `ended` (time.time()) while the
        GPU was busy (utilization above 0: an idle GPU, compiling or starting up, clocks down),
        and how many there were; None each when there were none."""
        inside = [values for stamp, values in list(self.samples)
                  if started <= stamp <= ended and values[0]]  # fmt: skip
        figures: dict[str, Any] = {"samples": len(inside)}
        for n, key in enumerate(KEYS):
            known = [v[n] for v in inside if v[n] is not None]
            figures[key] = statistics.median(known) if known else None
        return figures

    def __enter__(self) -> GpuClocks:
        return self

    def __exit__(self, *_: object) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)


def _number(text: str) -> float | None:
    """A field of nvidia-smi's CSV; None for "[N/A]" and the like (a figure this GPU lacks)."""
    try:
        return float(text)
    except ValueError:
        return None
