"""Step gates: what the run controller waits for between a step's last report and its commit.

A run has one gate, chosen by its mode (the adapter the step loop builds; the controller never
asks which mode it is in):

* `TrainedGate` (mode `trained`): Reef's training of the step must be durable and qualified.
  `open` pairs the committed run state with Reef's checkpoint (a step Reef trained before a
  crash is recovered, not re-run); `settle` polls the training bridge and Reef's status page
  until the step is trained, checkpointed and published, then runs the qualification gate
  (`harness.run.qualification`) and returns the step's train metrics.
* `FrozenGate` (mode `frozen`): the guidance model is not trained, so there is nothing to wait
  for and nothing to pair: `open` recovers no step, `settle` returns no metrics at once and makes
  no call at all. The journal, archive commit and resume state work exactly as in trained mode.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from harness.adapters.reef.status import (
    ReefStatusUnavailable,
    StatusSource,
    StepStatus,
    format_slots,
    read_step_status,
)
from harness.adapters.reef.training_bridge import TrainingBridge
from harness.observe.events import EventSink, NullSink
from harness.run.qualification import qualify_step
from harness.storage.resume_state import RESUME_STATE, RunIdentity, StepOutcome

log = logging.getLogger(__name__)

POLL_INTERVAL_S = 2.0
TRAINING_DEADLINE_S = 14400.0
#: Slime's record of the last saved Megatron checkpoint, relative to the state directory.
CHECKPOINT_MARKER = Path("checkpoints") / "megatron" / "latest_checkpointed_iteration.txt"


class TrainingTimeoutError(RuntimeError):
    """Reef did not finish (train, checkpoint, publish, commit) a step before the deadline."""


class ResumeRefused(RuntimeError):
    """The state directory cannot be continued with these settings or this Reef checkpoint."""


class StepGate(Protocol):
    """The controller's view of what happens to a reported step before it may be committed."""

    #: `trained` or `frozen`: the label the run's records carry.
    mode: str
    #: Whether a step the committed archive already holds (a crash between the archive commit
    #: and the resume-state write) was settled before that commit without further proof: true
    #: when settling waits for nothing (frozen); a trained step needs Reef's checkpoint.
    archive_commit_proves_settled: bool

    def open(self, next_step: int) -> int | None:
        """Check the model side at start; return the step to recover (already trained before
        this process began, rebuilt from the journal), or None. Raises `ResumeRefused`."""
        ...

    def settle(self, outcome: StepOutcome, recovered: bool) -> dict[str, Any]:
        """Return once `outcome.step` may be committed, with its train metrics (may be empty)."""
        ...


class FrozenGate:
    """Frozen-guidance mode: nothing is trained, so no step waits and none is recovered."""

    mode = "frozen"
    archive_commit_proves_settled = True

    def open(self, next_step: int) -> int | None:
        return None

    def settle(self, outcome: StepOutcome, recovered: bool) -> dict[str, Any]:
        return {}


class TrainedGate:
    """Trained mode: the durability barrier on Reef's training bridge and the qualification gate.

    `settings` is the controller's `ControllerSettings` (state directory, scenario, timing knobs,
    checkpoint marker). `events` receives a `training_wait` event each time the barrier logs its
    progress (default: dropped).
    """

    mode = "trained"
    archive_commit_proves_settled = False

    def __init__(
        self,
        settings: Any,
        identity: RunIdentity,
        bridge: TrainingBridge,
        status: StatusSource,
        events: EventSink | None = None,
    ) -> None:
        self.settings = settings
        self.identity = identity
        self._bridge = bridge
        self._status = status
        self._events: EventSink = events if events is not None else NullSink()
        self._baseline_completed = 0  # the bridge's completed_train_steps when this process began
        self._trained_here = 0  # steps whose training Reef finished after open()

    @property
    def _resume_state_path(self) -> Path:
        return self.settings.state_dir / RESUME_STATE

    def open(self, next_step: int) -> int | None:
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
        self._baseline_completed = _int_field(health, "completed_train_steps")
        log.info("Reef's checkpoint starts at step %d", reef_start)
        return recovered

    def settle(self, outcome: StepOutcome, recovered: bool) -> dict[str, Any]:
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
        if outcome.nonconstant_groups == 0:
            log.warning(
                "step %d is degenerate: every group has constant reward, so it carries no "
                "gradient; it is committed without the gradient checks",
                outcome.step,
            )
        if not recovered:
            self._trained_here += 1
        return metrics

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
            f"({self._resume_state_path}) continues at step {next_step}; the archive and Reef's "
            "weights would not pair — restore the matching Reef checkpoint under "
            "<state>/checkpoints, or use a new state directory"
        )

    def _await_training(self, step: int, expected: int, recovered: bool) -> Mapping[str, Any]:
        started = time.monotonic()
        deadline = started + self.settings.deadline_s
        last_note, last_log = "", -math.inf
        while True:
            health = self._bridge.health()
            _fail_on_broken_training(step, health, expected)
            _fail_on_another_steps_rollout(step, health, expected, recovered)
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
        if isinstance(page, Mapping) and page.get("error") == "":
            # The reference refuses an `error` that is not a non-empty string (its
            # run_controller.py `scenario_status`); Reef writes a text or null, never "".
            raise RuntimeError(
                f"Reef's status page carries an empty `error` while step {step} trains, which "
                "Reef never writes (a text or null); is the stack's Reef the pinned version?"
            )
        status = read_step_status(page, self.settings.scenario, step, strict=True)
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


def _fail_on_another_steps_rollout(
    step: int, health: Mapping[str, Any], expected: int, recovered: bool
) -> None:
    """Stop when the bridge counts the expected completed steps but its last trained rollout is
    not this step, as the reference's barrier does (its run_controller.py): that count is never
    reached again, so the step can never become durable. A restarted bridge of a recovered step
    remembers no last rollout (None), which its checkpoint start then proves (`_is_durable`)."""
    if health.get("completed_train_steps") != expected:
        return
    last = health.get("last_train_rollout_id")
    if last == step or (recovered and last is None):
        return
    raise RuntimeError(
        f"Reef trained another step's rollout: completed_train_steps is {expected}, the count "
        f"expected once step {step} is trained, but last_train_rollout_id is {last!r}, not "
        f"{step}; the step can never become durable — see "
        "<state>/stack/slime-driver/slime-driver.log, and check that no other harness reports "
        "to this scenario"
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
