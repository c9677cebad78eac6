"""The GPU judge's whole protocol on a machine without a GPU, and its refusal there.

Without a GPU the real judge says so in one line at start, lists the problem as needing one
and answers a submission with a `judge` error (never a score); the recipe's `task check` then
refuses in one line (tests/harness/test_trimul_task_with_the_judge.py). With the test mode
`gpu-cpu-stand-in` (`judges.service.testing`) it runs the complete protocol — trusted process,
sandboxed worker, control block, frozen candidate, fresh inputs every call — on CPU tensors
shared through memory files instead of CUDA IPC (that stand-in is what stands for the GPU here),
so every attack program that does not need a GPU gets its verdict on CPU too. The same attacks
on the H200 are test_gpu_judge_device.py.

The stand-in judge has two stand-in GPUs (`--gpus 0,1`): several candidates at once are judged
one per GPU, every GPU is used, two trials never overlap on one GPU, and `/health` says what
each GPU is doing. It serves a second package, `trimul_floor`, whose declared peak bandwidth
is so low that every call is below its hardware floor (the floor's refusal, which on a real GPU
only a hole in the timing reaches).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from gpu_judge_support import (
    ATTACKS,
    PROGRAMS,
    TASK,
    first_failure,
    judge_program,
    small_package,
    stand_in_missing,
    submit_program,
    verdict,
)

from judges.service.process import JudgeProcess

STAND_IN_GPUS = 2


pytestmark = pytest.mark.slow


def test_without_a_gpu_the_judge_says_so_once_and_refuses_as_its_own_fault(
    tmp_path: Path,
) -> None:
    with JudgeProcess(tmp_path / "state", "--task", str(TASK)) as judge:
        (problem,) = httpx.get(f"{judge.url}/problems").json()["problems"]
        record = judge_program(judge.url, (TASK / "solution" / "solution.py").read_text())
    assert problem["device"]["available"] is False
    assert record["status"] == "error" and record["errorKind"] == "judge"
    assert "needs a GPU and this judge has none" in record["error"]
    said = [line for line in judge.log_path.read_text().splitlines() if "GPU judge" in line]
    assert len(said) == 1 and "no usable GPU here" in said[0], said


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JudgeProcess]:
    missing = stand_in_missing()
    if missing is not None:
        pytest.skip(missing)
    root = tmp_path_factory.mktemp("stand-in")
    packages = small_package(root / "packages", call_timeout="8s")
    small_package(packages, call_timeout="8s", name="trimul_floor", peak_bandwidth=1000.0)
    small_package(packages, call_timeout="8s", name="trimul_traced", trace_calls=True)
    small_package(packages, call_timeout="8s", name="trimul_kept")  # judged by one test only
    gpus = ",".join(str(i) for i in range(STAND_IN_GPUS))
    with JudgeProcess(
        root / "state",
        "--problems",
        str(packages),
        "--gpus",
        gpus,
        "--workers",
        "1",
        test_mode=("gpu-cpu-stand-in",),
    ) as judge:
        yield judge


def test_an_honest_candidate_gets_a_full_record_of_every_case(stand_in: JudgeProcess) -> None:
    record = judge_program(stand_in.url, (PROGRAMS / "honest.py").read_text())
    assert verdict(record) == "valid", first_failure(record)
    kinds = [(case["kind"], case["index"]) for case in record["cases"]]
    assert kinds == [("test", 1), ("test", 2), ("test", 3), ("benchmark", 1), ("benchmark", 2)]
    for case in record["cases"]:
        assert case["status"] == "Correct" and case["msg"].startswith("pass: ")
    benchmarks = record["cases"][3:]
    assert all(3 <= case["timing"]["runs"] <= 5 for case in benchmarks)
    assert record["value"] > 0 and record["valueMean"] == "geometric"
    assert record["gpu"]["gpu"] == "none (CPU stand-in)" and record["warmup"]["calls"] >= 3
    assert record["determinism"] == {
        "test": 1,
        "checked": True,
        "differing": 0,
        "identical": True,
        "maxDifference": 0.0,
    }
    calibrated = record["gpu"]["calibration"]["cases"]  # each benchmark's own null calls
    assert sorted(calibrated) == ["1", "2"], calibrated
    for found in calibrated.values():
        assert found["calls"] == 7 and found["lowestNullClockUs"] > 0, found
        assert found["copyKernelUs"] == 0  # no probe: the copy is not timed by events
        assert found["clockOffsetUs"] == 0  # the stand-in has no probe: nothing subtracted
    assert record["timing"]["cpu"]["cpus"] >= 1  # its GPU's share of the host's CPUs
    assert all("calls" not in case["timing"] for case in benchmarks)  # no trace unless asked
    phases = record["timing"]["phases"]
    order = [
        "trustedStarted",
        "sandboxStarted",
        "context",
        "testsPrepared",
        "workerHello",
        "casesCalibrated",
        "calibrated",
        "candidateImported",
        "tests",
        "warmup",
        "benchmarks",
    ]
    assert list(phases) == order and all(
        phases[a] <= phases[b] for a, b in itertools.pairwise(order)
    )
    assert phases["benchmarks"] <= record["timing"]["trialSeconds"]


def test_a_traced_package_gives_every_timed_calls_figures(stand_in: JudgeProcess) -> None:
    """`trace_calls`: each benchmark's record lists every timed call's charge, clock, probe
    waits, window and the worker's own times, in µs, in order; the plain package does not."""
    record = judge_program(stand_in.url, (PROGRAMS / "honest.py").read_text(), pid="trimul_traced")
    assert verdict(record) == "valid", first_failure(record)
    for case in record["cases"][3:]:
        timing = case["timing"]
        calls = timing["calls"]
        assert list(calls) == [
            "chargedUs",
            "clockUs",
            "earlyUs",
            "lateUs",
            "windowUs",
            "workerCallUs",
            "workerSyncUs",
            "inputsUs",
            "packUs",
            "armUs",
            "beforeUs",
            "describeUs",
            "checkUs",
            "wallUs",
        ]
        assert all(len(values) == timing["runs"] for values in calls.values()), calls
        assert sum(calls["chargedUs"]) / timing["runs"] == pytest.approx(timing["meanUs"], abs=0.1)
        assert min(calls["chargedUs"]) == pytest.approx(timing["bestUs"], abs=0.1)
        assert sum(calls["clockUs"]) == pytest.approx(timing["worker"]["clockUs"], abs=1.0)
        for i, wall in enumerate(calls["wallUs"]):  # the host steps and the clock, within it
            steps = ("inputsUs", "packUs", "armUs", "beforeUs", "describeUs", "checkUs")
            parts = sum(calls[name][i] for name in (*steps, "clockUs"))
            assert 0 < parts <= wall + 1.0, (i, parts, wall)
        steps = timing["steps"]  # the benchmark's own wall time, step by step (a 50 ms pause)
        assert list(steps) == ["setupMs", "firstCallMs", "callsMs", "recheckMs", "releaseMs"]
        assert all(value >= 0 for value in steps.values()) and steps["recheckMs"] >= 49.9
        assert steps["callsMs"] * 1e3 >= sum(calls["wallUs"]) - 1.0, (steps, calls["wallUs"])


RECHECKED = "the last timed call's output changed after it was checked"


def judge_attack(url: str, program: str, pid: str = "trimul", attempts: int = 3) -> dict:
    """The attack's record. changes_after_check.py races the judge (it spoils the last call's
    output after guessing that the judge has compared it): on a loaded host its guess can come
    early, so the per-call check catches it, or late, after the second look. It is judged
    again, as a new submission, until the second look is what caught it, up to `attempts`."""
    code = (PROGRAMS / program).read_text()
    record = judge_program(url, code, pid=pid)
    for attempt in range(1, attempts if program == "changes_after_check.py" else 1):
        if RECHECKED in first_failure(record):
            break
        record = judge_program(url, f"{code}\n# attempt {attempt}\n", pid=pid)
    return record


# done_then_spin.py, the longest to judge, has its own test below (its verdict, its message,
# and an honest candidate judged after it).
@pytest.mark.parametrize("program", sorted(set(ATTACKS) - {"done_then_spin.py"}))
def test_each_attack_ends_as_its_verdict_on_the_stand_in(
    stand_in: JudgeProcess, program: str
) -> None:
    record = judge_attack(stand_in.url, program)
    assert verdict(record) == ATTACKS[program], first_failure(record)
    if program == "sandbox_probe.py":
        report = first_failure(record)
        assert "REACHABLE" not in report and '"judge reference files": "none visible"' in report
    if program == "changes_after_check.py":
        assert RECHECKED in first_failure(record)
    if program == "nondeterministic.py":
        assert record["determinism"]["checked"] and not record["determinism"]["identical"]
    if program == "timeout_hang.py":
        assert "did not return within 8 s" in first_failure(record)
        assert "compile budget of 8 s" in first_failure(record)
        honest = judge_program(stand_in.url, (PROGRAMS / "honest.py").read_text())
        assert verdict(honest) == "valid", first_failure(honest)


def test_a_gpus_next_trials_keep_the_benchmarks_calibration_its_first_measured(
    stand_in: JudgeProcess,
) -> None:
    """Kept calibration (`case_calibration.KEPT_FOR_S`, 600 s): the first trial of a problem on
    a GPU measures each benchmark's null calls; the GPU's next trials (its spare, started when the
    first one's processes were gone) use those differences instead, marked `kept`, and
    measure only the plain null calls. Three judgings one after the other on two GPUs: by
    the pigeonhole principle one GPU judges twice. `trimul_kept` is judged by no other test."""
    code = (PROGRAMS / "honest.py").read_text()
    first: dict[int, dict] = {}
    kept = 0
    for n in range(3):
        record = judge_program(stand_in.url, f"{code}\n# kept {n}\n", pid="trimul_kept")
        assert verdict(record) == "valid", first_failure(record)
        gpu, calibration = record["timing"]["gpu"], record["gpu"]["calibration"]
        cases = calibration["cases"]
        assert sorted(cases) == ["1", "2"] and calibration["calls"] > 0  # plain ones, its own
        if gpu not in first:  # nothing kept yet for this problem on this GPU: measured
            assert not any(case.get("kept") for case in cases.values()), cases
            assert all(
                len(case["deltaNs"]) == 3 and case["measuredAt"] > 0 for case in cases.values()
            )
            first[gpu] = cases
            continue
        kept += 1
        for index, case in cases.items():
            measured = first[gpu][index]
            assert case["kept"] is True and case["measuredAgoS"] >= 0
            assert case["deltaNs"] == measured["deltaNs"]
            assert case["measuredAt"] == measured["measuredAt"]
            assert "clockOffsetUs" in case  # this trial's offsets, from its own plain calls
    assert kept >= 1 and len(first) <= STAND_IN_GPUS


def test_a_package_named_by_a_relative_path_is_judged(tmp_path: Path) -> None:
    """`--problems packages` (or `--task harbor/trimul`) relative to the judge's working
    directory: the trusted process runs in its own directory, so every path the package names
    must be resolved when the package is loaded (found on the H200 by `task check`)."""
    missing = stand_in_missing()
    if missing is not None:
        pytest.skip(missing)
    small_package(tmp_path / "packages", call_timeout="8s")
    with JudgeProcess(
        tmp_path / "state",
        "--problems",
        "packages",
        "--workers",
        "1",
        cwd=tmp_path,
        test_mode=("gpu-cpu-stand-in",),
    ) as judge:
        record = judge_program(judge.url, (PROGRAMS / "honest.py").read_text())
    assert verdict(record) == "valid", first_failure(record) or record.get("error")


def test_saying_done_early_is_charged_and_ends_the_trial_beyond_the_outside_limit(
    stand_in: JudgeProcess,
) -> None:
    """early_done.py writes DONE first, then works and holds each call for 0.2 s: the DONE ->
    DESCRIBED window charges the hold to each call, and once such work outside the calls passes
    its limit per trial (`session.OUTSIDE_LIMIT_NS`, 2 s) the trial ends as Time Limit
    Exceeded, after about ten calls rather than every benchmark's limit."""
    record = judge_program(stand_in.url, (PROGRAMS / "early_done.py").read_text())
    assert verdict(record) == "Time Limit Exceeded", first_failure(record)
    message = first_failure(record)
    assert "outside its calls" in message and "beyond the limit of 2 s per trial" in message
    assert sum(case["calls"] for case in record["cases"]) < 40, record["cases"]


def test_a_candidate_that_says_done_and_never_returns_gets_a_verdict(
    stand_in: JudgeProcess,
) -> None:
    """done_then_spin.py writes DONE, then computes forever: the wait for its output's
    description is bounded by the answer limit, and the sandbox is killed."""
    record = judge_program(stand_in.url, (PROGRAMS / "done_then_spin.py").read_text())
    assert verdict(record) == ATTACKS["done_then_spin.py"], first_failure(record)
    assert "kept working after saying it was done" in first_failure(record)
    honest = judge_program(stand_in.url, (PROGRAMS / "honest.py").read_text())
    assert verdict(honest) == "valid", first_failure(honest)


def test_a_failure_says_what_was_raised_and_where_in_the_candidate(
    stand_in: JudgeProcess,
) -> None:
    """The message leads with the exception's type and text and what it was raised from, and
    ends with the candidate's own frames; none of the worker's."""
    record = judge_program(stand_in.url, (PROGRAMS / "raises_deep.py").read_text())
    assert verdict(record) == "Runtime Error", first_failure(record)
    message = first_failure(record)
    head = message.split("\n", 1)[0]
    assert "the call raised ValueError: no weight for the left projection" in head, message
    assert "raised from KeyError: 'left_projection'" in message
    assert "in _project" in message and "in _contract" in message
    assert "worker.py" not in message and "/box/judge/" not in message
    assert len(message) < 4000


def test_the_sandbox_names_its_user_and_keeps_private_compiler_caches(
    stand_in: JudgeProcess,
) -> None:
    """environment_probe.py: `getpass.getuser()` answers for the sandbox's uid (no passwd
    entry on the host), and every compiler cache folder lies in the private /tmp, writable and
    empty of another candidate's files; judged twice, once after the other."""
    code = (PROGRAMS / "environment_probe.py").read_text()
    for n in range(2):
        record = judge_program(stand_in.url, f"{code}\n# run {n}\n")
        assert verdict(record) == "valid", first_failure(record)


def test_a_call_below_the_hardware_floor_is_refused_not_ranked(stand_in: JudgeProcess) -> None:
    record = judge_program(stand_in.url, (PROGRAMS / "honest.py").read_text(), pid="trimul_floor")
    assert verdict(record) == "Time Below Hardware Floor", first_failure(record)
    assert "below this benchmark's hardware floor" in first_failure(record)
    assert "value" not in record and record["score"] < 100
    assert record["gpu"]["peaks"]["source"] == "package"


def test_every_gpu_judges_one_candidate_at_a_time(stand_in: JudgeProcess) -> None:
    """Four candidates at once on two stand-in GPUs: both GPUs judge, their trials never
    overlap on one GPU, and /health shows each GPU's state while and after they run."""
    code = (PROGRAMS / "honest.py").read_text()
    sids = [submit_program(stand_in.url, f"{code}\n# copy {n}\n") for n in range(4)]
    seen_judging: set[int] = set()
    records: dict[int, dict] = {}
    deadline = time.monotonic() + 900
    while len(records) < len(sids) and time.monotonic() < deadline:
        health = httpx.get(f"{stand_in.url}/health", timeout=10).json()
        for gpu in health["gpu"]["gpus"]:
            if gpu["state"] == "judging":
                assert gpu["submission"] and gpu["since"], gpu
                seen_judging.add(gpu["index"])
        for sid in sids:
            if sid not in records:
                answer = httpx.get(f"{stand_in.url}/result/{sid}", timeout=10).json()
                if answer["status"] != "queued":
                    records[sid] = answer
        time.sleep(0.2)  # polling, bounded by the deadline
    assert len(records) == len(sids)
    assert all(verdict(r) == "valid" for r in records.values()), [
        first_failure(r) for r in records.values()
    ]
    by_gpu: dict[int, list[tuple[float, float]]] = {}
    for record in records.values():
        timing = record["timing"]
        by_gpu.setdefault(timing["gpu"], []).append((timing["startedAt"], timing["endedAt"]))
    assert sorted(by_gpu) == list(range(STAND_IN_GPUS)), by_gpu  # every GPU used
    for intervals in by_gpu.values():
        intervals.sort()
        for (_, end), (start, _) in itertools.pairwise(intervals):
            assert end <= start, intervals  # one candidate at a time on a GPU
    assert seen_judging, "/health never showed a GPU judging"
    # A record is out once its trial wrote its end; the GPU is idle once the trial's processes
    # are gone (`finishing` meanwhile).
    while True:
        final = httpx.get(f"{stand_in.url}/health", timeout=10).json()["gpu"]["gpus"]
        if all(gpu["state"] == "idle" for gpu in final) or time.monotonic() > deadline:
            break
        assert all(gpu["state"] == "finishing" for gpu in final if gpu["state"] != "idle"), final
        time.sleep(0.2)  # polling, bounded by the deadline
    assert all(gpu["state"] == "idle" and gpu["judged"] >= 1 for gpu in final), final


def test_a_gpu_idle_between_trials_has_its_next_trial_prepared(stand_in: JudgeProcess) -> None:
    """Once a GPU's trial has ended and its processes are gone, the GPU prepares its next trial
    (trusted process, torch, the tests' references, the candidate's sandbox) with no submission:
    the next submission takes it (its phases up to the worker's hello lie before its start), and
    it serves that one submission only."""
    code = (PROGRAMS / "honest.py").read_text()
    first = [submit_program(stand_in.url, f"{code}\n# warm {n}\n") for n in range(STAND_IN_GPUS)]
    deadline = time.monotonic() + 600
    for sid in first:  # both GPUs judged this problem last
        while httpx.get(f"{stand_in.url}/result/{sid}", timeout=10).json()["status"] == "queued":
            assert time.monotonic() < deadline
            time.sleep(0.2)  # polling, bounded by the deadline
    while not all(
        gpu["state"] == "idle" and gpu["prepared"] == "waiting"
        for gpu in httpx.get(f"{stand_in.url}/health", timeout=10).json()["gpu"]["gpus"]
    ):
        assert time.monotonic() < deadline, "the idle GPUs never prepared their next trial"
        time.sleep(0.2)  # polling, bounded by the deadline
    record = judge_program(stand_in.url, f"{code}\n# prepared\n")
    assert verdict(record) == "valid", first_failure(record)
    timing = record["timing"]
    assert timing["prepared"] is True
    phases = timing["phases"]
    assert phases["context"] < 0 and phases["testsPrepared"] < 0, phases  # before the start
    assert phases["casesCalibrated"] < 0  # each benchmark's null calls: while it waited
    assert 0 <= phases["calibrated"] <= phases["candidateImported"] <= phases["benchmarks"]
    gpus = httpx.get(f"{stand_in.url}/health", timeout=10).json()["gpu"]["gpus"]
    judged = next(gpu for gpu in gpus if gpu["index"] == timing["gpu"])
    assert judged["state"] in ("finishing", "idle"), judged  # the record is out
    while judged["state"] != "idle" or judged["prepared"] is None:  # then a fresh spare
        assert time.monotonic() < deadline, judged
        time.sleep(0.2)  # polling, bounded by the deadline
        gpus = httpx.get(f"{stand_in.url}/health", timeout=10).json()["gpu"]["gpus"]
        judged = next(gpu for gpu in gpus if gpu["index"] == timing["gpu"])
