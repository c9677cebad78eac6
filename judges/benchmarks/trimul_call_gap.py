"""How much longer a candidate's call takes on the host when the process was busy with something
else just before it: the judge's worker waits for each call (its inputs are generated, copied
and probed meanwhile), a plain CUDA-event loop calls back to back.

    python judges/benchmarks/trimul_call_gap.py [CANDIDATE.py] [--gaps 0,0.5,2,5,20] [--calls 40]

One process: the candidate (by default the `torch.compile` one of the device test's honest set)
is imported, called once on each test case of the task (as the judge does), then on the first
benchmark's shape over and over, the gaps taking turns; before each call the process spins in a
Python loop for the gap (milliseconds), as the worker spins for GO. Prints, per gap, the median
host time of the call (from entering `custom_kernel` to its return, the judge's `workerCallUs`)
and its ratio to the shortest gap's. On the GPU (when CUDA is available) the call's launch path
is what is timed; on the CPU the whole call (on the task's smallest test, the candidate running
eagerly there). judges/MEASUREMENTS.md has the figures.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from trimul_event_loop import load  # this folder (the script's) is on the path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "harbor" / "trimul" / "judge" / "trimul"
DEFAULT = REPO / "judges" / "tests" / "programs" / "trimul" / "torch_compile.py"


def busy(seconds: float) -> None:
    """Spin in Python for `seconds`, as the worker spins for GO."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("candidate", type=Path, nargs="?", default=DEFAULT)
    parser.add_argument("--gaps", default="0,0.5,2,5,20", help="milliseconds, comma-separated")
    parser.add_argument("--calls", type=int, default=40, help="timed calls per gap")
    args = parser.parse_args()
    import yaml

    device = "cuda" if torch.cuda.is_available() else "cpu"
    reference = load(PACKAGE / "reference.py", "reference")
    kernel = load(args.candidate, "candidate").custom_kernel
    cases = yaml.safe_load((PACKAGE / "cases.yaml").read_text())
    if device == "cpu":  # the task's shapes take seconds on a CPU: its smallest test instead
        cases["benchmarks"] = [min(cases["tests"], key=lambda c: c["bs"] * c["seqlen"] ** 2)]
        cases["tests"] = cases["benchmarks"]
    for case in cases["tests"]:
        kernel(reference.generate_input(device, **case))
    case = cases["benchmarks"][0]
    gaps = [float(g) for g in args.gaps.split(",")]
    host: dict[float, list[float]] = {gap: [] for gap in gaps}
    for k in range(args.calls + 1):  # the gaps interleaved, so that drift falls on all alike
        for n, gap in enumerate(gaps):
            seed = case["seed"] + k * len(gaps) + n
            data = reference.generate_input(device, **{**case, "seed": seed})
            if device == "cuda":
                torch.cuda.synchronize()
            busy(gap / 1e3)
            started = time.perf_counter_ns()
            kernel(data)
            if k:  # the first round warms up
                host[gap].append((time.perf_counter_ns() - started) / 1e3)
            if device == "cuda":
                torch.cuda.synchronize()
    medians = {gap: statistics.median(found) for gap, found in host.items()}
    base = medians[min(medians)]
    print(f"{args.candidate.name} on {device}, {args.calls} calls per gap, host time of a call:")
    for gap, median in medians.items():
        print(f"  after {gap:g} ms busy: {median:9.1f} us  ({median / base:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
