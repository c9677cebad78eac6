"""The run controller against a real status server, real files and the training-bridge fake.

Covers the durability barrier, the qualification gate, the commit order and the degenerate-step
rule. Resume and crash recovery are in `test_run_controller_resume.py`.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from bridge_fake import BridgeFaults, FakeTrainingBridge, StatusServer, status_page
from state_stand_in import StandInState

from harness.adapters.reef.status import ReefStatusClient
from harness.observe.events import EventSink
from harness.run.controller import (
    CHECKPOINT_MARKER,
    ControllerSettings,
    RunController,
    TrainingTimeoutError,
)
from harness.run.qualification import QualificationError
from harness.storage.atomic import atomic_write_json
from harness.storage.resume_state import RunIdentity, StepOutcome

G, R = 2, 4
SCENARIO = "guidance-ttt-polyomino-packing"
TOKEN = "reef-local"
IDENTITY = RunIdentity(
    model="Qwen/Qwen3-8B",
    executor="openai/gpt-oss-120b",
    gpt_oss_reasoning_effort="low",
    groups_per_step=G,
    rollouts_per_group=R,
    guidance_max_tokens=8192,
    sequence_length=12288,
    lora_rank=32,
    inference_tensor_parallel_size=1,
    megatron_tensor_parallel_size=2,
)
BACKEND = {"name": "local", "model": "openai/gpt-oss-120b", "api_key_env": None}
MIXED = ((0.0, 0.7, 0.7, 0.2), (0.4, 0.4, 0.4, 0.9))
CONSTANT = ((0.0, 0.0, 0.0, 0.0), (0.3, 0.3, 0.3, 0.3))
ONE_CONSTANT = ((0.0, 0.7, 0.7, 0.2), (0.5, 0.5, 0.5, 0.5))
LOG = "harness.run.gate"


def outcome(step: int, rewards: Any = MIXED) -> StepOutcome:
    return StepOutcome(
        step=step,
        elapsed_s=12.5,
        group_rewards=rewards,
        valid_rollouts=sum(1 for group in rewards for x in group if x > 0),
        well_formed_guidance=sum(len(group) for group in rewards),
        best_raw_score=max(max(group) for group in rewards),
    )


@dataclass
class Rig:
    """One state directory with a status server; builds bridges and controllers on it. The
    archive commit writes a stand-in `committed-library.json` carrying the step (the real
    archive belongs to harness.library) and records what it saw at commit time."""

    state_dir: Path
    server: StatusServer
    page: dict[str, Any]
    commits: list[dict[str, Any]] = field(default_factory=list)
    bridge: FakeTrainingBridge | None = None
    clients: list[ReefStatusClient] = field(default_factory=list)

    @property
    def archive(self) -> Path:
        return self.state_dir / "guidance-run" / "committed-library.json"

    @property
    def resume_state(self) -> Path:
        return self.state_dir / "guidance-run" / "resume-state.json"

    def new_bridge(self, **kwargs: Any) -> FakeTrainingBridge:
        self.bridge = FakeTrainingBridge(
            self.state_dir, groups_per_step=G, rollouts_per_group=R, **kwargs
        )
        return self.bridge

    def commit_archive(self, step: int) -> None:
        stored = json.loads(self.resume_state.read_text()) if self.resume_state.exists() else None
        assert self.bridge is not None
        self.commits.append(
            {
                "step": step,
                "bridge_phase": self.bridge.phases_seen[-1],
                "resume_next_step": None if stored is None else stored["next_step"],
            }
        )
        atomic_write_json(self.archive, {"step": step})

    def archive_step(self) -> int | None:
        return json.loads(self.archive.read_text())["step"] if self.archive.exists() else None

    def controller(
        self,
        steps: int = 3,
        identity: RunIdentity = IDENTITY,
        events: EventSink | None = None,
        **settings: Any,
    ) -> RunController:
        assert self.bridge is not None
        options = {"poll_interval_s": 0.005, "deadline_s": 20.0, **settings}
        self.clients.append(ReefStatusClient(self.server.url, token=TOKEN, timeout_s=5))
        return RunController(
            ControllerSettings(self.state_dir, SCENARIO, steps, **options),
            identity,
            BACKEND,
            self.bridge,
            self.clients[-1],
            StandInState(self.state_dir, lambda step: self.commit_archive(step)),  # late-bound:
            # a test may swap in a crash
            events=events,
        )

    def run_step(self, controller: RunController, step: int, rewards: Any = MIXED) -> dict:
        assert self.bridge is not None
        self.bridge.submit_step(step, rewards)
        return controller.complete_step(outcome(step, rewards))


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    page = status_page(SCENARIO)
    with StatusServer(lambda: page) as server:
        made = Rig(tmp_path / "work" / "polyomino_packing", server, page)
        yield made
        for client in made.clients:
            client.close()


def test_barrier_waits_through_awaiting_commit_and_commits_once_serving(rig: Rig) -> None:
    bridge = rig.new_bridge(polls_per_phase=3)
    controller = rig.controller()
    assert controller.begin().start_step == 0

    summary = rig.run_step(controller, 0)

    seen = bridge.phases_seen
    assert "awaiting_commit" in seen and seen.index("awaiting_commit") < len(seen) - 1
    assert seen.count("awaiting_commit") == 3, "each phase was polled through, not skipped"
    assert rig.commits == [{"step": 0, "bridge_phase": "serving", "resume_next_step": None}]
    stored = json.loads(rig.resume_state.read_text())
    assert stored["next_step"] == 1 and stored["step_summaries"] == [summary]
    assert summary["grad_norm"] == pytest.approx(
        bridge.health()["last_train_metrics"]["train/grad_norm"]
    )
    assert rig.server.authorizations and set(rig.server.authorizations) == {f"Bearer {TOKEN}"}


def test_commit_writes_archive_before_resume_state_and_records_the_summary(rig: Rig) -> None:
    rig.new_bridge()
    controller = rig.controller()
    controller.begin()
    rig.run_step(controller, 0)
    second = rig.run_step(controller, 1, ONE_CONSTANT)

    # At each archive commit, resume-state.json still named the step being committed.
    assert [c["resume_next_step"] for c in rig.commits] == [None, 1]
    stored = json.loads(rig.resume_state.read_text())
    assert stored["format_version"] == 1
    assert stored["identity"]["rollouts_per_group"] == R
    assert stored["executor_backend"] == BACKEND and stored["prompt_mode"] == "summary_only"
    assert stored["next_step"] == 2 and controller.next_step == 2
    assert second == stored["step_summaries"][1]
    assert second["sampled_rollouts"] == G * R and second["nonconstant_groups"] == 1
    assert second["retained_trajectories"] == R and second["degenerate_step"] is False
    assert second["train_metrics"]["train/global_batch_size"] == R
    assert second["best_raw_score"] == 0.7 and second["recovered_commit"] is False


def test_status_error_fails_the_step_without_committing(rig: Rig) -> None:
    rig.page["error"] = "RuntimeError: training thread stopped unexpectedly"
    rig.new_bridge()
    controller = rig.controller()
    controller.begin()
    with pytest.raises(RuntimeError, match="training thread stopped unexpectedly"):
        rig.run_step(controller, 0)
    assert rig.commits == [] and not rig.resume_state.exists()


def test_mixed_release_failed_step_fails_naming_the_releases(rig: Rig) -> None:
    failed = [
        {"step": 3, "reason": "mixed_release_ids", "release_ids": ["other-a", "other-b"]},
        {"step": 0, "reason": "mixed_release_ids", "release_ids": ["rel-0007", "rel-0008"]},
    ]
    rig.page.update(status_page(SCENARIO, failed_steps=failed))
    rig.new_bridge(polls_per_phase=50)
    controller = rig.controller()
    controller.begin()
    with pytest.raises(RuntimeError, match="mixed_release_ids") as caught:
        rig.run_step(controller, 0)
    assert "rel-0007, rel-0008" in str(caught.value) and "other-a" not in str(caught.value)
    assert rig.commits == [] and not rig.resume_state.exists()


def test_failed_step_of_another_scenario_does_not_stop_this_one(rig: Rig) -> None:
    page = status_page("guidance-ttt-other-task", failed_steps=[{"step": 0, "release_ids": ["x"]}])
    rig.page["scenarios"].update(page["scenarios"])
    rig.new_bridge()
    controller = rig.controller()
    controller.begin()
    assert rig.run_step(controller, 0)["step"] == 0


@pytest.mark.parametrize(
    "failed_phase", ["training_failed", "checkpoint_failed", "weight_sync_failed", "stopped"]
)
def test_failed_bridge_phase_fails_at_once(rig: Rig, failed_phase: str) -> None:
    rig.new_bridge(faults=BridgeFaults(fail_in=failed_phase))
    controller = rig.controller(deadline_s=60.0)
    controller.begin()
    started = time.monotonic()
    with pytest.raises(RuntimeError, match=f"phase '{failed_phase}'"):
        rig.run_step(controller, 0)
    assert time.monotonic() - started < 5, "a failed phase must not wait for the deadline"
    assert rig.commits == [] and not rig.resume_state.exists()


def test_deadline_raises_the_dedicated_training_timeout_error(rig: Rig) -> None:
    rig.new_bridge(faults=BridgeFaults(stall_in="checkpointing"))
    controller = rig.controller(deadline_s=0.3)
    controller.begin()
    with pytest.raises(TrainingTimeoutError, match=r"step 0 within 0s.*phase checkpointing") as e:
        rig.run_step(controller, 0)
    assert not isinstance(e.value, TimeoutError)
    assert rig.commits == [] and not rig.resume_state.exists()


def test_missing_slots_are_logged_while_waiting(rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    """The harness reports slowly: Reef's status lists the missing slots, which the controller
    logs while it waits; when the last slot arrives Reef trains and the step commits."""

    def page() -> dict[str, Any]:
        seen = rig.server.requests  # counts this request
        missing = [(0, 1), (1, 3)] if seen <= 2 else [(1, 3)] if seen <= 4 else []
        return status_page(SCENARIO, open_steps={0: missing} if missing else {})

    rig.server.page = page
    rig.new_bridge(reports_source=lambda step: MIXED if rig.server.requests > 4 else None)
    controller = rig.controller()
    controller.begin()
    with caplog.at_level(logging.INFO, logger=LOG):
        controller.complete_step(outcome(0))
    waiting = [r.getMessage() for r in caplog.records if "waiting for Reef" in r.getMessage()]
    assert any("missing slots: g0r1, g1r3" in m for m in waiting)
    assert any("missing slots: g1r3" in m and "g0r1" not in m for m in waiting)
    assert rig.commits[0]["step"] == 0


def test_under_reported_step_times_out_naming_the_missing_slots(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    rig.page.update(status_page(SCENARIO, open_steps={0: [(1, 2)]}))
    rig.new_bridge()  # the grid is never complete, so Reef never trains
    controller = rig.controller(deadline_s=0.3)
    controller.begin()
    with caplog.at_level(logging.INFO, logger=LOG), pytest.raises(TrainingTimeoutError) as e:
        controller.complete_step(outcome(0))
    assert "missing slots: g1r2" in str(e.value) and "under-reported" in str(e.value)
    assert any("missing slots: g1r2" in r.getMessage() for r in caplog.records)


def test_unavailable_status_page_is_asked_again(rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    rig.server.fail_next(3, 503)
    rig.new_bridge()
    controller = rig.controller()
    controller.begin()
    with caplog.at_level(logging.WARNING, logger=LOG):
        rig.run_step(controller, 0)
    assert sum("status unavailable" in r.getMessage() for r in caplog.records) == 3
    assert rig.commits[0]["step"] == 0


def _set(key: str, value: Any) -> BridgeFaults:
    return BridgeFaults(metrics={key: value})


@pytest.mark.parametrize(
    ("faults", "message"),
    [
        (_set("train/grad_norm", math.nan), "train/grad_norm nan is not finite"),
        (_set("train/grad_norm", 0.0), "train/grad_norm 0.0 is not > 0"),
        (_set("train/grad_norm", None), "train/grad_norm is None, not a number"),
        (_set("train/global_batch_size", 16), "global_batch_size 16 != retained groups 2 × R 4"),
        (_set("train/lora_trainable_parameters", 0), "lora_trainable_parameters 0 is not > 0"),
        (_set("train/lora_base_trainable_parameters", 4096), "base_trainable_parameters 4096"),
        (_set("train/lora_b_nonzero", 0), "train/lora_b_nonzero 0 is not > 0"),
        (_set("train/lora_b_l1", math.inf), "train/lora_b_l1 inf is not finite"),
        (_set("train/lora_b_l1", 0.0), "train/lora_b_l1 0.0 is not > 0"),
        (BridgeFaults(write_checkpoint=False), "latest_checkpointed_iteration.txt does not exist"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_each_qualification_check_fails_closed(
    rig: Rig, faults: BridgeFaults, message: str
) -> None:
    rig.new_bridge(faults=faults)
    controller = rig.controller()
    controller.begin()
    with pytest.raises(QualificationError, match=re.escape(message)):
        rig.run_step(controller, 0)
    assert rig.commits == [] and not rig.resume_state.exists()


@pytest.mark.parametrize(
    ("faults", "message"),
    [
        (BridgeFaults(ok=False), "ok=False"),
        (BridgeFaults(rollout_id_shift=1), "last_train_rollout_id 1 .step 0."),
        (BridgeFaults(extra_completed=1), "completed_train_steps 2 .expected 1."),
    ],
    ids=["not-ok", "rollout-id-ahead", "completed-steps-ahead"],
)
def test_bridge_state_contradicting_the_step_fails_at_once(
    rig: Rig, faults: BridgeFaults, message: str
) -> None:
    faults.at_step = 0  # healthy at begin(), broken while step 0 trains
    rig.new_bridge(faults=faults)
    controller = rig.controller(deadline_s=60.0)
    controller.begin()
    with pytest.raises(RuntimeError, match=message):
        rig.run_step(controller, 0)
    assert rig.commits == []


class ForgetfulBridge:
    """The bridge fake, answering `last_train_rollout_id` None once a step is counted: a bridge
    that counts a trained step without its rollout, as none outside recovery does."""

    def __init__(self, bridge: FakeTrainingBridge) -> None:
        self._bridge = bridge

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bridge, name)

    def health(self) -> dict[str, Any]:
        health = self._bridge.health()
        if health["completed_train_steps"]:
            health["last_train_rollout_id"] = None
        return health


class HealthLog:
    """Wraps a bridge and keeps every `health()` answer, in order."""

    def __init__(self, bridge: Any) -> None:
        self._bridge = bridge
        self.answers: list[dict[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bridge, name)

    def health(self) -> dict[str, Any]:
        self.answers.append(self._bridge.health())
        return self.answers[-1]


@pytest.mark.parametrize(
    ("step", "found"),
    [(1, "0"), (0, "None")],
    ids=["another-steps-rollout", "no-rollout"],
)
def test_the_right_count_with_another_steps_rollout_stops_within_one_poll(
    rig: Rig, step: int, found: str
) -> None:
    """Reference harness/run_controller.py `wait_for_training_step`: with
    `completed_train_steps` at the expected count and `last_train_rollout_id` another step's,
    it raises at once ("durable training completed the wrong rollout"), whatever the phase.
    The count is never reached again, so waiting could only end at the 4-hour deadline."""
    if found == "None":
        watched = HealthLog(ForgetfulBridge(rig.new_bridge()))
    else:  # step 0 trains as it should; step 1 is counted with step 0's rollout
        watched = HealthLog(rig.new_bridge(faults=BridgeFaults(at_step=1, rollout_id_shift=-1)))
    rig.bridge = watched  # type: ignore[assignment]
    controller = rig.controller(deadline_s=3600.0)
    controller.begin()
    if step == 1:
        rig.run_step(controller, 0)
    watched.answers.clear()
    with pytest.raises(RuntimeError, match="another step's rollout") as caught:
        rig.run_step(controller, step)
    message = str(caught.value)
    assert f"step {step}" in message and f"last_train_rollout_id is {found}" in message
    counted = [a for a in watched.answers if a["completed_train_steps"] == step + 1]
    assert counted == [watched.answers[-1]], "it stops on the first poll that shows the count"
    assert counted[0]["phase"] == "awaiting_commit"
    assert [c["step"] for c in rig.commits] == list(range(step))


def test_an_empty_error_on_the_status_page_stops_the_step(rig: Rig) -> None:
    """Reference harness/run_controller.py `scenario_status`: an `error` that is not null must be
    a non-empty string ("Reef returned an invalid training error"); Reef writes a text or null."""
    rig.page["error"] = ""
    rig.new_bridge(polls_per_phase=50)
    controller = rig.controller(deadline_s=3600.0)
    controller.begin()
    with pytest.raises(RuntimeError, match="empty `error` while step 0 trains"):
        rig.run_step(controller, 0)
    assert rig.commits == [] and not rig.resume_state.exists()


def test_wrong_rollout_count_fails_the_gate(rig: Rig) -> None:
    rig.new_bridge()
    controller = rig.controller()
    controller.begin()
    rig.bridge.submit_step(0, MIXED)
    short = outcome(0, (MIXED[0], MIXED[1][:3]))
    with pytest.raises(QualificationError, match=r"rollouts 7 \(groups \[4, 3\]\) != G·R = 2·4"):
        controller.complete_step(short)
    assert rig.commits == []


def test_degenerate_step_is_committed_without_gradient_checks_and_recorded(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    bridge = rig.new_bridge()
    controller = rig.controller()
    controller.begin()
    with caplog.at_level(logging.WARNING, logger=LOG):
        summary = rig.run_step(controller, 0, CONSTANT)

    metrics = bridge.health()["last_train_metrics"]
    assert metrics["train/grad_norm"] == 0.0 and metrics["train/lora_b_nonzero"] == 0
    assert summary["degenerate_step"] is True and summary["nonconstant_groups"] == 0
    assert summary["retained_trajectories"] == R and summary["grad_norm"] == 0.0
    assert json.loads(rig.resume_state.read_text())["step_summaries"][0]["degenerate_step"]
    assert any("step 0 is degenerate" in r.getMessage() for r in caplog.records)
    # The next step with a gradient is checked in full again (LoRA B moves off zero).
    assert rig.run_step(controller, 1)["degenerate_step"] is False


def test_degenerate_step_still_fails_the_non_gradient_checks(rig: Rig) -> None:
    rig.new_bridge(faults=_set("train/lora_base_trainable_parameters", 1))
    controller = rig.controller()
    controller.begin()
    with pytest.raises(QualificationError, match="base must stay frozen"):
        rig.run_step(controller, 0, CONSTANT)


def test_complete_step_refuses_a_step_out_of_order(rig: Rig) -> None:
    rig.new_bridge()
    controller = rig.controller()
    with pytest.raises(RuntimeError, match="before begin"):
        controller.complete_step(outcome(0))
    controller.begin()
    with pytest.raises(RuntimeError, match="got step 1 but the run is at step 0"):
        controller.complete_step(outcome(1))


def test_non_finite_reward_is_refused_as_a_bug() -> None:
    with pytest.raises(ValueError, match="non-finite reward"):
        outcome(0, ((0.0, math.nan, 0.0, 0.0), (0.0,) * 4))


def test_checkpoint_marker_path_matches_slime_layout(rig: Rig) -> None:
    rig.new_bridge()
    controller = rig.controller()
    controller.begin()
    rig.run_step(controller, 0)
    marker = rig.state_dir / CHECKPOINT_MARKER
    assert marker.read_text().strip() == "0"
    assert (marker.parent / "iter_0000000").is_dir()


def test_elapsed_s_spans_the_rollouts_the_barrier_and_the_gate(rig: Rig) -> None:
    """Reference harness/run_controller.py: a summary's `elapsed_s` runs from the step's start to
    after `wait_for_step` and `require_step_success`. Ours: the rollout phase's time (the
    outcome's 12.5 s) plus the whole barrier and qualification gate, which the bridge fake
    stretches over several polls of every phase."""
    bridge = rig.new_bridge(polls_per_phase=4)
    polled: list[float] = []
    health = bridge.health

    def timed_health() -> dict[str, Any]:
        polled.append(time.monotonic())
        return health()

    bridge.health = timed_health  # type: ignore[method-assign]
    controller = rig.controller(poll_interval_s=0.01)
    controller.begin()
    bridge.submit_step(0, MIXED)
    polled.clear()
    before = time.monotonic()
    summary = controller.complete_step(outcome(0))
    after = time.monotonic()
    barrier = polled[-1] - polled[0]
    assert barrier > 0 and len(polled) >= 4 * 4, "the barrier polled through every phase"
    assert 12.5 + barrier - 0.001 <= summary["elapsed_s"] <= 12.5 + (after - before) + 0.001
    assert json.loads(rig.resume_state.read_text())["step_summaries"] == [summary]


def test_a_status_page_without_the_processor_block_stops_the_step(rig: Rig) -> None:
    """Reference harness/run_controller.py (`failed_training_step`): a scenario status without a
    `processor` mapping is "invalid processor status" and ends the wait; ours names the block
    and nothing is committed."""
    del rig.page["scenarios"][SCENARIO]["processor"]
    rig.new_bridge()
    controller = rig.controller()
    controller.begin()
    with pytest.raises(RuntimeError, match="no processor block"):
        rig.run_step(controller, 0)
    assert rig.commits == [] and not rig.resume_state.exists()
