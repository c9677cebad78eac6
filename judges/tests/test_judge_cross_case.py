"""A verdict is a function of the program and the problem alone: a candidate that writes in every
channel it can reach in case k and packs worse in case k+1 for each one that carried something
(judges/tests/programs/channel_probe.cpp: extended attributes and ACLs of /tmp and of its working
directory, keyrings, /tmp's times, the PID and inode counters, System V ids, the loopback's
counters) gets the same record from a real judge with one worker and with two, each case judged
in a sandbox of its own (as the judge ships), and that record shows nothing carried over. The
kept sandbox (test switch `kept-sandbox`) resets what it can but still carries the counters: its
record differs, which is why the judge does not ship it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_judge_sandbox import submit, wait_final

from judges.problems.polyomino.checker import parse_instance
from judges.problems.polyomino.generator import generate_instance
from judges.service.process import JudgeProcess, cgroup_missing

PROBE = Path(__file__).parent / "programs" / "channel_probe.cpp"
CASES = 6
CGROUP_MISSING = cgroup_missing()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CGROUP_MISSING is not None, reason=f"{CGROUP_MISSING}"),
]
KEEP = ("status", "msg", "scoreRatio", "runStatus", "checkerExitCode", "outputSha256")


def judged(state: Path, problems: Path, workers: int, *switches: str) -> dict[str, Any]:
    args = ["--problems", str(problems), "--workers", str(workers)]
    with JudgeProcess(state, *args, test_mode=switches) as judge:
        return wait_final(judge.url, submit(judge.url, PROBE.read_text()))


def test_one_worker_two_workers_and_a_sandbox_per_run_give_one_verdict(tmp_path: Path) -> None:
    problem = tmp_path / "problems" / "0"
    (problem / "testdata").mkdir(parents=True)
    instances = [generate_instance(46, number) for number in range(1, CASES + 1)]
    for number, text in enumerate(instances, start=1):
        (problem / "testdata" / f"{number}.in").write_text(text)
    (problem / "config.yaml").write_text(
        f"time: 2s\nmemory: 256m\nsubtasks:\n- score: 100\n  n_cases: {CASES}\n"
    )
    problems = tmp_path / "problems"
    records = {
        "one worker": judged(tmp_path / "one", problems, 1),
        "two workers": judged(tmp_path / "two", problems, 2),
        "kept sandbox": judged(tmp_path / "kept", problems, 1, "kept-sandbox"),
    }
    shown = {
        name: (record["score"], [{k: case.get(k) for k in KEEP} for case in record["cases"]])
        for name, record in records.items()
    }
    assert shown["one worker"] == shown["two workers"], shown
    for name in ("one worker", "two workers"):
        assert records[name]["status"] == "done"
        assert records[name]["timing"]["keptSandboxes"] == 0
    # nothing carried over: every case packed its pieces in columns 10 wide, as a first case
    widths = [
        int(case["msg"].split("W=")[1].split(",")[0]) for case in records["one worker"]["cases"]
    ]
    assert widths == [10 * len(parse_instance(text).pieces) for text in instances]
    # the kept sandbox's later cases found the counters of the ones before them
    assert records["kept sandbox"]["timing"]["keptSandboxes"] == 1
    assert records["kept sandbox"]["score"] < records["one worker"]["score"]
