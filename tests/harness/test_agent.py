"""The rollout loop's behaviour at its edges: report bodies, group-major outcomes, the crash hook,
and what a judge, executor or Reef outage does to a run (real servers on 127.0.0.1)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from judge_fakes import LocalJudge, closed_port_url

from harness.adapters.executor.backends import backend_from_name
from harness.adapters.executor.client import ExecutionClient
from harness.adapters.judge.frontiercs import FrontierCSScorer
from harness.adapters.reef.channel import ReefChannel
from harness.arms import Arm
from harness.contract import load_contract
from harness.library import Archive
from harness.observe.events import read_events
from harness.rehearsal.stand_ins import apply_variant, parent_program, seed_source
from harness.run.crash_hook import ENV_VAR
from harness.run.rollout import RolloutSettings, RolloutTask, Slot, report_body, run_rollout
from harness.run.services import NoReef
from harness.run.step import RESUME_HINT, StepInterrupted, step_outcome
from harness.run.step_loop import run_steps
from harness.scorer import JudgeUnavailableError
from harness.settings.run_settings import RunSettings
from harness.state import ArchiveConfig, LibraryEntry, VerificationResult
from harness.storage.run_files import event_log_path
from tests.bridge_fake import FakeTrainingBridge
from tests.openai_fixture import OpenAIFixture, RecordedRequest, Reply
from tests.reef_fixtures import ReefService, running_reef
from tests.rehearsal_support import (
    POLL_S,
    REPO,
    GuidanceScript,
    ReefReports,
    executor_reply,
    journal,
    services,
    task_dir,
    write_serve_yaml,
)

CONTROLLER = {"poll_interval_s": POLL_S, "deadline_s": 60.0}


def entry(*, parent: str, step: int, group: int, rollout: int, reward: float) -> LibraryEntry:
    """A rollout entry as the loop builds it (only the fields these tests read are varied)."""
    return LibraryEntry(
        id=str(uuid.uuid4()),
        parent_id=parent,
        problem_id="p",
        timestep=step + 1,
        guidance="g",
        execution_thinking="",
        solution=f"int main() {{ return {group * 10 + rollout}; }}",
        verifier_reward=reward,
        verifier_raw_score=reward,
        verifier_status="valid",
        verifier_message="ok",
        summary="s",
        reusable_idea="s",
        failure_mode=None,
        metadata={
            "step": step,
            "group": group,
            "rollout": rollout,
            "agent_record_id": f"receipt-{group}-{rollout}",
            "guidance_format_ok": True,
        },
    )


def seeded_archive(groups: int = 2, rollouts: int = 2) -> Archive:
    seed = replace(
        entry(parent="none", step=-1, group=0, rollout=0, reward=40.0),
        parent_id=None,
        timestep=0,
        metadata={},
    )
    return Archive.from_seed(ArchiveConfig(rollout_n=rollouts, groups_per_batch=groups), seed)


def test_report_body_carries_reward_feedback_and_grid_metadata() -> None:
    rollout = entry(parent="node-1", step=3, group=1, rollout=2, reward=51.25)
    body = report_body(rollout, groups_per_step=2, rollouts_per_group=4)
    assert body == {
        "score": 51.25,
        "feedback": "valid: ok",
        "metadata": {
            "step": 3,
            "group": 1,
            "rollout": 2,
            "groups_per_step": 2,
            "rollouts_per_group": 4,
            "algorithm": "ttt-discover",
            "comparison_set": "tttd-step-3-group-1",
            "parent_id": "node-1",
            "search_value": 51.25,  # the child's raw score, not the parent's value
            "guidance_ttt": True,
            "prompt_mode": "summary_only",
            "archive_timestep": 4,
            "library_entry_id": rollout.id,
        },
    }
    assert "references" not in body  # the receipt is passed separately, exactly once


def test_step_outcome_is_group_major_in_rollout_order_whatever_the_finish_order() -> None:
    archive = seeded_archive()
    parents = archive.select_parents(0)
    finish_order = [(1, 1, 9.0), (0, 1, 3.0), (1, 0, 7.0), (0, 0, 1.0)]
    for group, rollout, reward in finish_order:
        archive.submit(
            0,
            group,
            entry(parent=parents[group].id, step=0, group=group, rollout=rollout, reward=reward),
        )
    outcome = step_outcome(archive, 0, elapsed_s=1.0)
    assert outcome.group_rewards == ((1.0, 3.0), (7.0, 9.0))
    assert outcome.valid_rollouts == 4 and outcome.well_formed_guidance == 4
    assert outcome.best_raw_score == 9.0


def test_step_outcome_refuses_an_incomplete_step() -> None:
    archive = seeded_archive()
    parent = archive.select_parents(0)[0]
    archive.submit(0, 0, entry(parent=parent.id, step=0, group=0, rollout=0, reward=1.0))
    with pytest.raises(RuntimeError, match="incomplete"):
        step_outcome(archive, 0, elapsed_s=0.0)


class RaisingScorer:
    """A scorer whose call raises `error`: a bug in a scorer or a task's case check."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def __call__(self, code: str) -> VerificationResult:
        raise self.error

    def suite(self) -> str:
        return "public"


@pytest.mark.parametrize(
    ("error", "stops"),
    [(ValueError("case check broke"), False), (JudgeUnavailableError("down", attempts=4), True)],
    ids=["scorer-bug", "judge-unavailable"],
)
def test_a_scorer_exception_is_the_rollouts_execution_error_unless_the_judge_is_unavailable(
    error: Exception, stops: bool
) -> None:
    """Reference harness/agent.py: one `except Exception` around the executor and the scorer
    makes any exception the rollout's `execution_error`, "<Type>: <message>", reward 0. Ours
    does that too, except for `JudgeUnavailableError`, which stops the step unreported
    (differences row 10)."""
    archive = seeded_archive()
    parent = archive.select_parents(0)[0]
    program = "int main() { return 0; }"
    answer = f"<solution>\n```cpp\n{program}\n```\n</solution>\n<summary>A plain loop.</summary>"
    settings = RolloutSettings(
        contract=load_contract(REPO / "harbor" / "polyomino_packing"),
        problem="Pack the pieces.",
        model="Qwen/Qwen3-8B",
        guidance_max_tokens=64,
        groups_per_step=2,
        rollouts_per_group=2,
        arm=Arm(name="unguided"),  # no guidance call: the executor and the judge only
    )
    task = RolloutTask(Slot(0, 0, 0), parent, archive.entries[parent.entry_id])
    with OpenAIFixture(answer) as executor_service:
        backend = backend_from_name("gpt_oss_120b", base_url=executor_service.v1_url)
        with ExecutionClient(backend) as executor:
            if stops:
                with pytest.raises(JudgeUnavailableError):
                    run_rollout(task, settings, NoReef("s"), executor, RaisingScorer(error))
                return
            finished = run_rollout(task, settings, NoReef("s"), executor, RaisingScorer(error))
    entry = finished.entry
    assert (entry.verifier_status, entry.verifier_reward) == ("execution_error", 0.0)
    assert entry.verifier_message == "ValueError: case check broke"
    assert entry.solution == program


@pytest.mark.parametrize(("spec", "killed"), [("here:2", True), ("here:3", False), ("", False)])
def test_crash_point_kills_on_the_named_pass_only(spec: str, killed: bool) -> None:
    code = (
        "from harness.run.crash_hook import crash_point\n"
        "crash_point('elsewhere'); crash_point('here'); crash_point('here'); print('survived')"
    )
    env = {**os.environ, ENV_VAR: spec}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if killed:
        assert done.returncode == -signal.SIGKILL and "survived" not in done.stdout
    else:
        assert done.returncode == 0 and "survived" in done.stdout


# --- outages, against real servers -----------------------------------------------------------


@dataclass
class Stack:
    judge: LocalJudge
    reef: ReefService


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    if not (task_dir() / "solution" / "seed.json").is_file():
        pytest.skip(f"{task_dir()}/solution/seed.json (the task's seed archive) is missing")
    root = tmp_path_factory.mktemp("agent-stack")
    grid = {"groups-per-step": 2, "rollouts-per-group": 2}
    with (
        LocalJudge(root / "judge", "--generated-cases", "2", "--seed", "7") as judge,
        OpenAIFixture(GuidanceScript()) as guidance,
        running_reef(root / "reef", upstream=guidance, recipe_config=grid) as reef,
    ):
        yield Stack(judge, reef)


def settings_for(stack: Stack, tmp_path: Path, name: str) -> RunSettings:
    return write_serve_yaml(
        tmp_path / "serve.yaml",
        state_dir=tmp_path / "state",
        reef_port=stack.reef.port,
        judge_url=stack.judge.url,
        groups=2,
        rollouts=2,
        steps=1,
        task=name,  # one Reef scenario per test
    )


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_judge_outage_stops_the_step_unreported_and_the_same_command_resumes(
    stack: Stack, tmp_path: Path
) -> None:
    settings = settings_for(stack, tmp_path, "judge_outage")
    task = task_dir()
    problem = (task / "instruction.md").read_text()
    with OpenAIFixture(executor_reply) as executor:
        adapters = services(settings, executor.v1_url, task)
        adapters.scorer = FrontierCSScorer.for_task(task, closed_port_url(), "0", attempts=1)
        with pytest.raises(StepInterrupted, match=RESUME_HINT) as stopped:
            run_steps(settings, task, problem, adapters, controller_overrides=CONTROLLER)
        adapters.close()
        assert "judge is unavailable" in str(stopped.value)
        reef = ReefReports(settings.reef_url, settings.scenario)
        done = journal(settings.state_dir)
        # Only rollouts that needed no judge were journaled, and exactly those were reported.
        assert all(not j.entry["solution"] for j in done)
        assert len(done) < 4
        assert sorted(r.slot for r in reef.reports()) == sorted(
            (j.step, j.group, j.rollout) for j in done
        )

        adapters = services(settings, executor.v1_url, task)  # the judge is back
        try:
            result = run_steps(settings, task, problem, adapters, controller_overrides=CONTROLLER)
        finally:
            adapters.close()
    assert result.next_step == 1
    slots = sorted((j.step, j.group, j.rollout) for j in journal(settings.state_dir))
    assert slots == [(0, g, r) for g in range(2) for r in range(2)]
    assert sorted(r.slot for r in reef.reports()) == slots


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_dead_executor_fails_each_rollout_and_is_counted_in_the_step_summary(
    stack: Stack, tmp_path: Path
) -> None:
    settings = settings_for(stack, tmp_path, "dead_executor")
    task = task_dir()
    adapters = services(settings, closed_port_url() + "/v1", task)
    try:
        run_steps(
            settings,
            task,
            (task / "instruction.md").read_text(),
            adapters,
            controller_overrides=CONTROLLER,
        )
    finally:
        adapters.close()
    entries = [j.entry for j in journal(settings.state_dir)]
    well_formed = [e for e in entries if e["metadata"]["guidance_format_ok"]]
    assert well_formed and all(e["verifier_status"] == "execution_error" for e in well_formed)
    assert all(e["verifier_message"].startswith("ExecutionTransportError: ") for e in well_formed)
    assert all(e["verifier_reward"] == 0.0 for e in entries)
    summary = next(
        e for e in read_events(event_log_path(settings.state_dir)) if e["event"] == "step_summary"
    )
    assert summary["executor_failures"] == len(well_formed)
    assert summary["degenerate_step"] is True  # every group constant at 0


class RevokedAfter:
    """The stand-in executor, answering `good` requests and then 401 (a revoked key)."""

    def __init__(self, good: int) -> None:
        self.good = good
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.calls += 1
            call = self.calls
        if call > self.good:
            return Reply(status=401, error="invalid API key (scripted: a key revoked mid-run)")
        return executor_reply(request)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_key_revoked_mid_run_stops_the_run_instead_of_scoring_zeros(
    stack: Stack, tmp_path: Path
) -> None:
    settings = settings_for(stack, tmp_path, "revoked_key")
    task = task_dir()
    problem = (task / "instruction.md").read_text()
    with OpenAIFixture(RevokedAfter(good=1)) as executor:
        adapters = services(settings, executor.v1_url, task)
        try:
            with pytest.raises(StepInterrupted, match=RESUME_HINT) as stopped:
                run_steps(settings, task, problem, adapters, controller_overrides=CONTROLLER)
        finally:
            adapters.close()
    message = str(stopped.value)
    assert "HTTP 401" in message and "revoked key" in message and "\n" not in message
    done = journal(settings.state_dir)
    # No rollout was scored 0 because of the refused key: each journaled one either had its
    # executor answer or never reached the executor (a malformed guidance).
    assert all("ExecutorAccessError" not in j.entry["verifier_message"] for j in done)
    assert len(done) < 4
    assert not (settings.state_dir / "guidance-run" / "resume-state.json").exists()


class CountingExecutor:
    """The stand-in executor, holding each answer `hold_s` and counting the requests it holds."""

    def __init__(self, hold_s: float) -> None:
        self.hold_s = hold_s
        self.in_flight = 0
        self.max_in_flight = 0
        self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.calls += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            time.sleep(self.hold_s)
            return executor_reply(request)
        finally:
            with self._lock:
                self.in_flight -= 1


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_executor_never_has_more_than_the_configured_requests_in_flight(
    stack: Stack, tmp_path: Path
) -> None:
    # Four rollouts run at once (max_rollout_workers), but serve.yaml allows two executor calls.
    settings = write_serve_yaml(
        tmp_path / "serve.yaml",
        state_dir=tmp_path / "state",
        reef_port=stack.reef.port,
        judge_url=stack.judge.url,
        groups=2,
        rollouts=2,
        steps=1,
        task="executor_bound",
        max_rollout_workers=4,
        executor_max_in_flight=2,
    )
    assert (settings.max_rollout_workers, settings.executor_max_in_flight) == (4, 2)
    task = task_dir()
    counting = CountingExecutor(hold_s=1.0)
    with OpenAIFixture(counting) as executor:
        adapters = services(settings, executor.v1_url, task)
        try:
            run_steps(settings, task, "problem", adapters, controller_overrides=CONTROLLER)
        finally:
            adapters.close()
    assert counting.calls >= 3  # at most one malformed guidance skips the executor
    assert counting.max_in_flight == 2


def test_reef_outage_stops_the_run_before_any_rollout_is_journaled(
    stack: Stack, tmp_path: Path
) -> None:
    down = closed_port_url()
    settings = write_serve_yaml(
        tmp_path / "serve.yaml",
        state_dir=tmp_path / "state",
        reef_port=int(down.rsplit(":", 1)[1]),
        judge_url=stack.judge.url,  # the judge is up (the run asks it for its suite first)
        groups=2,
        rollouts=2,
        steps=1,
    )
    adapters = services(settings, down + "/v1", task_dir())
    adapters.bridge = FakeTrainingBridge(
        settings.state_dir, groups_per_step=2, rollouts_per_group=2
    )
    adapters.reef = ReefChannel(down, settings.scenario, token="reef-local")
    try:
        with pytest.raises(OSError):  # urllib's URLError: connection refused
            run_steps(settings, task_dir(), "problem", adapters, controller_overrides=CONTROLLER)
    finally:
        adapters.close()
    assert journal(settings.state_dir) == []


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_reported_receipts_reads_every_page_of_reefs_reports(stack: Stack) -> None:
    channel = ReefChannel(stack.reef.url, "guidance-ttt-paging", token="reef-local")
    body = {"model": "m", "messages": [{"role": "user", "content": "guide"}]}
    first, last, never = (channel.guide(body)[1] for _ in range(3))
    report = {
        "score": 0.0,
        "feedback": "invalid: x",
        "metadata": {
            "step": 0,
            "group": 0,
            "rollout": 0,
            "groups_per_step": 2,
            "rollouts_per_group": 2,
        },
    }
    for _ in range(100):  # one full page of 100 reports, then the one that matters on page two
        channel.report(report, first)
    channel.report(report, last)
    assert channel.reported_receipts() == {first, last}
    assert never not in channel.reported_receipts()


def surrogate_answer(request: RecordedRequest) -> Reply:
    """The stand-in executor's answer with a lone UTF-16 surrogate and a NUL in it: the JSON body
    carries `"\\ud800"` (the fixture writes JSON with ASCII escapes, as many servers do). Always
    a program (the parent annotated), whatever the guidance asks: the module's guidance script is
    shared, so where in its cycle (which holds a refusal) this test's calls fall depends on the
    tests run before it."""
    program, _ = apply_variant("annotated", parent_program(request, seed_source()))
    answer = Reply(
        content=f"<solution>\n```cpp\n{program}\n```\n</solution>\n\n<summary>\nAnnotated.\n</summary>"
    )
    content = answer.content.replace("<summary>", "<summary>\ud800 lone half \x00 ", 1)
    return replace(answer, content=content + "\n\ud800", reasoning="thinking \udfff here")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_lone_surrogate_in_an_executor_answer_is_a_recorded_rollout_and_the_step_commits(
    stack: Stack, tmp_path: Path
) -> None:
    settings = settings_for(stack, tmp_path, "surrogate_answer")
    task = task_dir()
    problem = (task / "instruction.md").read_text()
    with OpenAIFixture(surrogate_answer) as executor:
        assert b"\\ud800" in executor_body(executor)
        adapters = services(settings, executor.v1_url, task)
        try:
            result = run_steps(settings, task, problem, adapters, controller_overrides=CONTROLLER)
        finally:
            adapters.close()
    assert result.next_step == 1  # the step committed
    done = journal(settings.state_dir)
    assert len(done) == 4
    for item in done:
        meta = item.entry["metadata"]
        text = meta["execution_text"]
        assert "\ud800" not in text and "\x00" not in text and "\ufffd" in text
        assert meta["model_text_repairs"]["execution_text"] >= 2
        assert "\udfff" not in item.entry["execution_thinking"]
        text.encode("utf-8")  # valid UTF-8 everywhere it is recorded
    reef = ReefReports(settings.reef_url, settings.scenario)
    assert len(reef.reports()) == 4


def executor_body(executor: OpenAIFixture) -> bytes:
    """The raw bytes the stand-in executor answers a chat request with."""
    import httpx

    messages = [{"role": "user", "content": "guidance: try variant"}]
    raw = httpx.post(
        executor.v1_url + "/chat/completions", json={"model": "m", "messages": messages}
    )
    with executor._lock:  # this probe is not one of the run's requests
        executor.requests.clear()
    return raw.content
