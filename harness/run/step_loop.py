"""The steps of one run: settings → state directory → controller → the step loop, with resume.

`run_steps` is what both the Harbor agent and the tests call. It checks the task, re-scores a new
run's seed on the judge's suite, and opens the run's state directory
(`harness.storage.state_dir.StateDirectory`: the archive store under
`<state>/guidance-run/archive/`, created from the seed for a new run, with the in-flight step's
journal replayed). The run controller then decides where to start (identity, finished run,
Reef's checkpoint, archive pairing), the resume repairs run (`harness.run.recovery`: lost
journal slots, a stale committed library), and each step is run and handed to the controller,
which waits for Reef's training, qualifies it and has the state directory commit it in order:
the store, `committed-library.json`, `resume-state.json`.

The adapters (Reef, executor, judge, training bridge, status page) come in as `RunServices`;
`harness.run.services.production_services` builds the real ones from `RunSettings`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.adapters.executor.client import require_api_key
from harness.adapters.judge.suites import SeedOnSuite, check_archive_suite, seed_on_judge_suite
from harness.adapters.reef.channel import ReefChannel
from harness.archive.best import run_best, run_best_score
from harness.contract import DEFAULT_TASK_TEXT, load_task
from harness.library import Archive
from harness.observe.cost import load_prices, usage_by_step
from harness.observe.events import EventSink
from harness.request_shapes import RequestShape
from harness.run.controller import ControllerSettings, RunController, RunStart
from harness.run.crash_hook import crash_point
from harness.run.recovery import (
    check_committed_library,
    rebuild_lost_slots,
    redo_in_flight_step,
    serving_load_changed,
)
from harness.run.rollout import RolloutSettings
from harness.run.services import RunServices
from harness.run.spend import SpendLimit, record_preflight_usage, spend_advice
from harness.run.step import RESUME_HINT, GuidanceHarness, StepInterrupted, StepRun, step_entries
from harness.scorer import JudgeUnavailableError
from harness.settings.run_settings import RunSettings
from harness.state import ArchiveConfig, LibraryEntry
from harness.storage.resume_state import RunIdentity
from harness.storage.run_files import load_seed, write_serving_load
from harness.storage.state_dir import StateDirectory

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunResult:
    """What a run leaves for its caller (and for Harbor's `context.metadata["reef"]`)."""

    start_step: int
    next_step: int
    step_summaries: tuple[Mapping[str, Any], ...]
    agent_record_ids: tuple[str, ...]
    runtime_load_id: str | None
    best: LibraryEntry | None
    #: Ours: the receipts of every well-formed rollout of the run, all invocations included.
    all_agent_record_ids: tuple[str, ...] = ()

    def reef_metadata(self) -> dict[str, Any]:
        """The documented `context.metadata["reef"]` block (JSON values only): as the
        reference's, `agent_record_ids` are this invocation's well-formed rollouts (the steps
        from `start_step` on); `all_agent_record_ids` (ours) adds earlier invocations'."""
        return {
            "agent_record_ids": list(self.agent_record_ids),
            "all_agent_record_ids": list(self.all_agent_record_ids),
            "start_step": self.start_step,
            "next_step": self.next_step,
            "runtime_load_id": self.runtime_load_id,
            "step_summaries": [dict(s) for s in self.step_summaries],
        }


def run_steps(
    settings: RunSettings,
    task_dir: Path,
    problem: str,
    services: RunServices,
    *,
    workers: int | None = None,
    controller_overrides: Mapping[str, Any] | None = None,
) -> RunResult:
    """Run (or resume) the run described by `settings` up to STEPS and return its result.

    At most `settings.max_rollout_workers` rollouts run at once (`workers` overrides it, for
    tests that want one rollout at a time). Raises what stops the run: `ResumeRefused` and
    friends from the controller, `StepInterrupted` (judge down; re-run to resume), Reef or
    journal errors. Nothing is lost by any of them: finished rollouts are journaled, committed
    steps are committed.
    """
    require_api_key(services.executor.backend)  # a missing key stops the run before any step
    # The whole task directory is checked before anything runs. The default task text is the
    # task's own instruction.md (what Harbor hands the agent as `problem`); a variant
    # (`harness.task_text`, docs/differences.md) brings its own problem text.
    contract, text = load_task(task_dir, settings.task_text)
    if settings.task_text != DEFAULT_TASK_TEXT:
        problem = text
    config = ArchiveConfig(
        rollout_n=settings.rollouts_per_group,
        groups_per_batch=settings.groups_per_step,
        score_direction=contract.score_direction,
    )
    on_suite = _seed_on_suite(settings, task_dir, services)
    with StateDirectory.open(
        settings.state_dir,
        config,
        lambda: _seed_archive(config, on_suite, settings),
        crash=crash_point,
    ) as state:
        rollout = RolloutSettings(
            contract=contract,
            problem=problem,
            model=settings.model,
            guidance_max_tokens=settings.guidance_max_tokens,
            groups_per_step=settings.groups_per_step,
            rollouts_per_group=settings.rollouts_per_group,
            arm=settings.arm_spec,
            guidance_shape=settings.guidance_shape,
        )
        seed_record = task_dir / settings.seed_file
        overrides = dict(controller_overrides or {})
        try:
            return _run_open(
                settings, services, state, on_suite, seed_record, rollout, workers, overrides
            )
        except BaseException as exc:
            services.events.emit("error", message=f"{type(exc).__name__}: {exc}", where="run")
            raise


def _seed_on_suite(settings: RunSettings, task_dir: Path, services: RunServices) -> SeedOnSuite:
    """The task's seed record on the judge's suite (a new run's seed is re-scored there first)."""
    new_run = StateDirectory.is_new(settings.state_dir)
    try:
        return seed_on_judge_suite(
            services.scorer,
            task_dir / settings.seed_file,
            load_seed(task_dir, settings.seed_file) if new_run else None,
        )
    except JudgeUnavailableError as exc:
        raise StepInterrupted(
            f"the judge is unavailable before the run starts: {exc}; {RESUME_HINT}"
        ) from exc


def _seed_archive(config: ArchiveConfig, seed: SeedOnSuite, settings: RunSettings) -> Archive:
    log.info("new archive in %s from the seed (%s)", settings.state_dir, seed.suite)
    assert seed.entry is not None  # a new run's seed is aligned with the judge's suite first
    return Archive.from_seed(config, seed.entry, settings.run_seed)


def _run_open(
    settings: RunSettings,
    services: RunServices,
    state: StateDirectory,
    on_suite: SeedOnSuite,
    seed_record: Path,
    rollout: RolloutSettings,
    workers: int | None,
    controller_overrides: Mapping[str, Any],
) -> RunResult:
    """The steps of a run whose state directory is open: resume checks, then the step loop."""
    archive, events = state.archive, services.events
    check_archive_suite(archive, seed_record, on_suite.suite, settings.judge_url)
    if on_suite.record is not None:
        events.emit("seed_rescored", **on_suite.record)
    controller = RunController(
        ControllerSettings.for_run(settings, **controller_overrides),
        RunIdentity.from_dict(settings.identity()),
        services.executor.backend.safe_dict(),
        services.bridge,
        services.status,
        state,
        events=events,
        gate=services.gate,
    )
    start = controller.begin()
    if not start.archive_holds_start_step:  # else the recovered step's commit rewrites it
        check_committed_library(state, events)
    in_flight_step = state.next_step  # the step whose journal was replayed on opening
    # The open step's serving load and Reef's now, when a restarted Reef parted them.
    reloaded: tuple[str, str] | None = None
    if start.recovered_step is None:
        reloaded = serving_load_changed(state, in_flight_step, lambda: _serving_load(services.reef))
    if reloaded is not None and start.start_step < start.steps:
        redo_in_flight_step(state, in_flight_step, events, reloaded)
        archive = state.archive
    in_flight = state.in_flight + rebuild_lost_slots(
        state.store,
        archive,
        in_flight_step,
        services.reef,
        events,
        redo_in_flight=reloaded is not None,
    )
    _emit_run_started(events, settings, services, controller, start, on_suite.suite, archive)
    spend = SpendLimit(
        settings.max_cost_usd,
        settings.max_tokens,
        load_prices(None, settings_prices=settings.pricing),
        settings.model,
        services.executor.backend.model,
        preflight=record_preflight_usage(settings.state_dir, events),
        advice=spend_advice(settings.experiment_name, os.environ),
    )
    spend.require_prices(settings.arm_spec.guided)
    harness = GuidanceHarness(
        archive=archive,
        store=state.store,
        settings=rollout,
        reef=services.reef,
        executor=services.executor,
        scorer=services.scorer,
        workers=workers or settings.max_rollout_workers,
        events=events,
    )
    summaries = list(start.step_summaries)
    for step in range(start.start_step, start.steps):
        if step == start.recovered_step:
            step_run = harness.rebuild_step(step)
        else:
            journaled = in_flight if step == in_flight_step else ()
            if not journaled:  # a step in progress completes whatever the spend
                spend.check(archive.entries.values(), step, events)
            _note_serving_load(settings.state_dir, step, services.reef)
            step_run = harness.run_step(step, journaled)
        summary = controller.complete_step(step_run.outcome)
        summaries.append(summary)
        _emit_step_end(events, archive, step, summary, step_run, controller.gate.mode, settings.arm)
        spend.check(archive.entries.values(), step + 1, events, stop=False)
    result = RunResult(
        start_step=start.start_step,
        next_step=controller.next_step,
        step_summaries=tuple(summaries),
        agent_record_ids=well_formed_receipts(archive, from_step=start.start_step),
        all_agent_record_ids=well_formed_receipts(archive),
        runtime_load_id=_runtime_load_id(services.reef),
        best=run_best(archive),
    )
    events.emit(
        "run_finished",
        next_step=result.next_step,
        best_raw_score=result.best.verifier_raw_score if result.best else None,
    )
    return result


def _emit_run_started(
    events: EventSink,
    settings: RunSettings,
    services: RunServices,
    controller: RunController,
    start: RunStart,
    suite: str,
    archive: Archive,
) -> None:
    best = run_best(archive)  # the seed's before the first step (`harness.archive.best`)
    events.emit(
        "run_started",
        mode=controller.gate.mode,
        suite=suite,
        state_dir=str(settings.state_dir),
        start_step=start.start_step,
        steps=start.steps,
        groups=settings.groups_per_step,
        rollouts=settings.rollouts_per_group,
        best_raw_score=None if best is None else best.verifier_raw_score,
        guidance_model=settings.model,
        executor_model=services.executor.backend.model,
        task_text=settings.task_text,
        arm=settings.arm,
        parent_selection=settings.parent_selection,
        run_seed=settings.run_seed,
        # How each endpoint's requests are shaped (harness.request_shapes; `status` shows them).
        guidance_request=settings.guidance_shape.describe() if settings.arm_spec.guided else None,
        executor_request=RequestShape(
            services.executor.backend.dialect, services.executor.backend.drop
        ).describe(),
        # Where this run's settings and services are: status, inspect and plot of this
        # state directory read them instead of the defaults.
        settings_file=str(settings.config_path),
        reef_url=settings.reef_url,
        judge_url=settings.judge_url,
        scenario=settings.scenario,
    )


def _emit_step_end(
    events: EventSink,
    archive: Archive,
    step: int,
    summary: Mapping[str, Any],
    run: StepRun,
    mode: str,
    arm: str,
) -> None:
    entries = step_entries(archive, step)
    usage = usage_by_step(entries).get(step)
    hits = [e.metadata.get("verification_artifacts", {}).get("judge_cache_hit") for e in entries]
    events.emit(
        "step_summary",
        **dict(summary),
        mode=mode,
        arm=arm,
        executor_failures=run.executor_failures,
        usage=usage.to_dict() if usage else None,
        judge_cache_hits=sum(hit is True for hit in hits),
        # The run's best before this step, from the archive: the step's "+Δ" is the same
        # whether the run went through uninterrupted or resumed in the middle of the step.
        previous_best_raw_score=run_best_score(archive, step - 1),
    )
    events.emit("step_committed", step=step, next_step=step + 1)


def well_formed_receipts(archive: Archive, from_step: int = 0) -> tuple[str, ...]:
    """The receipts of the rollouts with well-formed guidance of steps `from_step` on, in step,
    group, rollout order."""
    rollouts = [
        e
        for e in archive.entries.values()
        if e.timestep >= from_step + 1
        and e.metadata.get("guidance_format_ok")
        and e.metadata.get("agent_record_id") is not None
    ]
    rollouts.sort(
        key=lambda e: (e.timestep, e.metadata.get("group", 0), e.metadata.get("rollout", 0))
    )
    return tuple(str(e.metadata["agent_record_id"]) for e in rollouts)


def _note_serving_load(state_dir: Path, step: int, reef: ReefChannel) -> None:
    """Note the load Reef serves `step` under, before the step's first guidance call, so that a
    resume can tell a restarted Reef (`harness.run.recovery.serving_load_changed`)."""
    load = _runtime_load_id(reef)
    if load is not None:
        write_serving_load(state_dir, step, load)


def _serving_load(reef: ReefChannel) -> str | None:
    """The load Reef serves the run's scenario under. A restarted Reef lists a scenario on its
    status page only once a request for it has loaded it: asking for its stored reports does."""
    load = _runtime_load_id(reef)
    if load is None:
        try:
            reef.stored_reports()
        except Exception as exc:  # then the open step is replayed as it is
            log.warning("could not load the scenario on Reef to read its serving load: %s", exc)
            return None
        load = _runtime_load_id(reef)
    return load


def _runtime_load_id(reef: ReefChannel) -> str | None:
    try:
        return reef.runtime_load_id()
    except Exception as exc:  # informative only: never fail a finished run over it
        log.warning("could not read Reef's runtime load id: %s", exc)
        return None
