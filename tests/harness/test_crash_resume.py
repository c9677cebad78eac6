"""Crash tests: the run process is SIGKILLed at a named point and restarted with the same command.

The run loop runs in a subprocess (`python -m tests.rehearsal_support`, one rollout at a time so
the kill point is exact) against a real `reef serve`, the local judge and the stand-in models of
tests/rehearsal_support; `GUIDANCE_TTT_CRASH_AT` makes it kill itself at the point under test.
Each test first checks that the kill left the state the point promises (so the test is not
vacuous), then restarts the process and checks that the run completes with the archive, the
journal and Reef's reports in agreement, every slot journaled and reported exactly once, and no
guidance, executor or judge call made twice for a slot.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from judge_fakes import LocalJudge
from rich.console import Console

from harness.archive.best import run_best_score
from harness.observe.events import read_events
from harness.observe.progress import ProgressDisplay
from harness.run.crash_hook import ENV_VAR
from harness.settings.run_settings import RunSettings
from harness.storage.library_json import library_json_bytes, read_library_json
from harness.storage.run_files import COMMITTED_LIBRARY
from harness.storage.store import read_committed
from tests.openai_fixture import OpenAIFixture
from tests.reef_fixtures import ReefService, running_reef
from tests.rehearsal_support import (
    REPO,
    GuidanceScript,
    ReefReports,
    executor_reply,
    journal,
    task_dir,
    write_serve_yaml,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

G, R, STEPS = 2, 2, 2
GRID = {(s, g, r) for s in range(STEPS) for g in range(G) for r in range(R)}


@dataclass
class Stack:
    judge: LocalJudge
    reef: ReefService
    judge_state: Path


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("crash-stack")
    if not (task_dir() / "solution" / "seed.json").is_file():
        pytest.skip(f"{task_dir()}/solution/seed.json (the task's seed archive) is missing")
    with (
        LocalJudge(root / "judge", "--generated-cases", "2", "--seed", "5") as judge,
        OpenAIFixture(GuidanceScript(malformed=[1])) as guidance,
        running_reef(
            root / "reef",
            upstream=guidance,
            recipe_config={"groups-per-step": G, "rollouts-per-group": R},
        ) as reef,
    ):
        yield Stack(judge, reef, root / "judge")


@dataclass
class Run:
    """One crash scenario: its settings, executor, and how to start the driver process."""

    settings: RunSettings
    executor: OpenAIFixture
    serve_yaml: Path

    def start(self, crash_at: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
        if crash_at:
            env[ENV_VAR] = crash_at
        command = [sys.executable, "-m", "tests.rehearsal_support"]
        command += ["--serve-yaml", str(self.serve_yaml), "--task-dir", str(task_dir())]
        command += ["--executor-url", self.executor.v1_url, "--workers", "1"]
        return subprocess.run(
            command, cwd=REPO, env=env, capture_output=True, text=True, timeout=240
        )

    @property
    def reports(self) -> ReefReports:
        return ReefReports(self.settings.reef_url, self.settings.scenario)

    @property
    def state(self) -> Path:
        return self.settings.state_dir


@pytest.fixture
def run(stack: Stack, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Run]:
    spec = getattr(request.node, "callspec", None)
    test = request.node.originalname[5:][:24]  # one Reef scenario per test and parameter
    name = "".join(c if c.isalnum() else "_" for c in (f"{test}_{spec.id}" if spec else test))
    with OpenAIFixture(executor_reply) as executor:
        settings = write_serve_yaml(
            tmp_path / "serve.yaml",
            state_dir=tmp_path / "state",
            reef_port=stack.reef.port,
            judge_url=stack.judge.url,
            groups=G,
            rollouts=R,
            steps=STEPS,
            task=f"crash_{name}",  # one Reef scenario per test
        )
        yield Run(settings, executor, tmp_path / "serve.yaml")


def judge_submissions(stack: Stack) -> int:
    return sum(1 for _ in (stack.judge_state / "submissions").glob("*/*/meta.json"))


def committed_step(state: Path) -> int:
    return read_committed(state / "guidance-run" / "archive")[1]


def resume_state(state: Path) -> dict | None:
    path = state / "guidance-run" / "resume-state.json"
    return json.loads(path.read_text()) if path.exists() else None


def trained_step(state: Path) -> int | None:
    marker = state / "checkpoints" / "megatron" / "latest_checkpointed_iteration.txt"
    return int(marker.read_text()) if marker.exists() else None


def leftover_temps(state: Path) -> list[str]:
    return [p.name for p in (state / "guidance-run").rglob(".*.tmp")]


# What the killed process must have left behind, per crash point:
# (reports in Reef, journaled rollouts, committed archive step, resume next_step, Reef trained)
CRASHES = {
    "after_report:3": (3, 3, -1, None, None),  # mid-step, k=3 of G·R=4 reported
    "after_journal:2": (1, 2, -1, None, None),  # journaled, report not yet posted
    "after_report:4": (4, 4, -1, None, None),  # all reported, Reef not yet trained
    "before_archive_commit:1": (4, 4, -1, None, 0),  # between report (trained) and commit
    "archive_head_write:2": (4, 4, -1, None, 0),  # during the archive commit
    "after_archive_commit:1": (4, 4, 0, None, 0),  # archive committed, resume state not
    "library_export_write:1": (4, 4, 0, None, 0),  # during the committed-library.json write
    "resume_state_write:1": (4, 4, 0, None, 0),  # during the resume-state write
    "after_report:6": (6, 6, 0, 1, 0),  # mid-step of step 1
}


@pytest.mark.parametrize("point", list(CRASHES))
def test_killed_run_resumes_without_losing_or_repeating_a_slot(
    stack: Stack, run: Run, point: str
) -> None:
    submissions_before = judge_submissions(stack)
    killed = run.start(crash_at=point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]

    reports, journaled, archive_step, next_step, trained = CRASHES[point]
    assert len(run.reports.reports()) == reports
    assert len(journal(run.state)) == journaled
    assert committed_step(run.state) == archive_step
    state = resume_state(run.state)
    assert (state["next_step"] if state else None) == next_step
    assert trained_step(run.state) == trained
    if point.startswith(("archive_head_write", "resume_state_write", "library_export_write")):
        assert leftover_temps(run.state), "the kill must come mid-write, temp file written"
    if next_step is not None or point.startswith("resume_state_write"):
        assert_committed_library_is_the_committed_archive(run.state)
    else:  # no export has finished yet
        assert not (run.state / COMMITTED_LIBRARY).exists()

    resumed = run.start()
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    result = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert result["next_step"] == STEPS
    # Reef trained step 0 but its commit record was lost: the step is rebuilt, not re-run.
    recovered = trained == 0 and next_step is None
    assert result["step_summaries"][0]["recovered_commit"] is recovered
    assert resume_state(run.state)["next_step"] == STEPS
    assert committed_step(run.state) == STEPS - 1
    assert not leftover_temps(run.state)
    assert_archive_journal_and_reef_agree(run)
    assert_committed_library_is_the_committed_archive(run.state)

    # No slot ran twice: one guidance call per slot, one executor call per well-formed
    # rollout, one judge submission per extracted program (plus the seed's, once, when the
    # new run re-scored it on the judge's generated suite).
    entries = [j.entry for j in journal(run.state)]
    assert len(run.reports.inferences()) == len(GRID)
    well_formed = sum(1 for e in entries if e["metadata"]["guidance_format_ok"])
    assert len(run.executor.completion_requests()) == well_formed
    programs = sum(1 for e in entries if e["solution"])
    events = read_events(run.state / "guidance-run" / "events.jsonl")
    rescored = sum(1 for e in events if e["event"] == "seed_rescored")
    assert rescored == 1
    assert judge_submissions(stack) - submissions_before == programs + rescored
    assert_each_steps_gain_is_the_uninterrupted_runs(run.state, events)


def assert_each_steps_gain_is_the_uninterrupted_runs(state: Path, events: list[dict]) -> None:
    """The "+Δ" of every step's progress line, as the display prints it from the event log of
    the killed and the resumed process together, is the gain of the step in the final archive
    (what an uninterrupted run prints), whatever the kill point."""
    archive = read_committed(state / "guidance-run" / "archive")[0]
    display_lines = io.StringIO()
    display = ProgressDisplay(Console(file=display_lines, width=300), plain=True)
    for event in events:
        display.emit(event["event"], **{k: v for k, v in event.items() if k not in ("event", "ts")})
    display.close()
    shown = {}
    for line in display_lines.getvalue().splitlines():
        found = re.match(r"step (\d+) \| .* run best (\S+) \((\S+)\)", line)
        if found:
            shown[int(found[1])] = (found[2], found[3])  # the last summary of a step counts
    for step in range(STEPS):
        before, after = run_best_score(archive, step - 1), run_best_score(archive, step)
        assert shown[step] == (f"{after:.4f}", f"{after - before:+.4f}"), (step, shown)


def assert_committed_library_is_the_committed_archive(state: Path) -> None:
    """committed-library.json holds the store's committed archive, in the reference's bytes,
    loadable by the project's reader."""
    data = (state / COMMITTED_LIBRARY).read_bytes()
    committed = read_committed(state / "guidance-run" / "archive")[0]
    assert data == library_json_bytes(committed)
    assert read_library_json(state / COMMITTED_LIBRARY).puct_T == committed.puct_T


@pytest.mark.parametrize("damage", ["deleted", "altered", "hash_unrecorded"])
def test_a_missing_or_altered_committed_library_is_rebuilt_on_resume_with_a_warning(
    stack: Stack, run: Run, damage: str
) -> None:
    killed = run.start(crash_at="after_report:6")  # step 0 committed, step 1 in flight
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    path = run.state / COMMITTED_LIBRARY
    recorded = resume_state(run.state)["committed_library_sha256"]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == recorded
    if damage == "deleted":
        path.unlink()
    elif damage == "altered":
        path.write_bytes(path.read_bytes().replace(b'"puct_T": 4', b'"puct_T": 9', 1))
        assert hashlib.sha256(path.read_bytes()).hexdigest() != recorded
    else:  # a commit record written before the per-step export existed
        state_path = run.state / "guidance-run" / "resume-state.json"
        state = json.loads(state_path.read_text())
        del state["committed_library_sha256"]
        state_path.write_text(json.dumps(state))

    resumed = run.start()
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"{path}: " in resumed.stderr and "rebuilt from the committed archive" in resumed.stderr
    rebuilt = [
        e
        for e in read_events(run.state / "guidance-run" / "events.jsonl")
        if e["event"] == "committed_library_rebuilt"
    ]
    assert [(e["step"], e["path"]) for e in rebuilt] == [(0, str(path))]
    assert_committed_library_is_the_committed_archive(run.state)
    assert_archive_journal_and_reef_agree(run)


def assert_archive_journal_and_reef_agree(run: Run) -> None:
    journaled = journal(run.state)
    slots = Counter((j.step, j.group, j.rollout) for j in journaled)
    assert set(slots) == GRID and set(slots.values()) == {1}, slots
    stored = run.reports.reports()
    reported = Counter(r.slot for r in stored)
    assert set(reported) == GRID and set(reported.values()) == {1}, reported
    archive, _ = read_committed(run.state / "guidance-run" / "archive")
    by_slot = {(j.step, j.group, j.rollout): j.entry for j in journaled}
    for report in stored:
        entry = by_slot[report.slot]
        assert report.references == (entry["metadata"]["agent_record_id"],)
        assert report.metadata["library_entry_id"] == entry["id"]
        assert report.score == entry["verifier_reward"]
        assert archive.entries[entry["id"]].to_dict() == entry
    assert archive.puct_T == len(GRID)


# --- the journal against Reef's stored reports --------------------------------------------------

REWARD = re.compile(rb'"verifier_reward":(\d)')


def bump_reward(record: bytes) -> bytes:
    """`record` with the first digit of its reward changed (0.0 -> 9.0, 47.04 -> 97.04)."""
    digit = REWARD.search(record)
    assert digit is not None, record[:200]
    new = b"9" if digit[1] != b"9" else b"8"
    return record[: digit.start(1)] + new + record[digit.end(1) :]


def reseal(line: bytes) -> bytes:
    """`line` with its reward changed and its checksum recomputed the way the store computes
    it: what a hand edit by someone who knows the format leaves, which the checksum cannot
    catch and the Reef cross-check must."""
    body = bump_reward(line[: line.rindex(b',"sha256":"')] + b"}")
    return body[:-1] + b',"sha256":"' + hashlib.sha256(body).hexdigest().encode() + b'"}'


def rewrite_line(path: Path, index: int, change) -> None:
    lines = path.read_bytes().split(b"\n")
    lines[index] = change(lines[index])
    path.write_bytes(b"\n".join(lines))


def test_a_torn_line_of_a_reported_slot_is_rebuilt_from_reef_and_never_reported_twice(
    stack: Stack, run: Run
) -> None:
    killed = run.start(crash_at="after_report:3")  # g0r0, g0r1, g1r0 journaled and reported
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    path = run.state / "guidance-run" / "archive" / "step-000000.jsonl"
    data = path.read_bytes()
    path.write_bytes(data[:-40])  # the last line (g1r0) loses its end and its newline
    (lost,) = [r for r in run.reports.reports() if r.slot == (0, 1, 0)]

    resumed = run.start()
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "rebuilt from Reef's stored reports" in resumed.stderr
    events = read_events(run.state / "guidance-run" / "events.jsonl")
    rebuilt = [e for e in events if e["event"] == "slots_rebuilt_from_reef"]
    assert [(e["step"], e["slots"], e["reports"]) for e in rebuilt] == [
        (0, [[1, 0]], [lost.record_id])
    ]
    assert_archive_journal_and_reef_agree(run)  # one report per slot: none posted twice
    assert len(run.reports.inferences()) == len(GRID), "the lost slot was not run again"
    entry = next(j.entry for j in journal(run.state) if (j.step, j.group, j.rollout) == (0, 1, 0))
    assert entry["failure_mode"] == "journal_lost" and entry["solution"] == ""
    assert entry["verifier_reward"] == lost.score
    assert entry["metadata"]["agent_record_id"] == lost.references[0]
    assert resume_state(run.state)["next_step"] == STEPS


@pytest.mark.parametrize(
    ("crash_at", "file", "line", "slot"),
    [
        ("after_report:3", "step-000000.jsonl", 1, "step 0 g0r1"),  # in-flight step
        ("after_report:6", "step-000000.jsonl", 0, "step 0 g0r0"),  # committed segment
    ],
)
def test_a_journaled_reward_that_disagrees_with_reefs_report_is_refused_naming_the_slot(
    stack: Stack, run: Run, crash_at: str, file: str, line: int, slot: str
) -> None:
    killed = run.start(crash_at=crash_at)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    reports_before = len(run.reports.reports())
    rewrite_line(run.state / "guidance-run" / "archive" / file, line, reseal)

    refused = run.start()
    assert refused.returncode == 1
    assert "ReefDisagrees" in refused.stderr
    assert f"{slot}: the journal holds reward" in refused.stderr
    assert len(run.reports.reports()) == reports_before, "nothing may be posted"


@pytest.mark.parametrize("crash_at", ["after_report:3", "after_report:6"])
def test_one_changed_digit_in_the_journal_stops_the_real_run_naming_file_and_line(
    stack: Stack, run: Run, crash_at: str
) -> None:
    killed = run.start(crash_at=crash_at)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    reports_before = len(run.reports.reports())
    path = run.state / "guidance-run" / "archive" / "step-000000.jsonl"
    rewrite_line(path, 1, bump_reward)

    refused = run.start()
    assert refused.returncode == 1
    assert f"{path}:2: the record does not match its checksum" in refused.stderr
    assert len(run.reports.reports()) == reports_before, "nothing may be posted"
