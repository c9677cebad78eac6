"""Wiring of one run: settings → store → archive → harness → controller, with resume.

`run_steps` is what both the Harbor agent and the tests call. It opens (or creates from the task's
seed) the archive store under `<state>/guidance-run/archive/`, replays the in-flight step's
journal, lets the run controller decide where to start (identity, finished run, Reef's checkpoint,
archive pairing), then runs each step and hands it to the controller, which waits for Reef's
training, qualifies it and commits in this order: the archive store, then
`guidance-run/committed-library.json` (the committed archive in the Discover `library.json`
layout, atomically), then `resume-state.json`, which records the library file's SHA-256. On
resume that file is checked against the hash; a missing or different file is rebuilt from the
store (the durable source of truth) with a warning and a `committed_library_rebuilt` event.

The adapters (Reef, executor, judge, training bridge, status page) come in as `RunServices`;
`production_services` builds the real ones from `RunSettings`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.agent import RESUME_HINT, GuidanceHarness, StepInterrupted, StepRun, step_entries
from harness.atomic import remove_stale_temps
from harness.backends import ExecutionBackend, backend_from_name
from harness.contract import load_task
from harness.cost import usage_by_step
from harness.crash_hook import crash_point
from harness.events import EVENTS_FILE, EventSink, NullSink
from harness.execution import ExecutionClient
from harness.frontiercs_client import FrontierCSScorer
from harness.library import Archive, ArchiveError
from harness.library_json import MAX_LIBRARY_BYTES, write_library_json
from harness.reef_channel import ReefChannel
from harness.reef_crosscheck import ReefDisagrees, ReportSource, cross_check, describe
from harness.reef_status import ReefStatusClient, StatusSource
from harness.resume_state import RESUME_STATE, ResumeState, RunIdentity
from harness.rollout import Executor, RolloutSettings
from harness.run_controller import ControllerSettings, RunController
from harness.run_settings import RunSettings
from harness.scorer import JudgeUnavailableError, Scorer
from harness.state import ArchiveConfig, LibraryEntry
from harness.state_files import StateFileError, read_bytes
from harness.store import HEAD, ArchiveStore, JournalRecord, read_committed
from harness.suites import SeedOnSuite, check_archive_suite, seed_on_judge_suite
from harness.training_bridge import BridgeAddress, RayTrainingBridge, TrainingBridge
from harness.training_gate import FrozenGate, StepGate

log = logging.getLogger(__name__)

RUN_DIR = RESUME_STATE.parent  # guidance-run
ARCHIVE_DIR = RUN_DIR / "archive"
COMMITTED_LIBRARY = RUN_DIR / "committed-library.json"
SEED_FILE = Path("solution") / "seed.json"


def load_seed(task_dir: Path, seed_file: str | Path = SEED_FILE) -> LibraryEntry:
    """The task's seed candidate: the `entry` of `<task>/<seed_file>` (a verified, judged
    program with a code-free summary; `solution/seed.json` unless the run's `seed` setting names
    an alternative seed of the task)."""
    path = Path(task_dir) / seed_file
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise FileNotFoundError(
            f"{path} is missing: every task ships its judged seed candidate there "
            "(docs/design.md §9)"
        ) from exc
    if not isinstance(data, dict) or "entry" not in data:
        raise ValueError(f"{path} must hold an object with the seed's `entry`")
    return LibraryEntry.from_dict(data["entry"])


@dataclass
class RunServices:
    """The adapters of a run. `close` releases what `production_services` opened.

    A trained run has Reef's training `bridge` and `status` page (the controller builds its
    training barrier on them); a frozen-guidance run has `gate=FrozenGate()` and neither."""

    reef: ReefChannel
    executor: Executor
    scorer: Scorer
    bridge: TrainingBridge | None
    status: StatusSource | None
    events: EventSink = field(default_factory=NullSink)
    closers: list[Callable[[], None]] = field(default_factory=list)
    gate: StepGate | None = None

    def close(self) -> None:
        for close in self.closers:
            close()


def production_services(
    settings: RunSettings,
    task_dir: Path,
    *,
    executor_url: str | None = None,
    bridge: TrainingBridge | None = None,
    events: EventSink | None = None,
    backend: ExecutionBackend | None = None,
) -> RunServices:
    """The real adapters: Reef at `settings.reef_url`, the configured executor backend (at
    `executor_url` when given), the FrontierCS judge at `settings.judge_url` with the task's case
    check, and the step gate of the run's mode: trained, Reef's Ray training bridge (address from
    `<run-dir>/slime-driver/runtime.yaml`) unless `bridge` is given, and Reef's status page;
    frozen, `FrozenGate` (no bridge: nothing is trained, no step waits). `backend` replaces the
    configured executor backend (the rehearsal's labelled stand-in)."""
    executor = ExecutionClient(backend or executor_backend(settings, executor_url))
    reef = ReefChannel(settings.reef_url, settings.scenario, token=settings.reef_token)
    scorer = FrontierCSScorer.for_task(
        task_dir, settings.judge_url, settings.judge_problem_id or None
    )
    if settings.frozen:
        if bridge is not None:
            raise ValueError(
                f"{settings.config_path} describes a frozen-guidance run, which trains nothing "
                "and takes no training bridge; use serve.yaml for a trained run"
            )
        return RunServices(
            reef=reef,
            executor=executor,
            scorer=scorer,
            bridge=None,
            status=None,
            events=events or NullSink(),
            closers=[executor.close],
            gate=FrozenGate(),
        )
    status = ReefStatusClient(settings.reef_url, token=settings.reef_token)
    if bridge is None:
        address = BridgeAddress.read(settings.run_dir / "slime-driver" / "runtime.yaml")
        bridge = RayTrainingBridge(address)
    return RunServices(
        reef=reef,
        executor=executor,
        scorer=scorer,
        bridge=bridge,
        status=status,
        events=events or NullSink(),
        closers=[executor.close, status.close],
    )


@dataclass(frozen=True)
class RunResult:
    """What a run leaves for its caller (and for Harbor's `context.metadata["reef"]`)."""

    start_step: int
    next_step: int
    step_summaries: tuple[Mapping[str, Any], ...]
    agent_record_ids: tuple[str, ...]
    runtime_load_id: str | None
    best: LibraryEntry | None

    def reef_metadata(self) -> dict[str, Any]:
        """The documented `context.metadata["reef"]` block (JSON values only)."""
        return {
            "agent_record_ids": list(self.agent_record_ids),
            "start_step": self.start_step,
            "next_step": self.next_step,
            "runtime_load_id": self.runtime_load_id,
            "step_summaries": [dict(s) for s in self.step_summaries],
        }


def executor_backend(settings: RunSettings, executor_url: str | None = None) -> ExecutionBackend:
    """The run's executor backend: the configured one (at `executor_url` when given), with at
    most `executor_max_in_flight` requests in flight."""
    effort = (
        settings.gpt_oss_reasoning_effort if settings.executor_backend == "gpt_oss_120b" else None
    )
    return backend_from_name(
        settings.executor_backend,
        reasoning_effort=effort,
        base_url=executor_url,
        concurrency=settings.executor_max_in_flight,
    )


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
    contract, _ = load_task(task_dir)  # the whole task directory is checked before anything runs
    run_dir = settings.state_dir / RUN_DIR
    run_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(run_dir)  # a resume-state write cut short leaves only its temp file
    config = ArchiveConfig(
        rollout_n=settings.rollouts_per_group,
        groups_per_batch=settings.groups_per_step,
        score_direction=contract.score_direction,
    )
    seed_record = task_dir / settings.seed_file
    new_run = not os.path.lexists(settings.state_dir / ARCHIVE_DIR / HEAD)
    try:
        on_suite = seed_on_judge_suite(
            services.scorer,
            seed_record,
            load_seed(task_dir, settings.seed_file) if new_run else None,
        )
    except JudgeUnavailableError as exc:
        raise StepInterrupted(
            f"the judge is unavailable before the run starts: {exc}; {RESUME_HINT}"
        ) from exc
    suite = on_suite.suite
    store = _open_store(settings.state_dir / ARCHIVE_DIR, config, task_dir, on_suite)
    try:
        restored = store.load()
        check_archive_suite(restored.archive, seed_record, suite, settings.judge_url)
        if on_suite.record is not None:
            services.events.emit("seed_rescored", **on_suite.record)
        archive = restored.archive
        committed = [restored.committed_step]

        def commit_archive(step: int) -> str:
            if step > committed[0]:  # else committed before a crash: the commit is idempotent
                crash_point("before_archive_commit")
                store.commit_step(archive, step)
                committed[0] = step
                crash_point("after_archive_commit")
            return write_library_json(archive, settings.state_dir / COMMITTED_LIBRARY)

        controller = RunController(
            ControllerSettings.for_run(settings, **dict(controller_overrides or {})),
            RunIdentity.from_dict(settings.identity()),
            services.executor.backend.safe_dict(),
            services.bridge,
            services.status,
            commit_archive,
            lambda: committed[0] if committed[0] >= 0 else None,
            events=services.events,
            gate=services.gate,
        )
        start = controller.begin()
        events = services.events
        if not start.archive_holds_start_step:  # else the recovered step's commit rewrites it
            check_committed_library(settings.state_dir, store.root, events)
        in_flight = restored.in_flight + rebuild_lost_slots(
            store, archive, restored.next_step, services.reef, events
        )
        events.emit(
            "run_started",
            mode=controller.gate.mode,
            suite=suite,
            state_dir=str(settings.state_dir),
            start_step=start.start_step,
            steps=start.steps,
            groups=settings.groups_per_step,
            rollouts=settings.rollouts_per_group,
            best_raw_score=_best_score(archive),
            guidance_model=settings.model,
            executor_model=services.executor.backend.model,
        )
        harness = GuidanceHarness(
            archive=archive,
            store=store,
            settings=RolloutSettings(
                contract=contract,
                problem=problem,
                model=settings.model,
                guidance_max_tokens=settings.guidance_max_tokens,
                groups_per_step=settings.groups_per_step,
                rollouts_per_group=settings.rollouts_per_group,
            ),
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
                journaled = in_flight if step == restored.next_step else ()
                step_run = harness.run_step(step, journaled)
            summary = controller.complete_step(step_run.outcome)
            summaries.append(summary)
            _emit_step_end(events, archive, step, summary, step_run, controller.gate.mode)
        result = RunResult(
            start_step=start.start_step,
            next_step=controller.next_step,
            step_summaries=tuple(summaries),
            agent_record_ids=well_formed_receipts(archive),
            runtime_load_id=_runtime_load_id(services.reef),
            best=archive.best_entry(),
        )
        events.emit(
            "run_finished",
            next_step=result.next_step,
            best_raw_score=result.best.verifier_raw_score if result.best else None,
        )
        return result
    except BaseException as exc:
        services.events.emit("error", message=f"{type(exc).__name__}: {exc}", where="run")
        raise
    finally:
        store.close()


def _best_score(archive: Archive) -> float | None:
    """The archive's best raw score (the seed's before the first step), for the progress line."""
    best = archive.best_entry()
    return None if best is None else best.verifier_raw_score


def rebuild_lost_slots(
    store: ArchiveStore, archive: Archive, step: int, reef: ReportSource, events: EventSink
) -> tuple[JournalRecord, ...]:
    """Cross-check the journal with Reef's stored reports (`harness.reef_crosscheck`; a
    disagreement raises `ReefDisagrees` naming the slot) and journal the in-flight slots whose
    line was lost but whose report Reef holds, rebuilt from that report, so they are neither
    run nor reported again. Returns their journal records."""
    rebuilt = cross_check(archive, step, reef)
    records = []
    for slot in rebuilt:
        try:
            store.record_rollout(archive, slot.step, slot.group, slot.rollout, slot.entry)
        except ArchiveError as exc:
            raise ReefDisagrees(
                f"step {slot.step} g{slot.group}r{slot.rollout}: Reef's report does not fit the "
                f"archive ({exc}); use the state directory that belongs to this Reef scenario"
            ) from exc
        records.append(JournalRecord(slot.step, slot.group, slot.rollout, slot.entry))
    if rebuilt:
        log.warning(
            "the journal had lost %d reported slot(s) (%s); rebuilt from Reef's stored reports "
            "without running or reporting them again (their programs are not recoverable)",
            len(rebuilt),
            describe(rebuilt),
        )
        events.emit(
            "slots_rebuilt_from_reef",
            step=step,
            slots=[[r.group, r.rollout] for r in rebuilt],
            reports=[r.entry.metadata["rebuilt_from_reef_report"] for r in rebuilt],
        )
    return tuple(records)


def check_committed_library(state_dir: Path, store_root: Path, events: EventSink) -> None:
    """Check `committed-library.json` against the hash the last commit recorded; when it is
    missing, differs, or no hash was recorded, rebuild it from the committed store and say so
    (log warning and `committed_library_rebuilt` event). Nothing is ever silently ignored."""
    stored = ResumeState.load(state_dir / RESUME_STATE)
    if stored is None:
        return  # nothing committed yet: there is no committed library to pair with
    path = state_dir / COMMITTED_LIBRARY
    expected = stored.committed_library_sha256
    try:
        actual = hashlib.sha256(read_bytes(path, max_bytes=MAX_LIBRARY_BYTES)).hexdigest()
        problem = None if actual == expected else "differs from the hash the last commit recorded"
    except StateFileError as exc:
        problem = str(exc)
    if expected is None:
        problem = f"{state_dir / RESUME_STATE} records no hash for it"
    if problem is None:
        return
    archive, step = read_committed(store_root)
    rebuilt = write_library_json(archive, path)
    message = (
        f"{path}: {problem}; rebuilt from the committed archive of step {step} in {store_root}"
    )
    if expected is not None and rebuilt != expected:
        message += " (the rebuilt file does not match the recorded hash either: the store changed)"
    log.warning("%s", message)
    events.emit("committed_library_rebuilt", path=str(path), step=step, reason=problem)


def _open_store(
    root: Path, config: ArchiveConfig, task_dir: Path, seed: SeedOnSuite
) -> ArchiveStore:
    if os.path.lexists(root / HEAD):  # a broken head is refused by open(), never replaced
        return ArchiveStore.open(root, config)
    log.info("new archive in %s from the seed of %s (%s)", root, task_dir, seed.suite)
    assert seed.entry is not None  # a new run's seed is aligned with the judge's suite first
    return ArchiveStore.create(root, Archive.from_seed(config, seed.entry))


def _emit_step_end(
    events: EventSink,
    archive: Archive,
    step: int,
    summary: Mapping[str, Any],
    run: StepRun,
    mode: str,
) -> None:
    usage = usage_by_step(step_entries(archive, step)).get(step)
    events.emit(
        "step_summary",
        **dict(summary),
        mode=mode,
        executor_failures=run.executor_failures,
        usage=usage.to_dict() if usage else None,
    )
    events.emit("step_committed", step=step, next_step=step + 1)


def well_formed_receipts(archive: Archive) -> tuple[str, ...]:
    """The receipts of every rollout with well-formed guidance, in step, group, rollout order."""
    rollouts = [
        e
        for e in archive.entries.values()
        if e.timestep >= 1 and e.metadata.get("guidance_format_ok")
    ]
    rollouts.sort(
        key=lambda e: (e.timestep, e.metadata.get("group", 0), e.metadata.get("rollout", 0))
    )
    return tuple(str(e.metadata["agent_record_id"]) for e in rollouts)


def _runtime_load_id(reef: ReefChannel) -> str | None:
    try:
        return reef.runtime_load_id()
    except Exception as exc:  # informative only: never fail a finished run over it
        log.warning("could not read Reef's runtime load id: %s", exc)
        return None


def event_log_path(settings: RunSettings) -> Path:
    """Where a run's `events.jsonl` lives: `<state>/guidance-run/events.jsonl`."""
    return settings.state_dir / RUN_DIR / EVENTS_FILE
