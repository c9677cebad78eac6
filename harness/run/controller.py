"""The run controller: one step is done only when its gate lets it through (trained mode: Reef's
training of it is durable and qualified) and its archive and resume state are committed, in that
order (docs/design.md §7).

Usage, by the step loop (which owns rollouts and the journal):

    state = StateDirectory.open(root, config, seed_archive)   # harness.storage.state_dir
    controller = RunController(settings, identity, backend.safe_dict(), bridge, status, state)
    start = controller.begin()                  # resume checks; where to start
    for step in range(start.start_step, start.steps):
        outcome = run_or_replay_step(step)      # G·R rollouts reported to Reef
        controller.complete_step(outcome)       # barrier, qualification gate, commit

`begin()` refuses a resume whose identity differs, a finished run, and a Reef checkpoint that
does not pair with the committed state. `complete_step()` returns only after the state
directory's ordered commit (store, `committed-library.json`, `resume-state.json`); the next step
may start then. The gates (trained: barrier + `harness.run.qualification`; frozen: none) live in
`harness.run.gate`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from harness.adapters.reef.status import StatusSource
from harness.adapters.reef.training_bridge import TrainingBridge
from harness.observe.events import EventSink
from harness.run.gate import (
    CHECKPOINT_MARKER,
    POLL_INTERVAL_S,
    TRAINING_DEADLINE_S,
    ResumeRefused,
    StepGate,
    TrainedGate,
    TrainingTimeoutError,
)
from harness.storage.resume_state import ResumeState, RunIdentity, StepOutcome

__all__ = [
    "CHECKPOINT_MARKER",
    "CommittedState",
    "ControllerSettings",
    "ResumeRefused",
    "RunController",
    "RunStart",
    "TrainingTimeoutError",
]

log = logging.getLogger(__name__)


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

    def __post_init__(self) -> None:
        # As the reference's training bridge: a deadline that cannot be met is refused at once.
        if not self.deadline_s > 0:
            raise ValueError(
                f"the training timeout (deadline_s) must be positive, got {self.deadline_s!r}"
            )
        if not self.poll_interval_s >= 0:
            raise ValueError(
                f"the training poll interval must be non-negative, got {self.poll_interval_s!r}"
            )

    @property
    def checkpoint_marker(self) -> Path:
        """Slime's `latest_checkpointed_iteration.txt`, which the gate requires to exist."""
        if self.megatron_dir is None:
            return self.state_dir / CHECKPOINT_MARKER
        return self.megatron_dir / CHECKPOINT_MARKER.name

    @classmethod
    def for_run(cls, run: Any, **overrides: Any) -> ControllerSettings:
        """Settings from a `harness.settings.run_settings.RunSettings` (its `state_dir`, `scenario`,
        `steps` and `megatron_checkpoint_dir`), with keyword overrides for the timing knobs."""
        return cls(
            state_dir=run.state_dir,
            scenario=run.scenario,
            steps=run.steps,
            megatron_dir=run.megatron_checkpoint_dir,
            **overrides,
        )


class CommittedState(Protocol):
    """What the controller needs of the state directory (`harness.storage.state_dir.
    StateDirectory`; the controller's tests pass a stand-in with a stand-in archive)."""

    @property
    def committed_step(self) -> int | None: ...

    @property
    def resume_state_path(self) -> Path: ...

    def resume_state(self) -> ResumeState | None: ...

    def commit(self, step: int, resume: ResumeState) -> ResumeState: ...


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

    `state` is the run's state directory (`harness.storage.state_dir.StateDirectory`): the
    controller reads the last commit record from it, checks in `begin()` that the step its
    committed archive carries pairs with that record, and hands it each step's commit record;
    the directory's `commit` is ordered and idempotent (it is called again for a step whose
    commit was interrupted).

    What a step waits for before its commit is the run's `gate` (`harness.run.gate`):
    by default the `TrainedGate` on `bridge` and `status`, whose barrier emits `training_wait`
    events to `events`; a frozen-guidance run passes `FrozenGate()` (bridge and status unused).
    """

    def __init__(
        self,
        settings: ControllerSettings,
        identity: RunIdentity,
        executor_backend: Mapping[str, Any],
        bridge: TrainingBridge | None,
        status: StatusSource | None,
        state: CommittedState,
        events: EventSink | None = None,
        gate: StepGate | None = None,
    ) -> None:
        self.settings = settings
        self.identity = identity
        self._executor_backend = dict(executor_backend)
        if gate is None:
            if bridge is None or status is None:
                raise ValueError("a trained run's controller needs the training bridge and status")
            gate = TrainedGate(settings, identity, bridge, status, events)
        self.gate: StepGate = gate
        if gate.mode != identity.mode:
            raise ValueError(
                f"the run identity is {identity.mode!r} but its step gate is {gate.mode!r}; a "
                "run's records and its gate must carry the same mode"
            )
        self._state = state
        self._start: RunStart | None = None
        self._next_step = 0
        self._summaries: list[dict[str, Any]] = []

    @property
    def resume_state_path(self) -> Path:
        return self._state.resume_state_path

    @property
    def next_step(self) -> int:
        """The step the run is at: the next one to run (or recover)."""
        return self._next_step

    def begin(self) -> RunStart:
        """Check the state directory against these settings and Reef, and say where to start.
        Raises `ResumeRefused` naming the differing value and the fix; it touches no file."""
        stored = self._state.resume_state()
        next_step = 0 if stored is None else stored.next_step
        if stored is not None:
            self._check_stored(stored)
        if next_step >= self.settings.steps:
            raise ResumeRefused(
                f"run already finished: {self.resume_state_path} records next_step {next_step} and"
                f" STEPS is {self.settings.steps} (STEPS is the final total, not an increment);"
                " raise STEPS in serve.yaml to train further, or use a new state directory"
            )
        recovered = self.gate.open(next_step)
        if (
            recovered is None
            and self.gate.archive_commit_proves_settled
            and self._state.committed_step == next_step
        ):
            log.warning(
                "step %d was committed to the archive but its resume state was not written "
                "before the last stop; the step is rebuilt from the journal and committed again",
                next_step,
            )
            recovered = next_step
        archive_ahead = self._pair_with_archive(next_step, recovered is not None)
        self._summaries = [] if stored is None else [dict(s) for s in stored.step_summaries]
        self._next_step = next_step
        self._start = RunStart(
            next_step, self.settings.steps, recovered, archive_ahead, tuple(self._summaries)
        )
        log.info(
            "%s run %s: steps %d..%d of %d",
            self.gate.mode,
            "resumes" if stored else "starts",
            next_step,
            self.settings.steps - 1,
            self.settings.steps,
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
        changed = backend_changes(stored.executor_backend, self._executor_backend)
        if changed:
            loopback_port_only = [key for key, _, _ in changed] == ["base_url"] and all(
                _loopback(url) for _, *urls in changed for url in urls
            )
            # A local endpoint on another port (a rehearsal's stand-in gets a free port on
            # every start) is noted, not warned about: the same model answers.
            (log.info if loopback_port_only else log.warning)(
                "executor setting changed since the last commit (same executor model): %s",
                "; ".join(f"{key} {was!r} → {now!r}" for key, was, now in changed),
            )

    def _pair_with_archive(self, next_step: int, reef_trained_it: bool) -> bool:
        archived = self._state.committed_step
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
        settling = time.monotonic()
        metrics = self.gate.settle(outcome, recovered)
        # The reference's elapsed_s runs from the step's start to after the barrier and the gate.
        waited = time.monotonic() - settling
        outcome = replace(outcome, elapsed_s=outcome.elapsed_s + waited)
        summary = outcome.summary(self.identity.rollouts_per_group, metrics, recovered)
        self._commit(outcome.step, summary)
        return summary

    def _commit(self, step: int, summary: dict[str, Any]) -> None:
        record = ResumeState(
            identity=self.identity,
            executor_backend=self._executor_backend,
            prompt_mode=self.settings.prompt_mode,
            next_step=step + 1,
            step_summaries=(*self._summaries, summary),
        )
        self._state.commit(step, record)
        self._summaries.append(summary)
        self._next_step = step + 1
        log.info("step %d committed; next step %d", step, step + 1)


def backend_changes(
    stored: Mapping[str, Any], now: Mapping[str, Any]
) -> list[tuple[str, Any, Any]]:
    """`(key, stored value, value now)` for every executor backend setting that differs."""
    return [
        (key, stored.get(key), now.get(key))
        for key in sorted(set(stored) | set(now))
        if stored.get(key) != now.get(key)
    ]


def _loopback(url: Any) -> bool:
    host = urlsplit(str(url)).hostname or ""
    return host in ("localhost", "::1") or host.startswith("127.")
