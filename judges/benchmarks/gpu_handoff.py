"""The host's share of a GPU judge call's clock: GO handed to a spinning worker, with and without
the freeze the judge puts around a call's inputs, side by side in one run. No GPU is needed.

    python judges/benchmarks/gpu_handoff.py [--calls 2000] [--pause-us 300] [--out FILE]

Two processes share the judge's control block (`judges.gpu.sandboxed.control`) and spin on it
with its own `Control.wait`, as the trusted process and the worker do. Per call the worker sets
ARMED and spins for GO; the trusted side writes GO and spins for DONE; the worker notes the
moment it saw GO (`time.perf_counter_ns`, one clock for both processes on one host) and writes
DONE. Modes, interleaved call by call so that both see the same host:

- `spin`: GO is written while the worker spins (what a protocol without the freezer would do);
- `freeze`: as `judges.gpu.session.Session.call` does, the armed worker is frozen (cgroup v2's
  `cgroup.freeze` where the host offers it, else SIGSTOP, the judge's own fallback), the
  trusted side spins for `--pause-us` (the inputs' copy and the idle probe), thaws it and writes
  GO at once.

For each mode it prints the latency from GO written to the worker seeing it and the round trip
to DONE seen (median, standard deviation, 99th percentile, largest, and the share of calls more
than 100 us above the mode's fastest). The GPU judge's clock holds this round trip on every call
(judges/README.md, "Where the clock's jitter is").
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from judges.gpu.sandboxed.control import ARMED, CALL_NS, DONE, GO, Control  # noqa: E402

CGROUP2 = Path("/sys/fs/cgroup")
STOP = -1  # GO's value that ends the worker
LONG = 60.0  # seconds either side waits for the other at most


def worker(fd: int) -> int:
    """The worker's side: arm, spin for GO, note when it was seen, DONE; until GO is STOP."""
    block = Control(fd)
    seq = 0
    while True:
        seq += 1
        block.set(ARMED, seq)
        while not block.wait(GO, seq, LONG):
            if block.get(GO) == STOP:
                return 0
        seen = time.perf_counter_ns()
        block.set(CALL_NS, seen)
        block.set(DONE, seq)


class Freezer:
    """Stops and resumes one process as the judge's `CandidateProcess` does."""

    def __init__(self, pid: int) -> None:
        self.pid, self.group = pid, None
        group = CGROUP2 / f"gpu-handoff-{os.getpid()}"
        if (CGROUP2 / "cgroup.controllers").is_file():
            try:
                group.mkdir()
                (group / "cgroup.procs").write_text(str(pid))
                self.group = group
            except OSError:
                with contextlib.suppress(OSError):
                    group.rmdir()
        self.how = "cgroup v2 cgroup.freeze" if self.group else "SIGSTOP / SIGCONT"

    def freeze(self) -> None:
        if self.group is not None:
            (self.group / "cgroup.freeze").write_text("1")
            while b"frozen 1" not in (self.group / "cgroup.events").read_bytes():
                pass
            return
        os.kill(self.pid, signal.SIGSTOP)
        while Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "T":
            pass

    def thaw(self) -> None:
        if self.group is not None:
            (self.group / "cgroup.freeze").write_text("0")
        else:
            os.kill(self.pid, signal.SIGCONT)

    def close(self) -> None:
        if self.group is not None:
            with contextlib.suppress(OSError):
                (CGROUP2 / "cgroup.procs").write_text(str(self.pid))
                self.group.rmdir()


def spin_for(ns: int) -> None:
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


def summary(values: list[int]) -> dict[str, float]:
    us = sorted(v / 1e3 for v in values)
    over = sum(v - us[0] > 100 for v in us) / len(us)
    return {
        "medianUs": round(statistics.median(us), 1),
        "sdUs": round(statistics.stdev(us), 1),
        "p99Us": round(us[int(0.99 * (len(us) - 1))], 1),
        "maxUs": round(us[-1], 1),
        "over100UsAboveFastest": round(over, 4),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per mode (2000)")
    parser.add_argument("--pause-us", type=int, default=300, help="frozen pause (300 us)")
    parser.add_argument("--out", type=Path, help="also write the figures here (JSON)")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        return worker(args.worker)
    block = Control.create()
    process = subprocess.Popen([sys.executable, __file__, "--worker", str(block.fd)],
                               pass_fds=(block.fd,))  # fmt: skip
    freezer = Freezer(process.pid)
    found: dict[str, dict[str, list[int]]] = {
        mode: {"latency": [], "roundTrip": []} for mode in ("spin", "freeze")
    }
    try:
        for seq in range(1, 2 * args.calls + 1):
            mode = "freeze" if seq % 2 else "spin"
            if not block.wait(ARMED, seq, LONG, lambda: process.poll() is None):
                raise SystemExit(f"the worker did not arm call {seq}")
            if mode == "freeze":
                freezer.freeze()
                spin_for(args.pause_us * 1000)
                freezer.thaw()
            start = time.perf_counter_ns()
            block.set(GO, seq)
            if not block.wait(DONE, seq, LONG, lambda: process.poll() is None):
                raise SystemExit(f"the worker did not answer call {seq}")
            end = time.perf_counter_ns()
            found[mode]["latency"].append(block.get(CALL_NS) - start)
            found[mode]["roundTrip"].append(end - start)
    finally:
        block.set(GO, STOP)
        freezer.thaw()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=LONG + 5)
        if process.poll() is None:
            process.kill()
        freezer.close()
    figures = {mode: {part: summary(values) for part, values in parts.items()}
               for mode, parts in found.items()}  # fmt: skip
    print(f"{args.calls} calls per mode, interleaved; freezing by {freezer.how}, "
          f"{args.pause_us} us frozen; {os.cpu_count()} CPUs")  # fmt: skip
    print(f"{'mode':8} {'part':10} {'median':>8} {'sd':>8} {'p99':>8} {'max':>9}  >100us")
    for mode, parts in figures.items():
        for part, row in parts.items():
            print(f"{mode:8} {part:10} {row['medianUs']:8.1f} {row['sdUs']:8.1f} "
                  f"{row['p99Us']:8.1f} {row['maxUs']:9.1f}  "
                  f"{100 * row['over100UsAboveFastest']:5.1f} %")  # fmt: skip
    if args.out is not None:
        found_json = {"calls": args.calls, "pauseUs": args.pause_us, "freezing": freezer.how,
                      "figures": figures}  # fmt: skip
        args.out.write_text(json.dumps(found_json, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
