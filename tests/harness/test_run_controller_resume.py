"""Resume: identity checks, finished runs, pairing with Reef's checkpoint, and recovery of a
commit that a crash interrupted (in-process and with a real SIGKILLed subprocess)."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from bridge_fake import FakeTrainingBridge
from state_stand_in import StandInState
from test_run_controller import IDENTITY, LOG, MIXED, SCENARIO, TOKEN, Rig, outcome, rig

from harness.run.controller import (
    CHECKPOINT_MARKER,
    ControllerSettings,
    ResumeRefused,
    RunController,
)
from harness.run.gate import FrozenGate
from harness.storage.resume_state import ResumeStateError, RunIdentity

__all__ = ["rig"]  # the fixture, shared with test_run_controller.py


class Crash(BaseException):
    """Stands in for the process dying at a chosen point of the commit."""


def committed_steps(rig: Rig, steps: int, total: int = 4) -> None:
    rig.new_bridge()
    controller = rig.controller(steps=total)
    controller.begin()
    for step in range(steps):
        rig.run_step(controller, step)


def test_resume_continues_at_next_step_and_keeps_the_summaries(rig: Rig) -> None:
    committed_steps(rig, 2, total=3)
    rig.new_bridge()  # a restarted slime-driver loads the step-1 checkpoint
    controller = rig.controller(steps=4)  # STEPS raised: a final total, not an increment
    start = controller.begin()
    assert (start.start_step, start.steps, start.recovered_step) == (2, 4, None)
    assert [s["step"] for s in start.step_summaries] == [0, 1]
    rig.run_step(controller, 2)
    stored = json.loads(rig.resume_state.read_text())
    assert stored["next_step"] == 3 and [s["step"] for s in stored["step_summaries"]] == [0, 1, 2]


CHANGED = {
    "model": "Qwen/Qwen3-14B",
    "executor": "z-ai/glm-5.2",
    "gpt_oss_reasoning_effort": None,
    "groups_per_step": 8,
    "rollouts_per_group": 16,
    "guidance_max_tokens": 4096,
    "sequence_length": 16384,
    "lora_rank": 16,
    "inference_tensor_parallel_size": 2,
    "megatron_tensor_parallel_size": 1,
    "task_text": "full",  # what both models read: another text is another experiment
    "arm": "unguided",
    "parent_selection": "greedy",
    "run_seed": 7,
    "guidance_request": "openai",  # another body: another endpoint contract
    "training_backend": "tinker",  # another trainer: other weights
}


@pytest.mark.parametrize("key", list(CHANGED))
def test_resume_refuses_each_identity_mismatch_naming_the_key(rig: Rig, key: str) -> None:
    assert set(CHANGED) | {"mode"} == {f.name for f in dataclasses.fields(IDENTITY)}
    committed_steps(rig, 1)
    before = rig.resume_state.read_bytes()
    rig.new_bridge()
    controller = rig.controller(identity=dataclasses.replace(IDENTITY, **{key: CHANGED[key]}))
    with pytest.raises(ResumeRefused) as refused:
        controller.begin()
    stored = getattr(IDENTITY, key)
    assert f"{key} stored {stored!r}, requested {CHANGED[key]!r}" in str(refused.value)
    assert "use a new state directory" in str(refused.value)
    assert rig.resume_state.read_bytes() == before


FROZEN = dataclasses.replace(
    IDENTITY,
    mode="frozen",
    lora_rank=0,
    inference_tensor_parallel_size=0,
    megatron_tensor_parallel_size=0,
)


def frozen_controller(rig: Rig, steps: int = 3, identity: RunIdentity = FROZEN) -> RunController:
    return RunController(
        ControllerSettings(rig.state_dir, SCENARIO, steps),
        identity,
        {"name": "local"},
        None,
        None,
        StandInState(rig.state_dir),  # no bridge to record
        gate=FrozenGate(),
    )


def test_frozen_controller_commits_each_step_at_once_without_a_bridge(rig: Rig) -> None:
    controller = frozen_controller(rig, steps=2)
    start = controller.begin()
    assert (start.start_step, start.recovered_step) == (0, None)
    for step in (0, 1):
        summary = controller.complete_step(outcome(step))
        assert summary["train_metrics"] == {} and summary["grad_norm"] is None
    stored = json.loads(rig.resume_state.read_text())
    assert stored["next_step"] == 2 and stored["identity"]["mode"] == "frozen"
    assert rig.archive_step() == 1


def test_trained_state_refuses_a_frozen_resume_naming_the_mode(rig: Rig) -> None:
    committed_steps(rig, 1)
    before = rig.resume_state.read_bytes()
    with pytest.raises(ResumeRefused) as refused:
        frozen_controller(rig).begin()
    assert "mode stored 'trained', requested 'frozen'" in str(refused.value)
    assert rig.resume_state.read_bytes() == before


def test_a_gate_of_another_mode_than_the_identity_is_refused(rig: Rig) -> None:
    with pytest.raises(ValueError, match="identity is 'trained' but its step gate is 'frozen'"):
        frozen_controller(rig, identity=IDENTITY)


@pytest.mark.parametrize("steps", [2, 1])
def test_finished_run_refuses_to_start(rig: Rig, steps: int) -> None:
    committed_steps(rig, 2, total=2)
    rig.new_bridge()
    with pytest.raises(ResumeRefused, match="run already finished") as refused:
        rig.controller(steps=steps).begin()
    assert f"next_step 2 and STEPS is {steps}" in str(refused.value)
    assert "final total" in str(refused.value)


@pytest.mark.parametrize(("tracker", "reef_start"), [("0", 1), ("3", 4)])
def test_reef_checkpoint_must_start_at_the_committed_step(
    rig: Rig, tracker: str, reef_start: int
) -> None:
    committed_steps(rig, 2)
    (rig.state_dir / CHECKPOINT_MARKER).write_text(tracker + "\n")
    rig.new_bridge()
    with pytest.raises(ResumeRefused) as refused:
        rig.controller().begin()
    message = str(refused.value)
    assert f"Reef's checkpoint starts at step {reef_start}" in message
    assert "continues at step 2" in message


def test_fresh_state_refuses_a_reef_checkpoint_from_another_run(rig: Rig) -> None:
    marker = rig.state_dir / CHECKPOINT_MARKER
    marker.parent.mkdir(parents=True)
    marker.write_text("5\n")
    rig.new_bridge()
    with pytest.raises(ResumeRefused, match=r"starts at step 6 .* continues at step 0"):
        rig.controller().begin()


def test_unhealthy_bridge_refuses_to_start(rig: Rig) -> None:
    from bridge_fake import BridgeFaults

    rig.new_bridge(faults=BridgeFaults(ok=False))
    with pytest.raises(ResumeRefused, match="not healthy at start"):
        rig.controller().begin()


def _edit(change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    return change


DEFECTS = {
    "format_version 2 is not 1": _edit(lambda d: d.update(format_version=2)),
    "unknown keys ['surprise'], missing keys []": _edit(lambda d: d.update(surprise=1)),
    "unknown keys [], missing keys ['prompt_mode']": _edit(lambda d: d.pop("prompt_mode")),
    "identity: unknown keys ['temperature']": _edit(lambda d: d["identity"].update(temperature=1)),
    "identity: unknown keys [], missing keys ['lora_rank']": _edit(
        lambda d: d["identity"].pop("lora_rank")
    ),
    "step_summaries[0]: unknown keys [], missing keys ['grad_norm']": _edit(
        lambda d: d["step_summaries"][0].pop("grad_norm")
    ),
    "1 step summaries for next_step 2": _edit(lambda d: d.update(next_step=2)),
    "run identity lora_rank is 0": _edit(lambda d: d["identity"].update(lora_rank=0)),
}


@pytest.mark.parametrize("message", list(DEFECTS))
def test_defective_resume_state_is_refused_naming_the_defect(rig: Rig, message: str) -> None:
    committed_steps(rig, 1)
    data = json.loads(rig.resume_state.read_text())
    DEFECTS[message](data)
    rig.resume_state.write_text(json.dumps(data))
    rig.new_bridge()
    with pytest.raises(ResumeStateError) as refused:
        rig.controller().begin()
    assert message in str(refused.value) and "resume-state.json" in str(refused.value)


def test_unreadable_resume_state_is_refused(rig: Rig) -> None:
    committed_steps(rig, 1)
    rig.resume_state.write_text('{"format_version": 1,')
    rig.new_bridge()
    with pytest.raises(ResumeStateError, match=r"resume-state\.json: not valid JSON"):
        rig.controller().begin()


def crash_in_commit(rig: Rig, step: int, *, after_archive: bool) -> None:
    """Make the archive commit of `step` die, before or after it wrote the archive."""
    commit = rig.commit_archive

    def dying(at: int) -> None:
        if at == step and not after_archive:
            raise Crash
        commit(at)
        if at == step:
            raise Crash

    rig.commit_archive = dying  # type: ignore[method-assign]


def test_crash_between_archive_and_resume_state_is_recommitted_after_a_full_restart(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    rig.new_bridge()
    controller = rig.controller()
    controller.begin()
    rig.run_step(controller, 0)
    crash_in_commit(rig, 1, after_archive=True)
    with pytest.raises(Crash):
        rig.run_step(controller, 1)
    # The archive carries step 1, the commit record still says step 1 is next.
    assert rig.archive_step() == 1
    assert json.loads(rig.resume_state.read_text())["next_step"] == 1

    del rig.commit_archive  # the process that restarts commits normally
    rig.new_bridge()  # Reef restarted too: its checkpoint holds step 1, its counters are gone
    controller = rig.controller()
    start = controller.begin()
    assert (start.start_step, start.recovered_step, start.archive_holds_start_step) == (1, 1, True)
    with caplog.at_level(logging.WARNING, logger=LOG):
        summary = controller.complete_step(outcome(1))  # rebuilt from the journal, not re-run
    assert summary["recovered_commit"] is True and summary["train_metrics"] == {}
    assert any("without the metric checks" in r.getMessage() for r in caplog.records)
    assert [c["step"] for c in rig.commits] == [0, 1, 1]
    assert json.loads(rig.resume_state.read_text())["next_step"] == 2
    # The next step trains normally on the restarted bridge.
    assert rig.run_step(controller, 2)["recovered_commit"] is False


def test_crash_before_the_archive_commit_is_requalified_on_a_live_bridge(rig: Rig) -> None:
    bridge = rig.new_bridge()
    controller = rig.controller()
    controller.begin()
    rig.run_step(controller, 0)
    crash_in_commit(rig, 1, after_archive=False)
    with pytest.raises(Crash):
        rig.run_step(controller, 1)
    assert rig.archive_step() == 0

    del rig.commit_archive  # the process that restarts commits normally
    assert rig.bridge is bridge  # only the harness restarted; Reef kept its counters
    controller = rig.controller()
    start = controller.begin()
    assert (start.recovered_step, start.archive_holds_start_step) == (1, False)
    summary = controller.complete_step(outcome(1))
    assert summary["recovered_commit"] is True
    assert summary["train_metrics"]["train/global_batch_size"] == 8, "fully qualified"
    assert rig.run_step(controller, 2)["step"] == 2


def test_restart_while_reef_still_trains_the_step_waits_for_it(rig: Rig) -> None:
    bridge = rig.new_bridge(polls_per_phase=2)
    first = rig.controller()
    first.begin()
    bridge.submit_step(0, MIXED)
    bridge.health()  # training has begun when the harness dies
    controller = rig.controller()
    start = controller.begin()
    assert (start.start_step, start.recovered_step) == (0, None)
    assert controller.complete_step(outcome(0))["recovered_commit"] is False


def test_archive_ahead_of_an_untrained_step_is_refused(rig: Rig) -> None:
    committed_steps(rig, 1)
    rig.archive.write_text(json.dumps({"step": 1}))
    rig.new_bridge()
    with pytest.raises(ResumeRefused, match=r"carries step 1 .* continues at step 1"):
        rig.controller().begin()


CHILD = """
import os, signal, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from bridge_fake import FakeTrainingBridge
from state_stand_in import StandInState
from harness.adapters.reef.status import ReefStatusClient
from harness.storage.resume_state import RunIdentity, StepOutcome
from harness.run.controller import ControllerSettings, RunController

state_dir = Path({state!r})
bridge = FakeTrainingBridge(state_dir, groups_per_step=2, rollouts_per_group=4)
rewards = {rewards!r}

def commit_archive(step):
    state.write_archive(step)
    if step == 1:
        os.kill(os.getpid(), signal.SIGKILL)  # die between the archive and the resume state

state = StandInState(state_dir, commit_archive)
controller = RunController(
    ControllerSettings(state_dir, {scenario!r}, 3, poll_interval_s=0.005, deadline_s=20),
    RunIdentity(**{identity!r}), {{"name": "local"}}, bridge,
    ReefStatusClient({url!r}, token={token!r}), state,
)
controller.begin()
for step in (0, 1):
    bridge.submit_step(step, rewards)
    controller.complete_step(StepOutcome(step, 1.0, rewards, 5, 8, 0.7))
"""


@pytest.mark.slow
def test_sigkill_between_archive_and_resume_state_then_resume_recommits(rig: Rig) -> None:
    script = CHILD.format(
        tests=str(Path(__file__).parents[1]),
        state=str(rig.state_dir),
        rewards=MIXED,
        scenario=SCENARIO,
        identity=dataclasses.asdict(IDENTITY),
        url=rig.server.url,
        token=TOKEN,
    )
    child = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=120
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert rig.archive_step() == 1
    assert json.loads(rig.resume_state.read_text())["next_step"] == 1
    assert not [p for p in rig.resume_state.parent.iterdir() if p.name.endswith(".tmp")]

    rig.bridge = FakeTrainingBridge(rig.state_dir, groups_per_step=2, rollouts_per_group=4)
    controller = rig.controller()
    start = controller.begin()
    assert (start.start_step, start.recovered_step, start.archive_holds_start_step) == (1, 1, True)
    controller.complete_step(outcome(1))
    stored = json.loads(rig.resume_state.read_text())
    assert stored["next_step"] == 2 and stored["step_summaries"][1]["recovered_commit"] is True
    assert os.path.exists(rig.state_dir / CHECKPOINT_MARKER)


def _controller_with_backend(rig: Rig, backend: dict[str, Any], steps: int = 3) -> RunController:
    return RunController(
        ControllerSettings(rig.state_dir, SCENARIO, steps),
        FROZEN,
        backend,
        None,
        None,
        StandInState(rig.state_dir),
        gate=FrozenGate(),
    )


def test_a_changed_executor_setting_is_one_warning_naming_the_key_and_a_stand_ins_port_none(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    first = {"name": "gpt_oss_120b", "model": "m", "base_url": "http://127.0.0.1:41001/v1"}
    controller = _controller_with_backend(rig, first)
    controller.begin()
    controller.complete_step(outcome(0))
    caplog.set_level(logging.INFO, logger="harness.run.controller")
    # A stand-in (or any local server) on a fresh port: noted, not warned about.
    _controller_with_backend(rig, {**first, "base_url": "http://127.0.0.1:52002/v1"}).begin()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("base_url" in r.getMessage() for r in caplog.records)
    caplog.clear()
    changed = {**first, "reasoning_effort": "high"}
    _controller_with_backend(rig, changed).begin()
    (warning,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert warning.getMessage() == (
        "executor setting changed since the last commit (same executor model): "
        "reasoning_effort None → 'high'"
    )
