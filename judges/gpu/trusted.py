"""The trusted process of a GPU submission: inputs, reference, clock and check; never the candidate.

    python -m judges.gpu.trusted TRIAL.json

Started by the service (`judges.gpu.judge`) with the GPU chosen for this submission and the
candidate sandbox's cgroup descriptors. It starts the candidate's sandbox first, so that the
worker's interpreter, torch and CUDA context come up while this process does the same, checks
the GPU (a small product with a known result) and prepares every correctness test's inputs and
reference output (their seeds are fixed); once the worker has said hello (and waits, idle) it
times its idle probe (`judges.gpu.session`) and the protocol's own cost, has the candidate
imported, then:

- the correctness tests, one checked call each on the case's own seed;
- optionally (`determinism_check`) the first test's input once more, the two outputs compared
  bit for bit: a difference is flagged in the record, never failed (atomics are legitimate);
- a warm-up on the first benchmark (GPU MODE: until its calls took `warmup_time`);
- every benchmark: one checked untimed call (like every test's call, a first call of its shape:
  where kernels compile and autotune, limited by the package's `compile_budget` for all of
  them together, each at least by `call_timeout`), then timed calls, each on fresh inputs (the seed
  advanced by `seed_step` and combined with this submission's secret) and each checked, until
  GPU MODE's stopping rule (`judges.gpu.timing`) says enough; then the last timed call's output
  is compared once more (`Session.recheck`). A call charged less than the benchmark's hardware
  floor (`judges.gpu.limits`) fails it.

Nothing of the preparation overlaps a timed call: this process and the worker are the only
users of the GPU, and everything before the probe's calibration is done before the first call.
The first call that fails ends the trial (the remaining cases are not run). Results are JSON
lines appended to the results file as they happen (`meta`, `startup`, `case`, `warmup`,
`phases`, then `end`); the service builds the judge's record from them (`judges.gpu.record`).
A missing `end` line means this process failed, which the service reports as the judge's fault,
never the candidate's.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import importlib.util
import itertools
import json
import platform
import resource
import select
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judges.gpu import case_calibration
from judges.gpu.launch import CandidateProcess, LaunchSpec
from judges.gpu.package import GpuCase, GpuSettings
from judges.gpu.sandboxed.channel import Channel
from judges.gpu.sandboxed.control import Control
from judges.gpu.timing import StoppingRule, combine_seed, stats

if TYPE_CHECKING:  # imported once the candidate's sandbox is starting (run)
    from judges.gpu import session as calls

BELOW_FLOOR = "Time Below Hardware Floor"


class Phases:
    """Wall-clock marks of the trial's parts, in seconds from the service's start of it."""

    def __init__(self, origin: float) -> None:
        self.origin = origin
        self.marks: dict[str, float] = {}

    def mark(self, name: str) -> None:
        self.marks[name] = round(time.time() - self.origin, 4)

    def rebase(self, origin: float) -> None:
        """Count from `origin` (a spare's trial start): earlier marks become negative."""
        self.marks = {k: round(v + self.origin - origin, 4) for k, v in self.marks.items()}
        self.origin = origin


class NoSubmission(Exception):
    """A spare whose service ended it before handing it a submission."""


class Results:
    """The results file: one JSON object per line, flushed as written."""

    def __init__(self, path: Path) -> None:
        self.file = open(path, "a")  # noqa: SIM115 - closed at exit

    def write(self, event: str, **fields: Any) -> None:
        self.file.write(json.dumps({"event": event, **fields}) + "\n")
        self.file.flush()


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[1]).read_text())
    phases = Phases(float(spec.get("origin", time.time())))
    phases.mark("trustedStarted")
    results = Results(Path(spec["results"]))
    _die_with_parent()
    soft_limits()
    try:
        run(spec, results, phases)
    except NoSubmission:
        return 0
    except Exception as error:  # the trusted process failing is the judge's fault
        results.write(
            "end",
            status="judge_error",
            error=f"{type(error).__name__}: {error}\n{traceback.format_exc()[-3000:]}",
        )
        return 1
    return 0


def run(spec: dict[str, Any], results: Results, phases: Phases) -> None:
    settings = GpuSettings(**{**spec["settings"], "reference": Path(spec["settings"]["reference"])})
    cases = [GpuCase(c["kind"], c["index"], c["spec"]) for c in spec["cases"]]
    launch = LaunchSpec(
        **{
            **spec["launch"],
            "device_nodes": tuple(spec["launch"]["device_nodes"]),
            "python_dirs": tuple(spec["launch"]["python_dirs"]),
            "cgroup_dirs": tuple(spec["launch"]["cgroup_dirs"]),
        }
    )
    block = Control.create()
    link, theirs = Channel.pair()
    workdir = Path(spec["workdir"])
    candidate = CandidateProcess(
        launch,
        block.fd,
        theirs.fileno(),
        tuple(spec["procs_fds"]),
        workdir / "candidate.out",
        workdir / "candidate.err",
    )
    theirs.close()
    phases.mark("sandboxStarted")
    try:
        _judge(spec, settings, cases, launch, block, link, candidate, results, phases)
    finally:
        candidate.kill()


def _judge(
    spec: dict[str, Any],
    settings: GpuSettings,
    cases: list[GpuCase],
    launch: LaunchSpec,
    block: Control,
    link: Channel,
    candidate: CandidateProcess,
    results: Results,
    phases: Phases,
) -> None:
    """Everything after the sandbox's start (module docstring), while the worker comes up."""
    import torch  # noqa: F401 - the worker imports its own meanwhile

    from judges.gpu import fused_compare, limits
    from judges.gpu import session as calls
    from judges.gpu.sandboxed import transport as transports

    share = transports.make(launch.backend)
    device = share.device
    phases.mark("context")
    # Triton's import and the comparison kernel's load run beside the self-test and the tests'
    # preparation (mostly waits for the GPU), all before anything is timed.
    warming = concurrent.futures.ThreadPoolExecutor(1).submit(fused_compare.warm, device)
    healthy = self_test(device, share.synchronize)
    if healthy is not None:
        results.write("end", status="judge_error", error=f"GPU self-test failed: {healthy}")
        return
    reference = _load(settings.reference)
    prepared = prepare_tests(reference, cases, device, share.synchronize)
    comparison = "fused" if warming.result() else "torch"
    peaks = limits.choose(
        limits.query_cuda() if device == "cuda" else limits.Peaks(),
        settings.peak_bandwidth,
        settings.peak_flops,
    )
    phases.mark("testsPrepared")
    probe = calls.IdleProbe(device, share.synchronize) if device == "cuda" else None
    judge = calls.Session(
        share,
        block,
        link,
        candidate,
        probe,
        settings.call_timeout,
        settings.rtol,
        settings.atol,
        settings.compile_budget,
    )
    try:
        started = judge.wait_hello(settings.startup_timeout)
        phases.mark("workerHello")
        # the worker now waits for a message: the GPU is this process's alone
        calibrated_probe = probe.calibrate() if probe and started.passed else None
        calibration = judge.calibrate() if started.passed else {}
        kept = case_calibration.Kept.from_spec(spec.get("keptCalibration"))
        if kept is not None and not (
            kept.covers(cases) and kept.age() < case_calibration.KEPT_FOR_S
        ):
            kept = None
        calibrating = started.passed and "failed" not in calibration
        if calibrating:
            calibration["cases"] = (
                case_calibration.use(judge, kept)
                if kept is not None
                else case_calibration.measure(judge, reference, cases, device)
            )
        phases.mark("casesCalibrated")
        if spec.get("spare"):  # prepared ahead (judges.gpu.trial_process): now the submission
            (Path(spec["workdir"]) / "waiting").touch()
            expires = None if kept is None else case_calibration.KEPT_FOR_S - kept.age()
            go = _wait_go(expires)
            if go is None and calibrating:  # the kept ones expired, the GPU still idle
                calibration["cases"] = case_calibration.measure(judge, reference, cases, device)
            if go is None:
                go = _wait_go(None)
            if not go:
                raise NoSubmission
            spec.update(json.loads(go))
            phases.rebase(float(spec["origin"]))
            if calibrating:  # the plain offsets, now
                calibrated_probe = probe.calibrate() if probe else None
                calibration = {**judge.calibrate(), "cases": calibration["cases"]}
        results.write(
            "meta",
            **versions(device),
            probe=calibrated_probe,
            peaks=peaks.to_json(),
            comparison=comparison,
        )
        phases.mark("calibrated")
        failed = [c for c in [calibration, *calibration.get("cases", {}).values()] if "failed" in c]
        if failed:
            failure = f"the judge's own calibration calls failed: {failed[0]['failed']}"
            results.write("end", status="judge_error", error=failure)
            return
        for index, offsets in judge.case_offsets().items():
            calibration["cases"][index].update(offsets)
        if started.passed:
            started = judge.wait_ready(settings.startup_timeout)
        phases.mark("candidateImported")
        results.write(
            "startup",
            status=started.status,
            detail=started.detail,
            freezing=candidate.freezing,
            calibration=calibration,
        )
        if started.passed:
            context = Trial(
                judge,
                reference,
                settings,
                int(spec["secret"]),
                results,
                device,
                prepared,
                peaks,
                phases,
            )
            context.run(cases)
    finally:
        candidate.kill()  # nothing of the candidate is wanted now: no polite exit to wait for
    results.write("phases", **phases.marks)
    results.write("end", status="done", healthyAfter=self_test(device, share.synchronize))


# a timed call's figures in the trace (the package's `trace_calls`), in this order
TRACED = ("chargedUs", "clockUs", "earlyUs", "lateUs", "windowUs", "workerCallUs", "workerSyncUs")
# and where each call's wall time went on the host: the inputs generated and the reference
# computed, then the steps of `Session.call` (`Session.steps`), then the whole call
HOST_STEPS = ("inputs", "pack", "arm", "before", "describe", "check")
TRACED_HOST = (*(f"{step}Us" for step in HOST_STEPS), "wallUs")
# and where the benchmark's wall time went: its first inputs and pool, its untimed first call,
# the timed calls, the second check (with the next benchmark's first inputs in its pause), the
# pool's release
BENCHMARK_STEPS = ("setup", "firstCall", "calls", "recheck", "release")


def _wait_go(timeout: float | None) -> str | None:
    """A spare's go line from the service (empty: its stdin closed), or None when `timeout`
    seconds passed first."""
    if timeout is not None:
        ready, _, _ = select.select([sys.stdin], [], [], max(0.0, timeout))
        if not ready:
            return None
    return sys.stdin.readline()


def prepare_tests(reference: Any, cases: list[GpuCase], device: str, sync: Any) -> dict:
    """Every correctness test's inputs and reference output (their seeds are fixed), made
    while the worker starts: (kind, index) -> (data, expected)."""
    prepared = {}
    for case in cases:
        if case.kind == "test":
            data = reference.generate_input(device, **case.spec)
            prepared[(case.kind, case.index)] = (data, reference.ref_kernel(data))
    sync()
    return prepared


class Trial:
    """Tests, the determinism check, warm-up, benchmarks; stops at the first failing call."""

    def __init__(
        self,
        judge: calls.Session,
        reference: Any,
        settings: GpuSettings,
        secret: int,
        results: Results,
        device: str,
        prepared: dict,
        peaks: Any,
        phases: Phases,
    ) -> None:
        self.judge, self.reference, self.settings = judge, reference, settings
        self.secret, self.results, self.device = secret, results, device
        self.prepared, self.peaks, self.phases = prepared, peaks, phases
        self.work = getattr(reference, "minimum_work", None)
        self.ahead: dict[tuple[int, int], tuple[Any, Any]] = {}
        self.steps: dict[str, int] = {}

    def inputs(self, case: GpuCase, seed: int) -> tuple[Any, Any]:
        """A call's data and reference output; made in the last pause when it was
        (`prepare_first`)."""
        found = self.ahead.pop((case.index, seed), None)
        if found is not None:
            return found
        data = self.reference.generate_input(self.device, **{**case.spec, "seed": seed})
        return data, self.reference.ref_kernel(data)

    def prepare_first(self, case: GpuCase, secret: int) -> Any:
        """What to do in a second check's pause: make `case`'s first (untimed) call's inputs
        and expected output, so that nothing of it waits for the GPU later."""

        def meanwhile() -> None:
            seed = combine_seed(case.spec["seed"], secret)
            self.ahead[(case.index, seed)] = self.inputs(case, seed)

        return meanwhile

    def call(self, case: GpuCase, seed: int) -> calls.CallOutcome:
        """One call on a fresh input; its host steps in `self.steps` (ns)."""
        started = time.perf_counter_ns()
        data, expected = self.inputs(case, seed)
        inputs = time.perf_counter_ns() - started
        outcome = self.judge.call(data, expected)
        self.steps = {
            "inputs": inputs,
            **self.judge.steps,
            "wall": time.perf_counter_ns() - started,
        }
        return outcome

    def floor_ns(self, case: GpuCase) -> float:
        return self.peaks.floor_ns(self.work(**case.spec)) if self.work else 0.0

    def run(self, cases: list[GpuCase]) -> None:
        judge, results, settings = self.judge, self.results, self.settings
        for case in cases:
            if case.kind != "test":
                continue
            data, expected = self.prepared[(case.kind, case.index)]
            outcome = judge.setup_case(data)
            if outcome.passed:  # untimed: a first call of its shape (the compile budget)
                outcome = judge.call(data, expected, first=True)
            judge.release_case(ended=not outcome.passed)
            results.write("case", **case.to_json(), **_outcome(outcome), calls=1)
            if not outcome.passed:
                return
        self.phases.mark("tests")
        if settings.determinism_check:
            results.write(
                "determinism", **self.determinism(next(c for c in cases if c.kind == "test"))
            )
        benchmarks = [case for case in cases if case.kind == "benchmark"]
        warm = benchmarks[0]
        rule = StoppingRule(
            settings.min_repeats,
            settings.max_repeats,
            settings.target_error,
            settings.warmup_seconds * 1e9,
            settings.benchmark_wall * 1e9,
        )
        outcome, durations, _ = self.timed(
            warm, rule, self.secret ^ 0x5A5A, self.prepare_first(warm, self.secret)
        )
        results.write("warmup", calls=len(durations), status=outcome.status, detail=outcome.detail)
        self.phases.mark("warmup")
        if not outcome.passed:
            results.write("case", **warm.to_json(), **_outcome(outcome), calls=len(durations))
            return
        rule = StoppingRule(
            settings.min_repeats,
            settings.max_repeats,
            settings.target_error,
            settings.benchmark_seconds * 1e9,
            settings.benchmark_wall * 1e9,
        )
        for case, following in zip(benchmarks, [*benchmarks[1:], None], strict=True):
            meanwhile = self.prepare_first(following, self.secret) if following else None
            outcome, durations, charges = self.timed(case, rule, self.secret, meanwhile)
            fields = _outcome(outcome)
            if outcome.passed:
                fields["stats"] = stats(durations).to_json()
                fields["charged"] = charges
            results.write("case", **case.to_json(), **fields, calls=len(durations) + 1)
            if not outcome.passed:
                return
        self.phases.mark("benchmarks")

    def determinism(self, case: GpuCase) -> dict[str, Any]:
        """The test's input twice in one pool: are the two outputs the same, bit for bit?"""
        import torch

        data, expected = self.prepared[(case.kind, case.index)]
        copies = []
        outcome = self.judge.setup_case(data)
        for _ in range(2):
            if outcome.passed:
                outcome = self.judge.call(data, expected)
                if outcome.passed and self.judge.last is not None:
                    copies.append(self.judge.last[2].to(torch.float32))
        self.judge.release_case()
        found: dict[str, Any] = {"test": case.index, "checked": len(copies) == 2}
        if len(copies) == 2:
            first, second = copies
            differ = (first != second) & ~(torch.isnan(first) & torch.isnan(second))
            found["differing"] = int(differ.count_nonzero().item())
            found["identical"] = found["differing"] == 0
            finite = (first - second).abs()
            finite = finite[torch.isfinite(finite)]
            found["maxDifference"] = float(finite.max().item()) if finite.numel() else 0.0
        return found

    def timed(self, case: GpuCase, rule: StoppingRule, secret: int, meanwhile: Any = None) -> Any:
        """One checked untimed call, then timed calls until `rule` stops them, then the last
        one's output checked again (`meanwhile` done in that check's pause); the first
        failure (a call below the case's hardware floor too) ends it. The case's own
        calibrated offsets apply (`Session.use_case`). Returns (last outcome, charged
        durations, charge summary)."""
        from judges.gpu import session as calls

        judge, settings = self.judge, self.settings
        durations: list[float] = []
        floor = self.floor_ns(case)
        charges = {
            "earlyNs": 0,
            "lateNs": 0,
            "windowNs": 0,
            "callsCharged": 0,
            "clockNs": 0,
            "workerCallNs": 0,
            "workerSyncNs": 0,
            "workerExportNs": 0,
            "floorNs": round(floor),
        }
        trace: dict[str, list[float]] | None = (
            {name: [] for name in (*TRACED, *TRACED_HOST)} if (settings.trace_calls) else None
        )
        marks = [time.perf_counter_ns()]  # the benchmark's own steps, for the trace
        judge.use_case(case.index)
        data, expected = self.inputs(case, combine_seed(case.spec["seed"], secret))
        outcome = judge.setup_case(data)
        marks.append(time.perf_counter_ns())
        if outcome.passed:
            outcome = judge.call(data, expected, first=True)
        del data, expected
        started = time.perf_counter_ns()
        marks.append(started)
        step = 0
        while outcome.passed and not rule.done(durations, time.perf_counter_ns() - started):
            step += 1
            outcome = self.call(
                case, combine_seed(case.spec["seed"] + settings.seed_step * step, secret)
            )
            if outcome.passed and outcome.charged_ns < floor:
                outcome = calls.CallOutcome(
                    BELOW_FLOOR,
                    f"a timed call was charged {outcome.charged_ns / 1e3:.3f} us, below this "
                    f"benchmark's hardware floor of {floor / 1e3:.3f} us (its minimum bytes at "
                    f"the peak bandwidth, its minimum FLOPs at the peak throughput: "
                    f"{self.peaks.to_json()}); a time no kernel can reach is a hole in the "
                    "timing, not ranked",
                    outcome.charged_ns,
                    outcome.clock_ns,
                )
            if outcome.passed:
                durations.append(outcome.charged_ns)
                charges["earlyNs"] += outcome.early_ns
                charges["lateNs"] += outcome.late_ns
                charges["windowNs"] += outcome.window_ns
                charges["clockNs"] += outcome.clock_ns
                charges["callsCharged"] += bool(outcome.early_ns or outcome.late_ns)
                for key, value in zip(
                    ("workerCallNs", "workerSyncNs", "workerExportNs"),
                    outcome.worker_ns,
                    strict=True,
                ):
                    charges[key] += value
                if trace is not None:
                    values = (
                        outcome.charged_ns,
                        outcome.clock_ns,
                        outcome.early_ns,
                        outcome.late_ns,
                        outcome.window_ns,
                        *outcome.worker_ns[:2],
                    )
                    for name, value in zip(TRACED, values, strict=True):
                        trace[name].append(round(value / 1e3, 1))
                    for name in (*HOST_STEPS, "wall"):
                        trace[f"{name}Us"].append(round(self.steps.get(name, 0) / 1e3, 1))
        marks.append(time.perf_counter_ns())
        if outcome.passed and durations:
            outcome = judge.recheck(meanwhile)
        marks.append(time.perf_counter_ns())
        judge.release_case(ended=not outcome.passed)
        judge.use_case(None)
        marks.append(time.perf_counter_ns())
        if trace is not None:
            charges["trace"] = trace
            charges["steps"] = {
                f"{name}Ms": round((b - a) / 1e6, 2)
                for name, (a, b) in zip(BENCHMARK_STEPS, itertools.pairwise(marks), strict=True)
            }
        return outcome, durations, charges


def _outcome(outcome: calls.CallOutcome) -> dict[str, Any]:
    return {
        "runStatus": outcome.status,
        "detail": outcome.detail,
        "durationNs": outcome.charged_ns,
        "clockNs": outcome.clock_ns,
        "maxError": outcome.max_error,
    }


def self_test(device: str, sync: Any) -> str | None:
    """None when a 512 x 512 product of ones gives 512 everywhere, else what went wrong."""
    import torch

    try:
        ones = torch.ones((512, 512), device=device)
        product = ones @ ones
        sync()
        if not bool((product == 512).all().item()):
            return "a 512 x 512 product of ones is not 512 everywhere"
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return None


def versions(device: str) -> dict[str, Any]:
    import torch

    found: dict[str, Any] = {"torch": torch.__version__, "python": platform.python_version()}
    if device == "cuda":
        found["gpu"] = torch.cuda.get_device_name(0)
        found["cuda"] = torch.version.cuda
        with contextlib.suppress(OSError, IndexError):
            line = Path("/proc/driver/nvidia/version").read_text().splitlines()[0]
            found["driver"] = line.split("  ")[1].strip() if "  " in line else line
        with contextlib.suppress(Exception):
            import triton

            found["triton"] = triton.__version__
    else:
        found["gpu"] = "none (CPU stand-in)"
    return found


def soft_limits() -> None:
    """No core dumps, and a cap on file sizes, for this process and the sandbox it starts."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 30, 1 << 30))


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _load(path: Path) -> Any:
    module_spec = importlib.util.spec_from_file_location("gpu_reference", path)
    if module_spec is None or module_spec.loader is None:
        raise ImportError(f"cannot load the reference module {path}")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    sys.exit(main(sys.argv))
