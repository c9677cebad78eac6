"""Frozen-guidance mode on CPU: the CPU rehearsal through a real `reef serve -c <serve-frozen>`.

Real: Reef's record-only service started from a serve-frozen.yaml variant (the repository's file
with the test's ports; tttd report contract), the local judge on a small generated suite, the
run loop, store, journal and run controller with the frozen gate. Stand-ins: the guidance model
behind Reef and the executor (`harness.rehearsal.stand_ins`), both holding every request to
OpenAI's own request types (`OpenAIFixture(mode="strict")`: the installed `openai` package's
`CompletionCreateParams`, unknown fields refused as the API refuses them), so the runs here use
`harness.guidance.request.dialect: openai`. Every training path is made to fail loudly, so a run
that touched one would not finish.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from judge_fakes import LocalJudge

from harness.adapters.judge.suites import SuiteMismatch
from harness.adapters.reef.training_bridge import RayTrainingBridge
from harness.observe.events import read_events
from harness.rehearsal.rehearse import RehearsalOptions, write_settings
from harness.rehearsal.stand_ins import GUIDANCE_MODEL
from harness.run.controller import ResumeRefused
from harness.run.crash_hook import ENV_VAR
from harness.run.gate import TrainedGate
from harness.run.step_loop import RunResult
from harness.settings.run_settings import RunSettings
from harness.storage.run_files import event_log_path
from harness.storage.store import read_committed
from tests.openai_fixture import OpenAIFixture
from tests.reef_fixtures import ReefService, free_port, running_reef
from tests.rehearsal_support import (
    REPO,
    GuidanceScript,
    ReefReports,
    executor_reply,
    journal,
    run_cpu_steps,
    task_dir,
    write_serve_yaml,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

G, R, STEPS = 2, 2, 2
GRID = {(s, g, r) for s in range(STEPS) for g in range(G) for r in range(R)}
JUDGE_SEED, CASES = 5, 2
SUITE = f"generated:{JUDGE_SEED}:{CASES}"


@dataclass
class Stack:
    root: Path
    judge: LocalJudge
    guidance: OpenAIFixture
    executor: OpenAIFixture
    reef: ReefService

    def settings(self, name: str, steps: int = STEPS) -> RunSettings:
        """A frozen settings file for one test: its own state directory and Reef scenario."""
        directory = self.root / name
        directory.mkdir(exist_ok=True)
        return write_settings(
            directory / "serve-frozen.yaml",
            directory / "state",
            RehearsalOptions(steps=steps, groups=G, rollouts=R, guidance_dialect="openai"),
            guidance_url=self.guidance.base_url,
            judge_url=self.judge.url,
            reef_port=self.reef.port,
            task=f"frozen_{name}",
        )


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("frozen")
    if not (task_dir() / "solution" / "seed.json").is_file():
        pytest.skip(f"{task_dir()}/solution/seed.json (the task's seed archive) is missing")
    port = free_port()
    with (
        LocalJudge(
            root / "judge", "--generated-cases", str(CASES), "--seed", str(JUDGE_SEED)
        ) as judge,
        OpenAIFixture(
            GuidanceScript(malformed=[1]), model=GUIDANCE_MODEL, mode="strict"
        ) as guidance,
        OpenAIFixture(executor_reply, mode="strict") as executor,
    ):
        reef_file = write_settings(
            root / "serve-frozen.yaml",
            root / "reef-state",
            RehearsalOptions(steps=STEPS, groups=G, rollouts=R, guidance_dialect="openai"),
            guidance_url=guidance.base_url,
            judge_url=judge.url,
            reef_port=port,
        ).config_path
        with running_reef(root / "reef", config=reef_file, port=port) as reef:
            yield Stack(root, judge, guidance, executor, reef)


@dataclass
class FrozenRun:
    settings: RunSettings
    result: RunResult
    reports: ReefReports


@pytest.fixture(scope="module")
def frozen_run(stack: Stack) -> Iterator[FrozenRun]:
    settings = stack.settings("whole_run")
    assert settings.frozen and settings.identity()["mode"] == "frozen"

    def no_training(*args: object, **kwargs: object) -> None:
        raise AssertionError("a frozen-guidance run made a training call")

    with pytest.MonkeyPatch.context() as patch:
        for owner, name in (
            (TrainedGate, "open"),
            (TrainedGate, "settle"),
            (RayTrainingBridge, "health"),
            (RayTrainingBridge, "start_rollout_id"),
        ):
            patch.setattr(owner, name, no_training)
        result = run_cpu_steps(settings, stack.executor.v1_url, task_dir())
    yield FrozenRun(settings, result, ReefReports(settings.reef_url, settings.scenario))


def test_frozen_run_commits_every_step_without_training(
    stack: Stack, frozen_run: FrozenRun
) -> None:
    assert (frozen_run.result.start_step, frozen_run.result.next_step) == (0, STEPS)
    # Both endpoints held every body to OpenAI's request types and refused none of them.
    assert stack.guidance.refused == [] and stack.executor.refused == []
    bodies = [r.body for r in stack.guidance.completion_requests()]
    assert bodies and all("top_k" not in b and "chat_template_kwargs" not in b for b in bodies)
    assert frozen_run.settings.identity()["guidance_request"] == "openai"
    # `status` shows how each endpoint's requests are shaped (from the run's own records).
    from harness.results import load_run, run_requests

    shapes = run_requests(load_run(frozen_run.settings.state_dir))
    assert shapes == {"guidance": "openai", "executor": "sglang"}
    # The harness's own look at a new scenario's reports leaves no 404 warning in Reef's log.
    assert "UnknownScenario" not in stack.reef.log_text()
    summaries = frozen_run.result.step_summaries
    assert [s["step"] for s in summaries] == list(range(STEPS))
    assert all(s["train_metrics"] == {} and s["grad_norm"] is None for s in summaries)
    state = frozen_run.settings.state_dir
    assert not (state / "checkpoints").exists() and not (state / "stack" / "slime-driver").exists()
    assert read_committed(state / "guidance-run" / "archive")[1] == STEPS - 1


def test_every_frozen_report_references_its_own_receipt(frozen_run: FrozenRun) -> None:
    receipts = frozen_run.reports.inferences()
    reports = frozen_run.reports.reports()
    assert len(receipts) == len(reports) == len(GRID), "one guidance call and report per slot"
    assert Counter(r.slot for r in reports) == Counter(GRID)
    by_entry = {j.entry["id"]: j.entry for j in journal(frozen_run.settings.state_dir)}
    for report in reports:
        entry = by_entry[report.metadata["library_entry_id"]]
        assert report.references == (entry["metadata"]["agent_record_id"],)
        assert report.score == entry["verifier_reward"]
    assert sorted(r.references[0] for r in reports) == sorted(receipts)


def test_frozen_records_are_labelled_frozen_and_name_the_suite(frozen_run: FrozenRun) -> None:
    state = frozen_run.settings.state_dir
    stored = json.loads((state / "guidance-run" / "resume-state.json").read_text())
    assert stored["identity"]["mode"] == "frozen"
    assert stored["identity"]["lora_rank"] == 0
    events = read_events(event_log_path(frozen_run.settings.state_dir))
    (started,) = [e for e in events if e["event"] == "run_started"]
    assert (started["mode"], started["suite"]) == ("frozen", SUITE)
    summaries = [e for e in events if e["event"] == "step_summary"]
    assert [e["mode"] for e in summaries] == ["frozen"] * STEPS
    # The seed file measured the seed on the public cases; the judge serves another suite, so
    # the run re-scored the seed there before comparing anything, and recorded both.
    (rescored,) = [e for e in events if e["event"] == "seed_rescored"]
    assert (rescored["from_suite"], rescored["suite"]) == ("public", SUITE)
    archive, _ = read_committed(state / "guidance-run" / "archive")
    seeds = [e for e in archive.entries.values() if e.timestep == 0]
    assert {e.metadata["suite"] for e in seeds} == {SUITE}
    assert {e.verifier_raw_score for e in seeds} == {rescored["score"]}
    assert rescored["score"] != rescored["from_score"]


def test_verdict_cache_hits_are_counted_in_the_run_events(frozen_run: FrozenRun) -> None:
    """Every judged rollout's event says whether the local judge answered it from its verdict
    cache, as its verdict does, and each step summary counts the step's hits."""
    events = read_events(event_log_path(frozen_run.settings.state_dir))
    finished = [e for e in events if e["event"] == "rollout_finished"]
    by_slot = {
        (j.step, j.group, j.rollout): j.entry for j in journal(frozen_run.settings.state_dir)
    }
    for event in finished:
        entry = by_slot[event["step"], event["group"], event["rollout"]]
        judged = entry["metadata"]["verification_artifacts"].get("judge_cache_hit")
        assert event["judge_cache_hit"] == judged
        assert isinstance(judged, bool) == bool(entry["solution"])  # judged iff a program came
    assert any(e["judge_cache_hit"] is not None for e in finished)
    hits = [e for e in finished if e["judge_cache_hit"] is True]
    summaries = {e["step"]: e for e in events if e["event"] == "step_summary"}
    for step, summary in summaries.items():
        assert summary["judge_cache_hits"] == sum(e["step"] == step for e in hits)


def test_frozen_state_refuses_a_trained_resume(stack: Stack, frozen_run: FrozenRun) -> None:
    state = frozen_run.settings.state_dir
    before = (state / "guidance-run" / "resume-state.json").read_bytes()
    trained = write_serve_yaml(
        stack.root / "trained-serve.yaml",
        state_dir=state,
        reef_port=stack.reef.port,
        judge_url=stack.judge.url,
        groups=G,
        rollouts=R,
        steps=STEPS + 1,
        task=frozen_run.settings.task,
    )
    with pytest.raises(ResumeRefused, match="mode stored 'frozen', requested 'trained'"):
        run_cpu_steps(trained, stack.executor.v1_url, task_dir())
    assert (state / "guidance-run" / "resume-state.json").read_bytes() == before


def test_resume_against_a_judge_on_another_suite_is_refused(
    stack: Stack, frozen_run: FrozenRun
) -> None:
    state = frozen_run.settings.state_dir
    before = (state / "guidance-run" / "resume-state.json").read_bytes()
    with LocalJudge(stack.root / "judge-other", "--generated-cases", "1", "--seed", "6") as other:
        settings = write_settings(
            frozen_run.settings.config_path,
            state,
            RehearsalOptions(steps=STEPS + 1, groups=G, rollouts=R),
            guidance_url=stack.guidance.base_url,
            judge_url=other.url,
            reef_port=stack.reef.port,
            task=frozen_run.settings.task,
        )
        with pytest.raises(SuiteMismatch, match=f"measured on suite {SUITE}.*serves suite"):
            run_cpu_steps(settings, stack.executor.v1_url, task_dir())
    assert (state / "guidance-run" / "resume-state.json").read_bytes() == before


# --- SIGKILL and resume, as in trained mode -------------------------------------------------

# (reports in Reef, journaled rollouts, committed archive step, resume next_step) at the kill.
CRASHES = {
    "after_journal:2": (1, 2, -1, None),  # journaled, report not yet posted
    "after_report:4": (4, 4, -1, None),  # all of step 0 reported, nothing committed
    "after_archive_commit:1": (4, 4, 0, None),  # archive committed, resume state not
    "after_report:6": (6, 6, 0, 1),  # mid-step of step 1
}


def driver(
    settings: RunSettings, executor_url: str, crash_at: str | None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    if crash_at:
        env[ENV_VAR] = crash_at
    command = [sys.executable, "-m", "tests.rehearsal_support"]
    command += ["--serve-yaml", str(settings.config_path), "--task-dir", str(task_dir())]
    command += ["--executor-url", executor_url, "--workers", "1"]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=240)


@pytest.mark.parametrize("point", list(CRASHES))
def test_killed_frozen_run_resumes_without_losing_or_repeating_a_slot(
    stack: Stack, point: str
) -> None:
    settings = stack.settings("crash_" + "".join(c if c.isalnum() else "_" for c in point))
    reef = ReefReports(settings.reef_url, settings.scenario)
    with OpenAIFixture(executor_reply, mode="strict") as executor:
        killed = driver(settings, executor.v1_url, point)
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
        reports, journaled, archive_step, next_step = CRASHES[point]
        assert len(reef.reports()) == reports
        assert len(journal(settings.state_dir)) == journaled
        assert read_committed(settings.state_dir / "guidance-run" / "archive")[1] == archive_step
        resume = settings.state_dir / "guidance-run" / "resume-state.json"
        stored = json.loads(resume.read_text()) if resume.exists() else None
        assert (stored["next_step"] if stored else None) == next_step

        resumed = driver(settings, executor.v1_url, None)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert json.loads(resumed.stdout.strip().splitlines()[-1])["next_step"] == STEPS
        entries = [j.entry for j in journal(settings.state_dir)]
        well_formed = sum(1 for e in entries if e["metadata"]["guidance_format_ok"])
        assert len(executor.completion_requests()) == well_formed
    slots = Counter((j.step, j.group, j.rollout) for j in journal(settings.state_dir))
    assert set(slots) == GRID and set(slots.values()) == {1}
    stored_reports = reef.reports()
    assert Counter(r.slot for r in stored_reports) == Counter(GRID)
    assert len(reef.inferences()) == len(GRID), "no guidance call was made twice"
    by_slot = {(j.step, j.group, j.rollout): j.entry for j in journal(settings.state_dir)}
    for report in stored_reports:
        assert report.references == (by_slot[report.slot]["metadata"]["agent_record_id"],)
    assert json.loads(resume.read_text())["identity"]["mode"] == "frozen"
