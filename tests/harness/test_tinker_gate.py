"""The Tinker step gate (`harness.run.tinker_gate`) on Reef status pages of the shape Reef 0.1.3's
in-process Tinker topology writes, and on the Tinker incumbent manifest in a real directory."""

from __future__ import annotations

import json

import pytest

from harness.run.gate import ResumeRefused
from harness.run.qualification import QualificationError
from harness.run.tinker_gate import TinkerGate, TinkerGateSettings
from harness.storage.resume_state import RunIdentity, StepOutcome

SCENARIO = "guidance-ttt-polyomino-packing"
MODEL = "Qwen/Qwen3-8B"
IDENTITY = RunIdentity(
    model=MODEL,
    executor="x",
    gpt_oss_reasoning_effort=None,
    groups_per_step=1,
    rollouts_per_group=2,
    guidance_max_tokens=8192,
    sequence_length=12288,
    lora_rank=32,
    inference_tensor_parallel_size=0,
    megatron_tensor_parallel_size=0,
    training_backend="tinker",
)
METRICS = {"loss:sum": -1.5, "optimizer_steps": 1, "selected": True, "beta_mean": 3.0}


class Pages:
    """Reef's status page as a list of answers, the last one repeated."""

    def __init__(self, *pages):
        self.pages = list(pages)

    def fetch(self):
        return self.pages.pop(0) if len(self.pages) > 1 else self.pages[0]


def page(committed, metrics=METRICS, sync="synchronized"):
    last = {"step": committed, "metrics": metrics} if committed else None
    return {
        "error": None,
        "scenarios": {
            SCENARIO: {
                "last_committed_step": last,
                "artifact_head_sync": {"state": sync},
                "processor": {"open_steps": [], "failed_steps": []},
            }
        },
    }


def incumbent(directory, name):
    directory.mkdir(parents=True, exist_ok=True)
    value = {
        "base_model": MODEL,
        "lora_rank": 32,
        "schema_version": 1,
        "state_path": f"tinker://run:train:0/weights/{name}",
        "sampler_path": f"tinker://run:train:0/sampler_weights/{name}",
    }
    (directory / "incumbent.json").write_text(json.dumps(value))


def gate(tmp_path, *pages):
    settings = TinkerGateSettings(SCENARIO, tmp_path, MODEL, 32, poll_interval_s=0.0, deadline_s=5)
    return TinkerGate(settings, IDENTITY, Pages(*pages))


def outcome(step):
    return StepOutcome(step, 1.0, [[0.1, 0.5]], 2, 2, 10.0)


def test_a_step_settles_once_reef_commits_and_publishes_a_new_tinker_checkpoint(tmp_path):
    incumbent(tmp_path, "base")
    tinker = gate(tmp_path, page(0), page(0), page(1, sync="pending"), page(1))
    assert tinker.open(0) is None
    incumbent(tmp_path, "step-1")
    assert tinker.settle(outcome(0), recovered=False) == {
        "loss:sum": -1.5,
        "optimizer_steps": 1,
        "beta_mean": 3.0,
    }


def test_a_commit_that_leaves_the_old_checkpoint_is_not_durable(tmp_path):
    incumbent(tmp_path, "base")
    tinker = gate(tmp_path, page(0), page(1))
    tinker.open(0)
    with pytest.raises(QualificationError, match="still names the previous checkpoint"):
        tinker.settle(outcome(0), recovered=False)


def test_a_step_reef_did_not_select_is_refused(tmp_path):
    incumbent(tmp_path, "base")
    tinker = gate(tmp_path, page(0), page(1, metrics={**METRICS, "selected": False}))
    tinker.open(0)
    incumbent(tmp_path, "step-1")
    with pytest.raises(QualificationError, match="selected False"):
        tinker.settle(outcome(0), recovered=False)


def test_resume_pairs_with_reefs_committed_steps(tmp_path):
    incumbent(tmp_path, "step-2")
    assert gate(tmp_path, page(2)).open(2) is None
    assert gate(tmp_path, page(3)).open(2) == 2  # Reef committed it, the harness had not
    with pytest.raises(ResumeRefused, match="Reef has committed 5 Tinker training steps"):
        gate(tmp_path, page(5)).open(2)
