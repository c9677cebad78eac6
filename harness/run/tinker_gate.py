"""The step gate of a trained run on Reef's Tinker backend (``serve-tinker.yaml``).

Reef's in-process Tinker topology has no training bridge: its trainer
(``reef.train.tinker_backend.runtime.TinkerTrainingRuntime``) runs inside the Reef service,
trains each step from the committed incumbent in a new Tinker session, saves it as a durable
Tinker checkpoint (``save_state`` + ``save_weights_for_sampler``, no TTL) and, once Reef commits
the step, writes the checkpoint's manifest as the incumbent (``<training.options.state-dir>/
incumbent.json``: base model, LoRA rank, the ``tinker://`` state and sampler paths). So the
proof of a durable, published step here is, together:

- Reef's status page: ``scenarios.<scenario>.last_committed_step.step`` is the number of
  training steps Reef committed (harness step k trained ⇒ k + 1), with that step's metrics;
  ``artifact_head_sync.state`` is ``synchronized`` (the release is published); no service
  ``error``; the step is not among the tttd grouping's ``failed_steps``;
- the incumbent manifest names ``tinker://`` paths for the run's base model and LoRA rank, and
  a checkpoint other than the one the previous step left.

:class:`TinkerGate` waits for all of it (the same deadline as the Slime barrier), then qualifies
the step from Reef's metrics: the outcome is the full G×R grid, the step is Reef's selected
candidate with exactly one optimizer step, and its loss is finite. ``open`` pairs the committed
run state with Reef's committed count as ``TrainedGate`` pairs it with the bridge's checkpoint:
equal, or Reef one ahead (a step Reef committed before the harness could: recovered, not re-run);
anything else is refused. A step Reef has not committed runs again on resume, as on any
restarted Reef (``harness.run.recovery.serving_load_changed``): a Tinker run's Reef starts with
the run, serves under a new runtime load, and its Tinker trainer refuses a batch holding a call
of any other load (``max_staleness`` 0). A restarted Reef shows a scenario's
committed steps only once a request for the scenario has loaded it, so ``open`` first asks for
the scenario's stored reports (``load_scenario``) when the page lists none.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.adapters.reef.status import ReefStatusUnavailable, StatusSource, read_step_status
from harness.run.gate import (
    POLL_INTERVAL_S,
    TRAINING_DEADLINE_S,
    ResumeRefused,
    TrainingTimeoutError,
)
from harness.run.qualification import QualificationError
from harness.storage.resume_state import RunIdentity, StepOutcome

log = logging.getLogger(__name__)

#: Reef's Tinker incumbent, relative to ``training.options.state-dir`` (its manifest directory).
INCUMBENT = "incumbent.json"


@dataclass(frozen=True)
class TinkerGateSettings:
    """What the gate reads: the run's scenario, its Tinker manifest directory, base model and
    LoRA rank, and the barrier's timing."""

    scenario: str
    manifest_dir: Path
    model: str
    lora_rank: int
    poll_interval_s: float = POLL_INTERVAL_S
    deadline_s: float = TRAINING_DEADLINE_S


class TinkerGate:
    """Trained mode on Tinker: Reef's commit, its publication and the durable Tinker manifest."""

    mode = "trained"
    archive_commit_proves_settled = False

    def __init__(
        self,
        settings: TinkerGateSettings,
        identity: RunIdentity,
        status: StatusSource,
        load_scenario: Callable[[], object] | None = None,
    ) -> None:
        self.settings = settings
        self.identity = identity
        self._status = status
        self._load_scenario = load_scenario
        self._previous: str | None = None  # the incumbent's state path before the step

    def open(self, next_step: int) -> int | None:
        block = self._block(self._status.fetch())
        if not block and self._load_scenario is not None:
            # A restarted Reef lists a scenario on its status page only once a request for it
            # has loaded it (its committed steps come back then); a new scenario has none.
            self._load_scenario()
            block = self._block(self._status.fetch())
        committed = _committed(block)
        self._previous = self._incumbent_path()
        if committed == next_step:
            return None
        if committed == next_step + 1:
            log.warning(
                "Reef already committed step %d on Tinker but the harness did not before the "
                "last stop; the step is rebuilt from the journal and committed again",
                next_step,
            )
            return next_step
        raise ResumeRefused(
            f"Reef has committed {committed} Tinker training steps but the committed run state "
            f"continues at step {next_step}; the archive and the Tinker incumbent "
            f"({self.settings.manifest_dir / INCUMBENT}) would not pair — use the state "
            "directory and Reef stack they were written with, or a new state directory"
        )

    def settle(self, outcome: StepOutcome, recovered: bool) -> dict[str, Any]:
        block = self._await_commit(outcome.step)
        manifest = self._manifest(outcome.step, recovered)
        metrics = _qualified(outcome, block, self.identity)
        self._previous = manifest["state_path"]
        return metrics

    # -- waiting ---------------------------------------------------------------

    def _await_commit(self, step: int) -> Mapping[str, Any]:
        started = time.monotonic()
        deadline = started + self.settings.deadline_s
        note = "Reef status not read yet"
        while True:
            try:
                page = self._status.fetch()
            except ReefStatusUnavailable as exc:
                page, note = None, f"Reef status unavailable: {exc}"
            if page is not None:
                block = self._checked(page, step)
                committed = _committed(block)
                if committed > step + 1:
                    raise RuntimeError(
                        f"Reef has committed {committed} Tinker steps while step {step} settles; "
                        "another harness reports to this scenario"
                    )
                sync = (block.get("artifact_head_sync") or {}).get("state")
                if committed == step + 1 and sync == "synchronized":
                    return block
                note = f"committed {committed}/{step + 1}, artifact head {sync}"
            now = time.monotonic()
            if now >= deadline:
                raise TrainingTimeoutError(
                    f"Reef did not commit and publish Tinker step {step} within "
                    f"{self.settings.deadline_s:.0f}s — {note}; see <state>/stack/reef/reef.log"
                )
            log.debug("step %d: waiting for Reef's Tinker training — %s", step, note)
            time.sleep(min(self.settings.poll_interval_s, max(0.0, deadline - now)))

    def _checked(self, page: Mapping[str, Any], step: int) -> Mapping[str, Any]:
        status = read_step_status(page, self.settings.scenario, step, strict=True)
        if status.error:
            raise RuntimeError(
                f"Reef reports a training error while step {step} trains: {status.error}"
            )
        if status.failed is not None:
            releases = ", ".join(status.failed.release_ids) or "(none listed)"
            raise RuntimeError(
                f"Reef discarded step {step} ({status.failed.reason}): its reports span releases "
                f"{releases}, so it will never train; a step's calls must all be served by one "
                "release (a Reef restarted in the middle of a step serves the rest under a new "
                "one)"
            )
        return self._block(page)

    def _block(self, page: Mapping[str, Any]) -> Mapping[str, Any]:
        scenarios = page.get("scenarios") if isinstance(page, Mapping) else None
        block = scenarios.get(self.settings.scenario) if isinstance(scenarios, Mapping) else None
        return block if isinstance(block, Mapping) else {}

    # -- the durable checkpoint ------------------------------------------------

    def _incumbent_path(self) -> str | None:
        path = self.settings.manifest_dir / INCUMBENT
        if not path.is_file():
            return None
        value = json.loads(path.read_text(encoding="utf-8"))
        return value.get("state_path") if isinstance(value, Mapping) else None

    def _manifest(self, step: int, recovered: bool) -> Mapping[str, Any]:
        path = self.settings.manifest_dir / INCUMBENT
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise QualificationError(
                f"step {step}: Reef committed it but its Tinker incumbent {path} cannot be read "
                f"({exc})"
            ) from exc
        expected = {"base_model": self.settings.model, "lora_rank": self.settings.lora_rank}
        for key, wanted in expected.items():
            if value.get(key) != wanted:
                raise QualificationError(
                    f"step {step}: the Tinker incumbent {path} has {key} {value.get(key)!r}, "
                    f"the run trains {wanted!r}"
                )
        for key in ("state_path", "sampler_path"):
            if not str(value.get(key, "")).startswith("tinker://"):
                raise QualificationError(
                    f"step {step}: the Tinker incumbent {path} has {key} {value.get(key)!r}, "
                    "not a durable tinker:// checkpoint"
                )
        if not recovered and value["state_path"] == self._previous:
            raise QualificationError(
                f"step {step}: Reef committed it but the Tinker incumbent {path} still names "
                f"the previous checkpoint {self._previous}; no new durable checkpoint"
            )
        return value


def _committed(block: Mapping[str, Any]) -> int:
    last = block.get("last_committed_step")
    step = last.get("step") if isinstance(last, Mapping) else 0
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise RuntimeError(f"/reef/status last_committed_step.step is {step!r}, not an int ≥ 0")
    return step


def _qualified(
    outcome: StepOutcome, block: Mapping[str, Any], identity: RunIdentity
) -> dict[str, Any]:
    """The step's numeric train metrics, once Reef's metrics show it trained as tttd would."""
    g, r = identity.groups_per_step, identity.rollouts_per_group
    shape = [len(group) for group in outcome.group_rewards]
    if outcome.sampled_rollouts != g * r or shape != [r] * g:
        raise QualificationError(f"rollouts {outcome.sampled_rollouts} (groups {shape}) != G·R")
    metrics = (block.get("last_committed_step") or {}).get("metrics")
    if not isinstance(metrics, Mapping):
        raise QualificationError(f"step {outcome.step}: Reef's metrics are {metrics!r}")
    checks = {
        "selected": metrics.get("selected") is True,
        "optimizer_steps": metrics.get("optimizer_steps") == 1,
        "loss:sum": _finite(metrics.get("loss:sum")),
    }
    failed = [f"{key} {metrics.get(key)!r}" for key, ok in checks.items() if not ok]
    if failed:
        raise QualificationError(
            f"step {outcome.step} did not train as one selected tttd step on Tinker: "
            + ", ".join(failed)
        )
    return {key: value for key, value in metrics.items() if _finite(value)}


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
