"""The rollout loop of one step: G parents, G·R rollouts in a bounded pool, journal, then report.

For each finished rollout the order is fixed: `ArchiveStore.record_rollout` (archive submit plus
a durable journal line) first, `POST /reef/report` second. So a report Reef holds always has its
entry in the journal: "reported but not journaled" cannot exist. The converse (journaled, not yet
reported) is what a crash between the two leaves; on resume `run_step` posts those reports first
(after asking Reef which receipts it already has), then runs only the slots the journal lacks.

A judge infrastructure fault stops the step: the slot is neither journaled nor reported, rollouts
already in flight finish normally, nothing new starts, and `StepInterrupted` tells the operator to
re-run the same command. Any other failure (Reef unreachable, a non-finite reward, a journal
write) also stops the run; the journal makes all of them resumable.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from harness.adapters.executor.client import ExecutorAccessError
from harness.adapters.reef.channel import ReefChannel
from harness.archive.best import run_best
from harness.library import Archive
from harness.observe.events import EventSink, NullSink
from harness.run.crash_hook import crash_point
from harness.run.rollout import (
    Executor,
    FinishedRollout,
    RolloutSettings,
    RolloutTask,
    Slot,
    report_body,
    run_rollout,
)
from harness.scorer import JudgeUnavailableError, Scorer
from harness.state import EXECUTION_ERROR, LibraryEntry
from harness.storage.atomic import DiskFullError
from harness.storage.resume_state import StepOutcome
from harness.storage.store import ArchiveStore, JournalRecord

__all__ = [
    "RESUME_HINT",
    "GuidanceHarness",
    "StepInterrupted",
    "StepRun",
    "executor_failures",
    "step_entries",
    "step_outcome",
]

log = logging.getLogger(__name__)

RESUME_HINT = "re-run the same command to resume: finished rollouts are kept in the journal"


class StepInterrupted(RuntimeError):
    """The step stopped before all its slots were done (e.g. the judge is down). Everything
    finished so far is journaled and reported; the message says how to resume."""


@dataclass(frozen=True)
class StepRun:
    """What a step left behind: the controller's `StepOutcome` plus loop-side counters."""

    outcome: StepOutcome
    executor_failures: int
    rollouts_run: int  # slots run by this process (the rest were replayed from the journal)
    reports_reposted: int


class GuidanceHarness:
    """Runs the rollouts of a step against one archive and its store (the single writer).

    `workers` bounds concurrent rollouts; the executor and judge clients have their own limits.
    """

    def __init__(
        self,
        *,
        archive: Archive,
        store: ArchiveStore,
        settings: RolloutSettings,
        reef: ReefChannel,
        executor: Executor,
        scorer: Scorer,
        workers: int,
        events: EventSink | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.archive = archive
        self.store = store
        self.settings = settings
        self.reef = reef
        self.executor = executor
        self.scorer = scorer
        self.workers = workers
        self.events = events or NullSink()
        self._journal_lock = threading.Lock()
        #: Set (under the lock) when a signal stops the step: a rollout still in flight then
        #: journals and reports nothing, so nothing is written once the stop has begun.
        self._abandoned = False

    # --- a step ------------------------------------------------------------------------------

    def run_step(self, step: int, journaled: Sequence[JournalRecord] = ()) -> StepRun:
        """Run `step` to completion: report journaled-but-unreported slots, run the missing
        slots, and return the outcome in group-major order. `journaled` are the step's records
        replayed by `ArchiveStore.load()` (empty for a fresh step)."""
        started = time.monotonic()
        arm = self.settings.arm
        parents = self.archive.select_parents(step, arm.selection, arm.run_seed)
        done = {(r.group, r.rollout) for r in journaled}
        missing = [
            Slot(step, g, r)
            for g in range(self.settings.groups_per_step)
            for r in range(self.settings.rollouts_per_group)
            if (g, r) not in done
        ]
        self.events.emit(
            "step_started",
            step=step,
            groups=self.settings.groups_per_step,
            rollouts=self.settings.rollouts_per_group,
            parents=[p.id for p in parents],
            resumed_slots=sorted([g, r] for g, r in done),
        )
        reposted = self._report_unreported(journaled)
        if missing:
            log.info("step %d: running %d of %d slots", step, len(missing), self._slots())
        tasks = [
            RolloutTask(slot, parents[slot.group], self.archive.entry_of(parents[slot.group].id))
            for slot in missing
        ]
        self._run_pool(step, tasks)
        outcome = step_outcome(self.archive, step, time.monotonic() - started)
        failures = executor_failures(self.archive, step)
        if failures:
            log.warning(
                "step %d: %d of %d executor calls failed (execution_error); check the executor",
                step,
                failures,
                outcome.well_formed_guidance,
            )
        return StepRun(outcome, failures, len(tasks), reposted)

    def rebuild_step(self, step: int) -> StepRun:
        """The outcome of a step Reef already trained (a crash after its last report): nothing is
        run or posted; every slot must already be in the archive."""
        if not self.archive.step_finalized(step):
            raise RuntimeError(
                f"Reef trained step {step} but the journal does not hold all its "
                f"{self._slots()} rollouts; the state directory and Reef disagree — use a new "
                "state directory"
            )
        outcome = step_outcome(self.archive, step, 0.0)
        failures = executor_failures(self.archive, step)
        return StepRun(outcome, failures, 0, 0)

    def _slots(self) -> int:
        return self.settings.groups_per_step * self.settings.rollouts_per_group

    # --- the pool ----------------------------------------------------------------------------

    def _run_pool(self, step: int, tasks: list[RolloutTask]) -> None:
        if not tasks:
            return
        stop = threading.Event()
        fault: list[BaseException] = []

        def work(task: RolloutTask) -> None:
            if stop.is_set():
                return
            try:
                finished = run_rollout(
                    task,
                    self.settings,
                    self.reef,
                    self.executor,
                    self.scorer,
                    on_stage=lambda stage: self._stage(task.slot, stage),
                )
                self._journal_and_report(finished)
            except BaseException as exc:
                if self._abandoned:  # the step was stopped by a signal: nothing to record
                    return
                stop.set()
                fault.append(exc)
                self._stage(task.slot, "failed")
                self.events.emit(
                    "error", message=f"{type(exc).__name__}: {exc}", where=str(task.slot)
                )

        pool = ThreadPoolExecutor(self.workers, thread_name_prefix=f"rollout-s{step}")
        try:
            list(pool.map(work, tasks))
        except BaseException:
            # Interrupted (a signal): rollouts not yet started do not start, and the stop does
            # not wait for those in flight (a model or judge call may take minutes): what they
            # finish is journaled, the rest runs again on resume (harness.cli.termination).
            stop.set()
            with self._journal_lock:  # waits at most for one journal line being written
                self._abandoned = True
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        if fault:
            raise _step_stop(step, fault)

    def _journal_and_report(self, finished: FinishedRollout) -> None:
        slot, entry = finished.slot, finished.entry
        with self._journal_lock:  # one writer: archive submit + durable journal line
            if self._abandoned:
                return
            self.store.record_rollout(self.archive, slot.step, slot.group, slot.rollout, entry)
        crash_point("after_journal")
        if entry.metadata.get("agent_record_id") is not None:  # arms without guidance: no report
            self._post_report(entry)
            crash_point("after_report")
        self.events.emit(
            "rollout_finished",
            step=slot.step,
            group=slot.group,
            rollout=slot.rollout,
            status=entry.verifier_status,
            reward=entry.verifier_reward,
            raw_score=entry.verifier_raw_score,
            guidance_ok=bool(entry.metadata.get("guidance_format_ok")),
            timings={k: round(v, 3) for k, v in finished.timings.items()},
            judge_cache_hit=entry.metadata["verification_artifacts"].get("judge_cache_hit"),
            usage=entry.metadata.get("execution_response_usage"),
            guidance_usage=entry.metadata.get("guidance_response_usage"),
        )

    def _post_report(self, entry: LibraryEntry) -> None:
        body = report_body(entry, self.settings.groups_per_step, self.settings.rollouts_per_group)
        self.reef.report(body, str(entry.metadata["agent_record_id"]))
        meta = entry.metadata
        self._stage(Slot(int(meta["step"]), int(meta["group"]), int(meta["rollout"])), "reported")

    def _report_unreported(self, journaled: Sequence[JournalRecord]) -> int:
        """Post the reports a crash left unposted. Reef stores a second report of a slot too
        (the training side keeps the first), so only receipts Reef has no report for are posted."""
        if not journaled or not self.settings.arm.guided:
            return 0
        known = self.reef.reported_receipts()
        pending = [
            r
            for r in journaled
            if r.entry.metadata.get("agent_record_id") is not None
            and r.entry.metadata["agent_record_id"] not in known
        ]
        for record in pending:
            log.info(
                "step %d g%dr%d: posting the report a crash left unposted",
                record.step,
                record.group,
                record.rollout,
            )
            self._post_report(record.entry)
        return len(pending)

    def _stage(self, slot: Slot, stage: str) -> None:
        self.events.emit(
            "rollout_stage", step=slot.step, group=slot.group, rollout=slot.rollout, stage=stage
        )


# --- outcome of a step (pure) ----------------------------------------------------------------


def _judge_down(exc: JudgeUnavailableError) -> str:
    return (
        f"the judge is unavailable ({exc}); the slots it could not score were neither journaled "
        "nor reported — start the judge, then "
    )


def _executor_refused(exc: ExecutorAccessError) -> str:
    return (
        f"the executor refused the request with HTTP {exc.status} (a wrong or revoked key, or no "
        f"credit left): {exc.body} — fix the key or the account, then "
    )


def _disk_full(exc: DiskFullError) -> str:
    return f"{exc}; rollouts that did not fit were neither journaled nor reported — "


#: Faults that stop a step with a one-line reason and leave it to resume, first match wins.
_STOPPING_FAULTS: tuple[tuple[type[BaseException], Callable[[Any], str]], ...] = (
    (JudgeUnavailableError, _judge_down),
    (ExecutorAccessError, _executor_refused),
    (DiskFullError, _disk_full),
)


def _step_stop(step: int, fault: Sequence[BaseException]) -> BaseException:
    """What a step's pool raises for its faults: `StepInterrupted` with the reason for a fault
    the same command recovers from once it is fixed, else the first fault itself."""
    for kind, reason in _STOPPING_FAULTS:
        match = next((f for f in fault if isinstance(f, kind)), None)
        if match is not None:
            stopped = StepInterrupted(f"step {step} stopped: {reason(match)}{RESUME_HINT}")
            stopped.__cause__ = match
            return stopped
    return fault[0]


def step_entries(archive: Archive, step: int) -> list[LibraryEntry]:
    """The entries of `step`, group-major and by rollout index within a group."""
    entries = [
        archive.entries[entry_id]
        for group in archive.step_groups(step).values()
        for entry_id in group.entry_ids
    ]
    return sorted(entries, key=lambda e: (int(e.metadata["group"]), int(e.metadata["rollout"])))


def executor_failures(archive: Archive, step: int) -> int:
    """Rollouts of `step` whose executor call failed (a dead executor shows up here at once)."""
    return sum(1 for e in step_entries(archive, step) if e.failure_mode == EXECUTION_ERROR)


def step_outcome(archive: Archive, step: int, elapsed_s: float) -> StepOutcome:
    """The controller's view of a complete step: rewards per group in rollout order, counts of
    valid rollouts and well-formed guidance, the best raw score of a valid candidate of the
    step, and the run's best after it (the seed included; `harness.archive.best`), the
    reference's `best_raw_score`."""
    g, r = archive.config.groups_per_batch, archive.config.rollout_n
    entries = step_entries(archive, step)
    slots = [(int(e.metadata["group"]), int(e.metadata["rollout"])) for e in entries]
    expected = [(group, rollout) for group in range(g) for rollout in range(r)]
    if slots != expected:
        raise RuntimeError(f"step {step} is incomplete: slots {slots} instead of the {g}x{r} grid")
    valid = [e for e in entries if e.is_valid]
    best = max(valid, key=lambda e: archive.config.signed(e.verifier_raw_score), default=None)
    overall = run_best(archive)
    return StepOutcome(
        step=step,
        elapsed_s=elapsed_s,
        group_rewards=[[e.verifier_reward for e in entries[i * r : (i + 1) * r]] for i in range(g)],
        valid_rollouts=len(valid),
        well_formed_guidance=sum(1 for e in entries if e.metadata.get("guidance_format_ok")),
        best_raw_score=None if best is None else best.verifier_raw_score,
        archive_best_raw_score=None if overall is None else overall.verifier_raw_score,
    )
