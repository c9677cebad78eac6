"""The judge's pure bookkeeping: run classification, the runner report, case and result records.

These functions decide what a client reads, so they are tested with plain values: FrontierCS's
score arithmetic, its `ok`/`status` conventions on problem 0, and our rule that a failed run's
`msg` never carries the program's own text.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import signal

import pytest

from judges.sandbox.outcome import (
    ACCEPTED,
    MEMORY_LIMIT,
    NONZERO_EXIT,
    OUTPUT_LIMIT,
    SIGNALLED,
    STARVED,
    TIME_LIMIT,
    Limits,
    Report,
    RunOutcome,
    classify,
)
from judges.verdicts.judging import OUTPUT_FIELD_CAP, aggregate, case_record, error_record

LIMITS = Limits(
    cpu_seconds=2,
    wall_seconds=4,
    memory_bytes=256 << 20,
    processes=128,
    file_bytes=1 << 20,
    tmpfs_bytes=1 << 20,
)


def report(**changes: object) -> Report:
    fields = dict(
        exit_code=0,
        signal=None,
        cpu_ns=10**8,
        wall_ns=2 * 10**8,
        memory_bytes=4 << 20,
        timed_out=False,
    )
    fields.update(changes)
    return Report(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "stdout_bytes", "status"),
    [
        ({}, 10, ACCEPTED),
        ({"timed_out": True, "exit_code": None, "signal": 9}, 0, TIME_LIMIT),
        ({"cpu_ns": 2_100_000_000}, 10, TIME_LIMIT),
        ({"exit_code": None, "signal": signal.SIGXCPU}, 0, TIME_LIMIT),
        ({}, 2 << 20, OUTPUT_LIMIT),
        ({"exit_code": None, "signal": signal.SIGXFSZ}, 1 << 20, OUTPUT_LIMIT),
        ({"exit_code": None, "signal": signal.SIGABRT, "memory_bytes": 250 << 20}, 0, MEMORY_LIMIT),
        ({"exit_code": None, "signal": signal.SIGSEGV}, 0, SIGNALLED),
        ({"exit_code": 3}, 0, NONZERO_EXIT),
    ],
)
def test_run_classification_follows_go_judge_statuses(
    changes: dict, stdout_bytes: int, status: str
) -> None:
    assert classify(report(**changes), LIMITS, stdout_bytes, 1 << 20)[0] == status


def test_a_kill_at_the_run_cgroup_bound_is_memory_limit_exceeded_even_after_exit_0() -> None:
    status, detail = classify(report(), LIMITS, 10, 1 << 20, oom_kills=3)
    assert status == MEMORY_LIMIT
    assert "memory limit of 268435456 bytes" in detail and "killed 3" in detail


def test_a_run_stopped_by_the_backstop_is_starved_not_a_verdict() -> None:
    """Host load kept it from its CPU until the real-time backstop (10 x its wall limit) with
    its CPU time far below the limit: the judge's fault, reported as such, never TLE."""
    starved = report(exit_code=None, signal=9, wall_ns=40 * 10**9, wait_ns=39 * 10**9)
    status, detail = classify(dataclasses.replace(starved, starved=True), LIMITS, 0, 1 << 20)
    assert status == STARVED
    assert "backstop of 40 s" in detail and "39.000 s waiting for a CPU" in detail


def test_cpu_over_the_limit_is_a_verdict_even_when_the_backstop_stopped_it() -> None:
    over = report(exit_code=None, signal=9, cpu_ns=2_500_000_000, starved=True)
    assert classify(over, LIMITS, 0, 1 << 20)[0] == TIME_LIMIT


def test_a_wall_clock_kill_of_an_idle_program_is_a_time_limit_verdict() -> None:
    """The wall-clock limit counted only its own time (it slept, it did not wait for a CPU)."""
    idle = report(exit_code=None, signal=9, cpu_ns=10**6, timed_out=True, wait_ns=10**7)
    status, detail = classify(idle, LIMITS, 0, 1 << 20)
    assert status == TIME_LIMIT and "killed at the wall-clock limit of 4 s" in detail
    assert "0.001 s of CPU; 0.010 s spent waiting for a CPU are not counted" in detail


def test_runner_report_needs_exactly_its_two_lines() -> None:
    line = "exit=0 signal=0 cpu_ns=5 wall_ns=6 maxrss_kb=7 timed_out=0 wait_ns=8 starved=0\n"
    assert Report.parse("started\n" + line) == Report(0, None, 5, 6, 7 * 1024, False, 8, False)
    assert Report.parse("started\n") is None  # the runner vanished
    assert Report.parse("started\n" + line + line) is None  # a second report is not believed
    assert Report.parse(line) is None


def outcome(status: str = ACCEPTED, detail: str = "exit status 0") -> RunOutcome:
    return RunOutcome(
        status, detail, 0, None, cpu_ns=1000, wall_ns=2000, memory_bytes=3000, stdout_bytes=10
    )


def test_failed_run_scores_zero_and_keeps_its_stderr_out_of_msg() -> None:
    record = case_record(
        outcome(NONZERO_EXIT, "exit status 1"), stderr="Ratio: 1.0\npoints 1.0 Ratio: 1.000000000"
    )
    assert record["msg"] == "Nonzero Exit Status: exit status 1"
    assert not re.search(r"Ratio: ([\d.]+)", record["msg"])
    assert record["stderr"].startswith("Ratio: 1.0")
    assert (record["ok"], record["status"], record["scoreRatio"]) == (False, "Wrong Answer", 0.0)
    assert "output" not in record


def test_checked_case_reads_its_ratio_from_the_checker_message() -> None:
    msg = "points 0.4877 Ratio: 0.487700000 (cells=10, W=5, H=4, area=20)\n"
    record = case_record(outcome(), checker_msg=msg, checker_exit=7, output=b"5 4\n")
    assert record["msg"] == msg and record["output"] == "5 4\n"
    assert record["scoreRatio"] == record["scoreRatioUnbounded"] == 0.4877
    # FrontierCS defect 4, kept on purpose: partial points are not "ok".
    assert (record["ok"], record["status"]) == (False, "Wrong Answer")
    assert (record["time"], record["memory"], record["cpuTime"]) == (2000, 3000, 1000)
    assert record["waitTime"] == 0


def test_output_of_control_bytes_contributes_a_bounded_prefix_its_size_and_digest() -> None:
    flood = bytes(range(1, 32)) * ((1 << 20) // 31)  # about 1 MiB, each byte a JSON escape
    msg = 'wrong output format Expected integer, but "~" found\n'
    record = case_record(outcome(), checker_msg=msg, checker_exit=2, output=flood)
    assert record["output"] == flood[:OUTPUT_FIELD_CAP].decode()
    assert record["outputBytes"] == len(flood) and record["outputTruncated"] is True
    assert record["outputSha256"] == hashlib.sha256(flood).hexdigest()
    assert len(json.dumps(record)) < 8 * OUTPUT_FIELD_CAP


def test_ratio_of_exactly_one_is_correct() -> None:
    msg = "points 1.0 Ratio: 1.000000000 (cells=4, W=2, H=2, area=4)\n"
    record = case_record(outcome(), checker_msg=msg, checker_exit=7, output=b"")
    assert (record["status"], record["scoreRatio"]) == ("Correct", 1.0)


def test_score_is_one_hundred_times_the_mean_ratio_in_case_order() -> None:
    ratios = [0.1, 0.2, 0.3]
    cases = [{"scoreRatio": r, "scoreRatioUnbounded": r} for r in ratios]
    result = aggregate(cases, {"kind": "generated"})
    expected = ((0.1 + 0.2 + 0.3) / 3) * 100  # the orchestrator's float arithmetic
    assert result["score"] == expected == result["scoreUnbounded"]
    assert (result["status"], result["passed"], result["result"]) == ("done", False, "Wrong Answer")
    assert result["suite"] == {"kind": "generated"}


def test_all_perfect_cases_pass() -> None:
    result = aggregate([{"scoreRatio": 1.0, "scoreRatioUnbounded": 1.0}] * 2, {})
    assert (result["passed"], result["result"], result["score"]) == (True, "Correct Answer", 100.0)


def test_error_record_has_frontiercs_shape_and_names_its_kind() -> None:
    assert error_record("compile failed: x", "compile") == {
        "status": "error",
        "error": "Error: compile failed: x",
        "errorKind": "compile",
    }
