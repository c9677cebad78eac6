"""The trusted process of a GPU submission: inputs, reference, clock and check; never the candidate.

    python -m judges.gpu.trusted TRIAL.json

Started by the service (`judges.gpu.judge`) with the GPU chosen for this submission and the
candidate sandbox's cgroup descriptors. It checks the GPU (a small product with a known
result) and times its idle probe (`judges.gpu.session`), starts the candidate's sandbox, then:

- the correctness tests, one checked call each on the case's own seed;
- a warm-up on the first benchmark (GPU MODE: until its calls took `warmup_time`);
- every benchmark: one checked untimed call, then timed calls, each on fresh inputs (the seed
  advanced by `seed_step` and combined with this submission's secret) and each checked, until
  GPU MODE's stopping rule (`judges.gpu.timing`) says enough.

The first call that fails ends the trial (the remaining cases are not run). Results are JSON
lines appended to the results file as they happen (`meta`, `case`, `warmup`, then `end`); the
service builds the judge's record from them (`judges.gpu.record`). A missing `end` line means
this process failed, which the service reports as the judge's fault, never the candidate's.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import json
import platform
import resource
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

from judges.gpu import session as calls
from judges.gpu.launch import CandidateProcess, LaunchSpec
from judges.gpu.package import GpuCase, GpuSettings
from judges.gpu.sandboxed import transport as transports
from judges.gpu.sandboxed.channel import Channel
from judges.gpu.sandboxed.control import Control
from judges.gpu.timing import StoppingRule, combine_seed, stats


class Results:
    """The results file: one JSON object per line, flushed as written."""

    def __init__(self, path: Path) -> None:
        self.file = open(path, "a")  # noqa: SIM115 - closed at exit

    def write(self, event: str, **fields: Any) -> None:
        self.file.write(json.dumps({"event": event, **fields}) + "\n")
        self.file.flush()


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[1]).read_text())
    results = Results(Path(spec["results"]))
    _die_with_parent()
    soft_limits()
    try:
        run(spec, results)
    except Exception as error:  # the trusted process failing is the judge's fault
        results.write(
            "end",
            status="judge_error",
            error=f"{type(error).__name__}: {error}\n{traceback.format_exc()[-3000:]}",
        )
        return 1
    return 0


def run(spec: dict[str, Any], results: Results) -> None:
    settings = GpuSettings(**{**spec["settings"], "reference": Path(spec["settings"]["reference"])})
    cases = [GpuCase(c["kind"], c["index"], c["spec"]) for c in spec["cases"]]
    reference = _load(settings.reference)
    launch = LaunchSpec(**{**spec["launch"], "device_nodes": tuple(spec["launch"]["device_nodes"]),
                           "python_dirs": tuple(spec["launch"]["python_dirs"]),
                           "cgroup_dirs": tuple(spec["launch"]["cgroup_dirs"])})  # fmt: skip
    share = transports.make(launch.backend)
    device = share.device
    healthy = self_test(device, share.synchronize)
    if healthy is not None:
        results.write("end", status="judge_error", error=f"GPU self-test failed: {healthy}")
        return
    probe = calls.IdleProbe(device, share.synchronize) if device == "cuda" else None
    results.write("meta", **versions(device), probe=probe.calibrate() if probe else None)
    block = Control.create()
    link, theirs = Channel.pair()
    workdir = Path(spec["workdir"])
    candidate = CandidateProcess(
        launch, block.fd, theirs.fileno(), tuple(spec["procs_fds"]),
        workdir / "candidate.out", workdir / "candidate.err",
    )  # fmt: skip
    theirs.close()
    judge = calls.Session(share, block, link, candidate, probe, settings.call_timeout,
                          settings.rtol, settings.atol)  # fmt: skip
    try:
        started = judge.wait_hello(settings.startup_timeout)
        calibration = judge.calibrate() if started.passed else {}
        if "failed" in calibration:
            failure = f"the judge's own calibration calls failed: {calibration}"
            results.write("end", status="judge_error", error=failure)
            return
        if started.passed:
            started = judge.wait_ready(settings.startup_timeout)
        results.write("startup", status=started.status, detail=started.detail,
                      freezing=candidate.freezing, calibration=calibration)  # fmt: skip
        if started.passed:
            trial(judge, reference, cases, settings, int(spec["secret"]), results, device)
    finally:
        judge.shutdown()
    results.write("end", status="done", healthyAfter=self_test(device, share.synchronize))


def trial(judge: calls.Session, reference: Any, cases: list[GpuCase], settings: GpuSettings,
          secret: int, results: Results, device: str) -> None:  # fmt: skip
    """Tests, warm-up, benchmarks; stops at the first failing call."""
    generate, expected_of = reference.generate_input, reference.ref_kernel

    def one_call(case: GpuCase, seed: int) -> calls.CallOutcome:
        data = generate(device, **{**case.spec, "seed": seed})
        expected = expected_of(data)
        return judge.call(data, expected)

    def setup(case: GpuCase) -> calls.CallOutcome:
        return judge.setup_case(generate(device, **case.spec))

    for case in cases:
        if case.kind != "test":
            continue
        outcome = setup(case)
        if outcome.passed:
            outcome = one_call(case, case.spec["seed"])
        judge.release_case()
        results.write("case", **case.to_json(), **_outcome(outcome), calls=1)
        if not outcome.passed:
            return
    benchmarks = [case for case in cases if case.kind == "benchmark"]
    warm = benchmarks[0]
    rule = StoppingRule(settings.min_repeats, settings.max_repeats, settings.target_error,
                        settings.warmup_seconds * 1e9, settings.benchmark_wall * 1e9)  # fmt: skip
    outcome, durations = timed(judge, setup, one_call, warm, rule, settings, secret ^ 0x5A5A)
    results.write("warmup", calls=len(durations), status=outcome.status, detail=outcome.detail)
    if not outcome.passed:
        results.write("case", **warm.to_json(), **_outcome(outcome), calls=len(durations))
        return
    rule = StoppingRule(
        settings.min_repeats, settings.max_repeats, settings.target_error,
        settings.benchmark_seconds * 1e9, settings.benchmark_wall * 1e9,
    )  # fmt: skip
    for case in benchmarks:
        outcome, durations, charges = timed(judge, setup, one_call, case, rule, settings, secret,
                                            with_charges=True)  # fmt: skip
        fields = _outcome(outcome)
        if outcome.passed:
            fields["stats"] = stats(durations).to_json()
            fields["charged"] = charges
        results.write("case", **case.to_json(), **fields, calls=len(durations) + 1)
        if not outcome.passed:
            return


def timed(judge: calls.Session, setup: Any, one_call: Any, case: GpuCase, rule: StoppingRule,
          settings: GpuSettings, secret: int, with_charges: bool = False) -> Any:  # fmt: skip
    """One checked untimed call, then timed calls until `rule` stops them; the first failure
    ends it. Returns (last outcome, charged durations[, charge summary])."""
    durations: list[float] = []
    charges = {"earlyNs": 0, "lateNs": 0, "callsCharged": 0, "clockNs": 0, "workerCallNs": 0,
               "workerSyncNs": 0, "workerExportNs": 0}  # fmt: skip
    outcome = setup(case)
    if outcome.passed:
        outcome = one_call(case, combine_seed(case.spec["seed"], secret))
    started = time.perf_counter_ns()
    step = 0
    while outcome.passed and not rule.done(durations, time.perf_counter_ns() - started):
        step += 1
        seed = combine_seed(case.spec["seed"] + settings.seed_step * step, secret)
        outcome = one_call(case, seed)
        if outcome.passed:
            durations.append(outcome.charged_ns)
            charges["earlyNs"] += outcome.early_ns
            charges["lateNs"] += outcome.late_ns
            charges["clockNs"] += outcome.clock_ns
            charges["callsCharged"] += bool(outcome.early_ns or outcome.late_ns)
            for key, value in zip(("workerCallNs", "workerSyncNs", "workerExportNs"),
                                  outcome.worker_ns, strict=True):  # fmt: skip
                charges[key] += value
    judge.release_case()
    return (outcome, durations, charges) if with_charges else (outcome, durations)


def _outcome(outcome: calls.CallOutcome) -> dict[str, Any]:
    return {
        "runStatus": outcome.status, "detail": outcome.detail, "durationNs": outcome.charged_ns,
        "clockNs": outcome.clock_ns, "maxError": outcome.max_error,
    }  # fmt: skip


def self_test(device: str, sync: Any) -> str | None:
    """None when a 512 x 512 product of ones gives 512 everywhere, else what went wrong."""
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
