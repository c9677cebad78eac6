"""The run controller: one step is done only when Reef's training of it is durable and qualified,
and its archive and resume state are committed, in that order (SPEC §7).

Usage, by the step loop (which owns rollouts, the journal and the archive):

    controller = RunController(settings, identity, backend.safe_dict(), bridge, status, commit)
    start = controller.begin()                  # resume checks; where to start
    for step in range(start.start_step, start.steps):
        outcome = run_or_replay_step(step)      # G·R rollouts reported to Reef
        controller.complete_step(outcome)       # barrier, qualification gate, commit

`begin()` refuses a resume whose identity differs, a finished run, and a Reef checkpoint that
does not pair with the committed state. `complete_step()` returns only after
`commit_archive(step)` and the atomic `resume-state.json` write; the next step may start then.
The gate's checks live in `harness.qualification`.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.events import EventSink, NullSink
from harness.qualification import qualify_step
from harness.reef_status import (
    ReefStatusUnavailable,
    StatusSource,
    StepStatus,
    format_slots,
    read_step_status,
)
from harness.resume_state import RESUME_STATE, ResumeState, RunIdentity, StepOutcome
from harness.training_bridge import TrainingBridge

log = logging.getLogger(__name__)

POLL_INTERVAL_S = 2.0
TRAINING_DEADLINE_S = 14400.0
#: Slime's record of the last saved Megatron checkpoint, relative to the state directory.
CHECKPOINT_MARKER = Path("checkpoints") / "megatron" / "latest_checkpointed_iteration.txt"


class TrainingTimeoutError(RuntimeError):
    """Reef did not finish (train, checkpoint, publish, commit) a step before the deadline."""


class ResumeRefused(RuntimeError):
    """The state directory cannot be continued with these settings or this Reef checkpoint."""


@dataclass(frozen=True)
class ControllerSettings:
    """The controller's knobs. `steps` is the run's final total (STEPS), not an increment."""

    state_dir: Path
    scenario: str
    steps: int
    poll_interval_s: float = POLL_INTERVAL_S
    deadline_s: float = TRAINING_DEADLINE_S
    log_every_s: float = 60.0
    prompt_mode: str = "summary_only"
    megatron_dir: Path | None = None  # Slime's `save` dir; default <state>/checkpoints/megatron

    @property
    def checkpoint_marker(self) -> Path:
        """Slime's `latest_checkpointed_iteration.txt`, which the gate requires to exist."""
        if self.megatron_dir is None:
            return self.state_dir / CHECKPOINT_MARKER
        return self.megatron_dir / CHECKPOINT_MARKER.name

    @classmethod
    def for_run(cls, run: Any, **overrides: Any) -> ControllerSettings:
        """Settings from a `harness.run_settings.RunSettings` (its `state_dir`, `scenario`,
        `steps` and `megatron_checkpoint_dir`), with keyword overrides for the timing knobs."""
        return cls(
            state_dir=run.state_dir,
            scenario=run.scenario,
            steps=run.steps,
            megatron_dir=run.megatron_checkpoint_dir,
            **overrides,
        )


@dataclass(frozen=True)
class RunStart:
    """Where this process starts. `recovered_step` is set when Reef had already trained
    `start_step` before this process began (a crash after its last report and before its commit
    finished): the loop must rebuild that step from the journal without running or reporting any
    slot, then call `complete_step` as usual. `archive_holds_start_step` says the crash came after
    the archive commit of that step, so the committed archive already contains it."""

    start_step: int
    steps: int
    recovered_step: int | None
    archive_holds_start_step: bool
    step_summaries: tuple[Mapping[str, Any], ...]


class RunController:
    """Gatekeeper between steps: durability barrier, qualification gate, ordered commit, resume.

    `commit_archive(step)` must write the working archive as committed for `step` atomically and
    be idempotent (it is called again for a step whose commit was interrupted); it returns the
    SHA-256 of the `committed-library.json` it exported (or None), which the resume-state record
    keeps so a resume can check the file. `archive_step`,
    when given, returns the step the committed archive carries (None before the first commit);
    `begin()` then checks that it pairs with resume-state.json. `events` receives a
    `training_wait` event each time the barrier logs its progress (default: dropped).
    """

    def __init__(
        self,
        settings: ControllerSettings,
        identity: RunIdentity,
        executor_backend: Mapping[str, Any],
        bridge: TrainingBridge,
        status: StatusSource,
        commit_archive: Callable[[int], str | None],
        archive_step: Callable[[], int | None] | None = None,
        events: EventSink | None = None,
    ) -> None:
        self.settings = settings
        self.identity = identity
        self._executor_backend = dict(executor_backend)
        self._bridge = bridge
        self._status = status
        self._commit_archive = commit_archive
        self._archive_step = archive_step
        self._events: EventSink = events if events is not None else NullSink()
        self._start: RunStart | None = None
        self._next_step = 0
        self._summaries: list[dict[str, Any]] = []
        self._baseline_completed = 0  # the bridge's completed_train_steps when this process began
        self._trained_here = 0  # steps whose training Reef finished after begin()

    @property
    def resume_state_path(self) -> Path:
        return self.settings.state_dir / RESUME_STATE

    @property
    def next_step(self) -> int:
        """The step the run is at: the next one to run (or recover)."""
        return self._next_step

    def begin(self) -> RunStart:
        """Check the state directory against these settings and Reef, and say where to start.
        Raises `ResumeRefused` naming the differing value and the fix; it touches no file."""
        stored = ResumeState.load(self.resume_state_path)
        next_step = 0 if stored is None else stored.next_step
        if stored is not None:
            self._check_stored(stored)
        if next_step >= self.settings.steps:
            raise ResumeRefused(
                f"run already finished: {self.resume_state_path} records next_step {next_step} and"
                f" STEPS is {self.settings.steps} (STEPS is the final total, not an increment);"
                " raise STEPS in serve.yaml to train further, or use a new state directory"
            )
        # One health snapshot gives both the checkpoint start and the completed-step baseline,
        # so a publication landing between two calls cannot make them disagree.
        health = self._bridge.health()
        if health.get("ok") is not True:
            raise ResumeRefused(
                f"Reef's training bridge is not healthy at start: ok={health.get('ok')!r}, phase "
                f"{health.get('phase')!r}; see <state>/stack/slime-driver/slime-driver.log"
            )
        reef_start = _int_field(health, "start_rollout_id")
        recovered = self._pair_with_reef(next_step, reef_start)
        archive_ahead = self._pair_with_archive(next_step, recovered is not None)
        self._baseline_completed = _int_field(health, "completed_train_steps")
        self._summaries = [] if stored is None else [dict(s) for s in stored.step_summaries]
        self._next_step = next_step
        self._start = RunStart(
            next_step, self.settings.steps, recovered, archive_ahead, tuple(self._summaries)
        )
        log.info(
            "run %s: steps %d..%d of %d (Reef checkpoint starts at %d)",
            "resumes" if stored else "starts",
            next_step,
            self.settings.steps - 1,
            self.settings.steps,
            reef_start,
        )
        return self._start

    def _check_stored(self, stored: ResumeState) -> None:
        mismatch = stored.identity.first_difference(self.identity)
        if mismatch is not None:
            key, was, now = mismatch
            raise ResumeRefused(
                f"resume settings mismatch: {key} stored {was!r}, requested {now!r} — use a new "
                f"state directory (or restore the settings of {self.resume_state_path})"
            )
        if stored.prompt_mode != self.settings.prompt_mode:
            raise ResumeRefused(
                f"resume settings mismatch: prompt_mode stored {stored.prompt_mode!r}, requested "
                f"{self.settings.prompt_mode!r} — use a new state directory"
            )
        if stored.executor_backend != self._executor_backend:
            log.warning(
                "executor backend settings changed since the last commit (same executor model): "
                "stored %s, now %s",
                stored.executor_backend,
                self._executor_backend,
            )

    def _pair_with_reef(self, next_step: int, reef_start: int) -> int | None:
        if reef_start == next_step:
            return None
        if reef_start == next_step + 1:
            log.warning(
                "Reef already trained step %d but its commit did not finish before the last stop;"
                " the step is rebuilt from the journal and committed again",
                next_step,
            )
            return next_step
        raise ResumeRefused(
            f"Reef's checkpoint starts at step {reef_start} but the committed run state "
            f"({self.resume_state_path}) continues at step {next_step}; the archive and Reef's "
            "weights would not pair — restore the matching Reef checkpoint under "
            "<state>/checkpoints, or use a new state directory"
        )

    def _pair_with_archive(self, next_step: int, reef_trained_it: bool) -> bool:
        if self._archive_step is None:
            return False
        archived = self._archive_step()
        archived = -1 if archived is None else archived
        if archived == next_step - 1:
            return False
        if archived == next_step and reef_trained_it:
            return True
        raise ResumeRefused(
            f"the committed archive carries step {archived if archived >= 0 else 'none'} but "
            f"{self.resume_state_path} continues at step {next_step} (Reef trained it: "
            f"{reef_trained_it}); the pair is inconsistent — use a new state directory"
        )

    def complete_step(self, outcome: StepOutcome) -> dict[str, Any]:
        """Wait until Reef's training of `outcome.step` is durable, qualify it, then commit the
        archive and resume-state.json, in that order. Returns the step summary that was written;
        any failure raises and leaves the previous commit in place."""
        if self._start is None:
            raise RuntimeError("complete_step() called before begin()")
        if outcome.step != self._next_step:
            raise RuntimeError(
                f"complete_step got step {outcome.step} but the run is at step {self._next_step}"
            )
        recovered = outcome.step == self._start.recovered_step
        expected = self._baseline_completed + self._trained_here + (0 if recovered else 1)
        health = self._await_training(outcome.step, expected, recovered)
        marker = self.settings.checkpoint_marker
        metrics = qualify_step(outcome, health, self.identity, expected, marker, recovered)
        if recovered and not metrics:
            log.warning(
                "step %d was trained before this process started and the restarted bridge no "
                "longer holds its train metrics; committed on Reef's checkpoint without the "
                "metric checks",
                outcome.step,
            )
        summary = outcome.summary(self.identity.rollouts_per_group, metrics, recovered)
        if summary["degenerate_step"]:
            log.warning(
                "step %d is degenerate: every group has constant reward, so it carries no "
                "gradient; it is committed without the gradient checks",
                outcome.step,
            )
        self._commit(outcome.step, summary)
        if not recovered:
            self._trained_here += 1
        return summary

    def _commit(self, step: int, summary: dict[str, Any]) -> None:
        library_sha = self._commit_archive(step)
        state = ResumeState(
            identity=self.identity,
            executor_backend=self._executor_backend,
            prompt_mode=self.settings.prompt_mode,
            next_step=step + 1,
            step_summaries=(*self._summaries, summary),
            committed_library_sha256=library_sha,
        )
        state.save(self.resume_state_path)
        self._summaries.append(summary)
        self._next_step = step + 1
        log.info("step %d committed; next step %d", step, step + 1)

    def _await_training(self, step: int, expected: int, recovered: bool) -> Mapping[str, Any]:
        started = time.monotonic()
        deadline = started + self.settings.deadline_s
        last_note, last_log = "", -math.inf
        while True:
            health = self._bridge.health()
            _fail_on_broken_training(step, health, expected)
            page = self._read_status(step)
            if page is not None and _is_durable(health, step, expected, recovered):
                return health
            now = time.monotonic()
            note = _progress(health, expected, page)
            if note != last_note or now - last_log >= self.settings.log_every_s:
                log.info(
                    "step %d: waiting for Reef training (%.0fs) — %s", step, now - started, note
                )
                self._events.emit(
                    "training_wait",
                    step=step,
                    phase=health.get("phase"),
                    elapsed_s=round(now - started, 1),
                    missing_slots=_slot_pairs(page),
                )
                last_note, last_log = note, now
            if now >= deadline:
                raise TrainingTimeoutError(
                    f"Reef did not finish training step {step} within "
                    f"{self.settings.deadline_s:.0f}s — {note}. If slots are missing the harness "
                    "under-reported (resume runs them); otherwise see "
                    "<state>/stack/slime-driver/slime-driver.log and reef.log"
                )
            time.sleep(min(self.settings.poll_interval_s, max(0.0, deadline - now)))

    def _read_status(self, step: int) -> StepStatus | None:
        try:
            page = self._status.fetch()
        except ReefStatusUnavailable as exc:
            log.warning("step %d: Reef status unavailable, asking again: %s", step, exc)
            return None
        status = read_step_status(page, self.settings.scenario, step)
        if status.error:
            raise RuntimeError(
                f"Reef reports a training error while step {step} trains: {status.error}"
            )
        if status.failed is not None:
            raise RuntimeError(
                f"Reef discarded step {step} ({status.failed.reason}): its reports span releases "
                f"{', '.join(status.failed.release_ids) or '(none listed)'}, so it will never "
                "train; a step must only start after the previous one is committed"
            )
        return status


def _is_failed_phase(phase: Any) -> bool:
    return isinstance(phase, str) and (phase.endswith("_failed") or phase == "stopped")


def _fail_on_broken_training(step: int, health: Mapping[str, Any], expected: int) -> None:
    phase = health.get("phase")
    if _is_failed_phase(phase) or health.get("ok") is not True:
        raise RuntimeError(
            f"Reef training of step {step} failed: bridge phase {phase!r}, ok={health.get('ok')!r},"
            f" recoverable={health.get('recoverable')!r}; see "
            "<state>/stack/slime-driver/slime-driver.log"
        )
    completed = health.get("completed_train_steps")
    last = health.get("last_train_rollout_id")
    if (isinstance(completed, int) and completed > expected) or (
        isinstance(last, int) and last > step
    ):
        raise RuntimeError(
            f"Reef is ahead of this run: completed_train_steps {completed} (expected {expected}),"
            f" last_train_rollout_id {last} (step {step}); another harness reports to this scenario"
        )


def _is_durable(health: Mapping[str, Any], step: int, expected: int, recovered: bool) -> bool:
    if health.get("phase") != "serving" or health.get("completed_train_steps") != expected:
        return False
    if recovered:
        # A restarted bridge remembers no last step; its checkpoint start proves the training.
        last = health.get("last_train_rollout_id")
        return health.get("start_rollout_id") == step + 1 and last in (None, step)
    return health.get("last_train_rollout_id") == step


def _progress(health: Mapping[str, Any], expected: int, page: StepStatus | None) -> str:
    if page is None:
        slots = "Reef status unavailable"
    elif page.missing_slots is None:
        slots = "Reef lists no open slots for this step"
    else:
        slots = f"missing slots: {format_slots(page.missing_slots)}"
    return (
        f"phase {health.get('phase')}, completed {health.get('completed_train_steps')}/{expected},"
        f" last rollout {health.get('last_train_rollout_id')}; {slots}"
    )


def _slot_pairs(page: StepStatus | None) -> list[list[int]]:
    # The event's JSON form of the missing slots: [group, rollout] pairs, empty when unknown.
    if page is None or page.missing_slots is None:
        return []
    return [[group, rollout] for group, rollout in page.missing_slots]


def _int_field(health: Mapping[str, Any], key: str) -> int:
    value = health.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RuntimeError(f"training bridge health field {key} is {value!r}, not an integer ≥ 0")
    return value
