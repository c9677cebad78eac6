"""What lengthens a candidate's call on the host in the judge's worker: the wait before it, how
the process waits, or where its inputs lie. The worker waits for each call (its inputs and
reference are made meanwhile, then copied into a pool of the trusted process's memory that the
worker maps with CUDA IPC); a plain CUDA-event loop calls back to back on inputs of its own.

    python judges/benchmarks/trimul_call_gap.py [CANDIDATE.py] [--gaps 0,busy:20,...]
        [--calls 40] [--benchmark N]

One process: the candidate (by default the `torch.compile` one of the device test's honest set)
is imported, called once on each test case of the task and each benchmark (as the judge does),
then on one benchmark's shape over and over, the gaps taking turns. A gap is what the process
does just before the call: `0` nothing (fresh inputs, then the call), `busy:MS` spin in Python
(as the worker spins for GO, and on a GPU polls for its next message), `sleep:MS` sleep (as
the worker waits once it has polled for 0.5 s, and waited for every message before 31f5e5e),
`gpubusy:MS` spin as long while a GPU kernel of this process runs nearly as long, `warm:MS`
as long launch tiny operations of its own (an add to a 16 x 16 tensor, its product by itself),
then wait for them (what a worker could do while it waits, to keep its launch path warm),
gaps joined by `+` one after the other (`warm:20+busy:1`: the launch path kept warm, then a
short spin), `reference` compute the reference output of the inputs (GPU MODE's leaderboard
mode and the judge make it between calls), `collect` run the cyclic garbage collector and
freeze what survives (as the worker does before each call), `pool` the inputs as views of one
flat allocation of this process made with cuMemAlloc, `ipc` the same in an allocation of
another process mapped with CUDA IPC (the worker's inputs). Prints, per gap, the median host
time of the call (from entering `custom_kernel` to its return, the judge's `workerCallUs`), its
ratio to the first gap's, and the median CUDA-event time of the call. On the CPU (no CUDA) the
whole call is timed, on the task's smallest test (the candidate running eagerly there), and
`pool`, `ipc` and `gpubusy` are left out.
judges/MEASUREMENTS.md has the figures.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from trimul_event_loop import load  # this folder (the script's) is on the path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
PACKAGE = REPO / "harbor" / "trimul" / "judge" / "trimul"
DEFAULT = REPO / "judges" / "tests" / "programs" / "trimul" / "torch_compile.py"
GPU_ONLY = ("pool", "ipc")
# A child that allocates device memory and exports it (the trusted process's part), then waits.
EXPORTER = """
import sys
sys.path.insert(0, sys.argv[1])
import torch
from judges.gpu.sandboxed.transport import CudaDriver
torch.empty(1, device="cuda")
driver = CudaDriver()
pointer = driver.alloc(int(sys.argv[2]))
print(driver.export(pointer).hex(), flush=True)
sys.stdin.read()
"""


def warm(seconds: float, device: str) -> None:
    """Launch tiny operations of our own for `seconds`, then wait for them."""
    scratch = torch.zeros((16, 16), device=device)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        scratch.add_(1.0)
        torch.mm(scratch, scratch)
    if device == "cuda":
        torch.cuda.synchronize()


def busy(seconds: float) -> None:
    """Spin in Python for `seconds`, as the worker spins for GO."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class Pools:
    """Flat device allocations outside PyTorch's allocator, this process's (`pool`) and another's
    mapped with CUDA IPC (`ipc`), each big enough for one call's inputs."""

    def __init__(self, nbytes: int) -> None:
        from judges.gpu.sandboxed.transport import CudaDriver, device_bytes

        self.driver = CudaDriver()
        self.own = device_bytes(self.driver.alloc(nbytes), nbytes)
        self.child = subprocess.Popen(
            [sys.executable, "-c", EXPORTER, str(REPO), str(nbytes)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.child.stdout is not None
        handle = bytes.fromhex(self.child.stdout.readline().strip())
        self.mapped = device_bytes(self.driver.open(handle), nbytes)

    def place(self, data, where: str):
        """`data` again, its tensors views of the chosen allocation (as the worker's are)."""
        from judges.gpu.sandboxed import layout

        pool = self.own if where == "pool" else self.mapped
        tree, tensors, _ = layout.flatten(data)
        layout.pack(pool, tree, tensors)
        return layout.rebuild(tree, pool)

    def close(self) -> None:
        assert self.child.stdin is not None
        self.child.stdin.close()
        self.child.wait()


class Gap:
    """What the process does before a call (the module docstring names the gaps)."""

    def __init__(self, reference, device: str, pools: Pools | None) -> None:
        self.reference, self.device, self.pools = reference, device, pools
        self.cycles_per_ms = gpu_cycles_per_ms() if device == "cuda" else 0.0

    def inputs(self, gap: str, case: dict, seed: int):
        """The call's data, after the gap's work on it (the spin or sleep is `wait`'s)."""
        data = self.reference.generate_input(self.device, **{**case, "seed": seed})
        if self.pools is not None and gap in GPU_ONLY:
            data = self.pools.place(data, gap)
        if gap == "reference":
            self.reference.ref_kernel(data)
        elif gap == "collect":
            gc.collect()
            gc.freeze()
        if self.device == "cuda":
            torch.cuda.synchronize()
        return data

    def wait(self, gap: str) -> None:
        for part in gap.split("+"):  # `warm:20+busy:1`: one after the other
            self._wait(part)

    def _wait(self, gap: str) -> None:
        how, _, ms = gap.partition(":")
        if how == "gpubusy":  # the GPU kept busy for nearly the whole spin
            torch.cuda._sleep(int(float(ms) * 0.95 * self.cycles_per_ms))
        if how in ("busy", "gpubusy"):
            busy(float(ms) / 1e3)
        elif how == "sleep":
            time.sleep(float(ms) / 1e3)
        elif how == "warm":
            warm(float(ms) / 1e3, self.device)


def gpu_cycles_per_ms() -> float:
    """How many cycles of `torch.cuda._sleep` take a millisecond on this GPU."""
    start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    torch.cuda._sleep(1_000_000)
    start.record()
    torch.cuda._sleep(10_000_000)
    end.record()
    torch.cuda.synchronize()
    return 10_000_000 / start.elapsed_time(end)


def profile(kernel, gaps: list[str], make: Gap, case: dict) -> None:
    """Profile 10 calls after each gap (the call only); print the host's operations with the
    most time of their own, summed over the calls."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as profiler

    activities = [ProfilerActivity.CPU]
    if make.device == "cuda":
        activities.append(ProfilerActivity.CUDA)  # the runtime's and driver's calls
    for gap in gaps:
        own: dict[str, list[float]] = {}
        for k in range(10):
            data = make.inputs(gap, case, case["seed"] + 10_000 + k)
            make.wait(gap)
            with profiler(activities=activities) as found:
                kernel(data)
            if make.device == "cuda":
                torch.cuda.synchronize()
            for event in found.key_averages():
                entry = own.setdefault(event.key, [0.0, 0])
                entry[0] += event.self_cpu_time_total
                entry[1] += event.count
        print(f"after {gap}, 10 calls: the host's top operations, own time (us) and count")
        for key, (us, count) in sorted(own.items(), key=lambda item: -item[1][0])[:14]:
            print(f"  {us:10.1f} {count:6d}  {key[:70]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("candidate", type=Path, nargs="?", default=DEFAULT)
    parser.add_argument("--gaps", default="0,busy:20,sleep:20,reference,collect,pool,ipc",
                        help="comma-separated: 0, busy:MS, gpubusy:MS, sleep:MS, warm:MS, "
                        "reference, collect, pool, ipc (default: %(default)s)")  # fmt: skip
    parser.add_argument("--calls", type=int, default=40, help="timed calls per gap")
    parser.add_argument("--benchmark", type=int, default=0, help="which benchmark's shape (0-6)")
    parser.add_argument(
        "--blocks",
        action="store_true",
        help="all calls of one gap, then the next's, rather than taking turns",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="then profile 10 calls after each gap: the host's top operations",
    )
    args = parser.parse_args()
    import yaml

    device = "cuda" if torch.cuda.is_available() else "cpu"
    reference = load(PACKAGE / "reference.py", "reference")
    kernel = load(args.candidate, "candidate").custom_kernel
    cases = yaml.safe_load((PACKAGE / "cases.yaml").read_text())
    gaps = args.gaps.split(",")
    if device == "cpu":  # the task's shapes take seconds on a CPU: its smallest test instead
        cases["benchmarks"] = [min(cases["tests"], key=lambda c: c["bs"] * c["seqlen"] ** 2)]
        cases["tests"] = cases["benchmarks"]
        gaps = [gap for gap in gaps if gap not in GPU_ONLY and not gap.startswith("gpubusy")]
    for case in cases["tests"] + cases["benchmarks"]:
        kernel(reference.generate_input(device, **case))
    case = cases["benchmarks"][min(args.benchmark, len(cases["benchmarks"]) - 1)]
    pools = None
    if any(gap in GPU_ONLY for gap in gaps):
        from judges.gpu.sandboxed import layout

        pools = Pools(layout.flatten(reference.generate_input(device, **case))[2])
    make = Gap(reference, device, pools)
    host: dict[str, list[float]] = {gap: [] for gap in gaps}
    gpu: dict[str, list[float]] = {gap: [] for gap in gaps}
    turns = [[(k, n) for n in range(len(gaps))] for k in range(args.calls + 1)]
    if args.blocks:
        turns = [[(k, n) for k in range(args.calls + 1)] for n in range(len(gaps))]
    try:
        for turn in turns:  # by default interleaved, so that drift falls on all gaps alike
            for k, n in turn:
                gap = gaps[n]
                data = make.inputs(gap, case, case["seed"] + k * len(gaps) + n)
                make.wait(gap)
                if device == "cuda":
                    start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
                    start.record()
                started = time.perf_counter_ns()
                kernel(data)
                called = time.perf_counter_ns() - started
                if device == "cuda":
                    end.record()
                    torch.cuda.synchronize()
                if k:  # the first of each gap warms up
                    host[gap].append(called / 1e3)
                    gpu[gap].append(start.elapsed_time(end) * 1e3 if device == "cuda" else 0.0)
        if args.profile:
            profile(kernel, gaps, make, case)
    finally:
        if pools is not None:
            pools.close()
    base = statistics.median(host[gaps[0]])
    order = "in blocks" if args.blocks else "taking turns"
    print(f"{args.candidate.name} on {device}, benchmark {case}, {args.calls} calls per gap, "
          f"{order}:")  # fmt: skip
    for gap in gaps:
        median = statistics.median(host[gap])
        print(f"  {gap:>12}: host {median:9.1f} us ({median / base:.2f}x), "
              f"events {statistics.median(gpu[gap]):9.1f} us")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
