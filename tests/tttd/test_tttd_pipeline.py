"""The tttd pipeline stages (grouping → samples → batches) driven by Reef's own pipeline.

Records are Reef ``AgentRecord`` values shaped like the ones Reef stores for a guidance call
served by the training SGLang path (``response.training``) and for a harness report; the
pipeline is built exactly as Reef's trainer builds it, from the recipe's ``pipeline_spec`` and
the grid-bound report contract.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from reef.core.artifact_ref import ArtifactRef
from reef.core.records_types import AgentRecord, RequestType
from reef.core.trajectories import trajectory_reward
from reef.observability import ExperimentLogger
from reef.pipeline_context import PipelineContext
from reef.train.pipeline import PipelineConfig, TrainingPipeline

from tttd.batches import select_training_groups
from tttd.objective import TTTDObjective, entropic_advantages
from tttd.recipe import TTTDRecipe
from tttd.report import comparison_set_name, grid_report_type
from tttd.samples import grid_coordinates

SCENARIO = "guidance-ttt-polyomino-packing"


class RecordingLogger(ExperimentLogger):
    """Keeps what the batches stage logs."""

    def __init__(self) -> None:
        self.logged: list[tuple[str, dict[str, Any]]] = []

    def log(self, metrics: Mapping[str, Any], *, namespace: str) -> None:
        self.logged.append((namespace, dict(metrics)))


class Harness:
    """A 2×4 tttd pipeline and helpers that post one rollout the way the harness does."""

    def __init__(self, groups: int = 2, rollouts: int = 4) -> None:
        self.groups, self.rollouts = groups, rollouts
        self.logger = RecordingLogger()
        context = PipelineContext(
            SCENARIO,
            report_type=grid_report_type(groups, rollouts),
            experiment_logger=self.logger,
        )
        spec = TTTDRecipe.pipeline_spec()
        self.pipeline: TrainingPipeline = PipelineConfig.from_setting(
            None, spec=spec, environ={}
        ).build(context)
        self.reports: dict[tuple[int, int, int], str] = {}

    def rollout(
        self,
        step: int,
        group: int,
        rollout: int,
        score: float,
        release: str = "release-1",
        load: str | None = None,
    ) -> str:
        inference = AgentRecord.create(
            scenario=SCENARIO,
            request_type=RequestType.INFERENCE,
            payload={
                **({"runtime_load_id": load} if load else {}),
                "model": "guidance",
                "messages": [{"role": "user", "content": f"step {step} parent {group}"}],
                "response": {
                    "choices": [
                        {"message": {"role": "assistant", "content": "<guidance>x</guidance>"}}
                    ],
                    "training": {
                        "tokens": [11, 12, 13, 14, 15],
                        "loss_mask": [1, 1, 1],
                        "rollout_log_probs": [-0.5, -0.25, -0.125],
                        "prompt_length": 2,
                        "response_length": 3,
                    },
                },
            },
            artifact_ref=ArtifactRef(
                content_id=f"content-{release}", release_id=release, parent_release_id=None
            ),
        )
        report = AgentRecord.create(
            scenario=SCENARIO,
            request_type=RequestType.REPORT,
            payload={
                "score": score,
                "feedback": "valid: ok",
                "references": [inference.agent_record_id],
                "metadata": {
                    "step": step,
                    "group": group,
                    "rollout": rollout,
                    "groups_per_step": self.groups,
                    "rollouts_per_group": self.rollouts,
                    "algorithm": "ttt-discover",
                    "comparison_set": comparison_set_name(step, group),
                },
            },
        )
        self.pipeline.ingest(inference)
        self.pipeline.ingest(report)
        self.reports[(step, group, rollout)] = report.agent_record_id
        return report.agent_record_id

    def grid(
        self, step: int, scores: list[list[float]], skip: set[tuple[int, int]] = frozenset()
    ) -> None:
        for group, row in enumerate(scores):
            for rollout, score in enumerate(row):
                if (group, rollout) not in skip:
                    self.rollout(step, group, rollout, score)

    def status(self) -> Mapping[str, Any]:
        return self.pipeline.record2record.status()


SCORES = [[0.0, 10.0, 20.0, 30.0], [5.0, 0.0, 7.5, 12.0]]


def test_full_grid_is_ready_as_one_batch_in_group_order():
    harness = Harness()
    harness.grid(0, SCORES)
    assert harness.pipeline.ready()
    batch = harness.pipeline.build_batch()
    assert batch.batch_id == f"{SCENARIO}:tttd:0"
    coordinates = [
        (grid_coordinates(item)["group"], grid_coordinates(item)["rollout"]) for item in batch.items
    ]
    assert coordinates == [(g, r) for g in range(2) for r in range(4)]
    assert [trajectory_reward(item) for item in batch.items] == [s for row in SCORES for s in row]
    assert [item.group_id for item in batch.items[::4]] == [
        comparison_set_name(0, 0),
        comparison_set_name(0, 1),
    ]
    assert {grid_coordinates(item)["release_id"] for item in batch.items} == {"release-1"}
    # The training tensors of the guidance call travel with the sample.
    assert batch.items[0].training["rollout_log_probs"] == [-0.5, -0.25, -0.125]
    assert harness.status()["open_steps"] == []


def test_one_missing_slot_keeps_the_step_incomplete_and_status_names_it():
    harness = Harness()
    harness.grid(0, SCORES, skip={(1, 3)})
    assert not harness.pipeline.ready()
    assert harness.status()["open_steps"] == [
        {"step": 0, "filled": 7, "expected": 8, "missing": [{"group": 1, "rollout": 3}]}
    ]
    grouping = harness.pipeline.record2record.step_grouping
    assert grouping.missing_slots(0) == ((1, 3),)
    harness.rollout(0, 1, 3, 12.0)
    assert harness.pipeline.ready()
    assert harness.status()["open_steps"] == []
    assert grouping.missing_slots(0) == ()


def test_status_lists_every_missing_slot_of_each_open_step():
    harness = Harness()
    harness.rollout(0, 0, 0, 1.0)
    harness.rollout(1, 1, 2, 1.0)
    open_steps = {entry["step"]: entry for entry in harness.status()["open_steps"]}
    assert open_steps[0]["filled"] == 1
    assert {"group": 0, "rollout": 0} not in open_steps[0]["missing"]
    assert len(open_steps[0]["missing"]) == 7
    assert {"group": 1, "rollout": 2} not in open_steps[1]["missing"]
    assert open_steps[1]["missing"][0] == {"group": 0, "rollout": 0}


def test_duplicate_slot_keeps_the_first_report():
    harness = Harness()
    first = harness.rollout(0, 0, 0, 3.0)
    duplicate = harness.rollout(0, 0, 0, 99.0)
    harness.grid(0, SCORES, skip={(0, 0)})
    batch = harness.pipeline.build_batch()
    assert trajectory_reward(batch.items[0]) == 3.0
    assert first in batch.items[0].source_agent_record_ids
    assert duplicate in harness.pipeline.releasable_record_ids()
    assert len(batch.items) == 8


def test_mixed_releases_discard_the_step_with_the_documented_status():
    harness = Harness()
    for group, row in enumerate(SCORES):
        for rollout, score in enumerate(row):
            release = "release-1" if rollout < 2 else "release-2"
            harness.rollout(0, group, rollout, score, release=release)
    assert not harness.pipeline.ready()
    assert harness.status()["failed_steps"] == [
        {"step": 0, "reason": "mixed_release_ids", "release_ids": ["release-1", "release-2"]}
    ]
    assert harness.status()["open_steps"] == []
    # Every report of the discarded step is released, and a late report for it is refused too.
    late = harness.rollout(0, 0, 0, 1.0)
    assert set(harness.reports.values()) <= harness.pipeline.releasable_record_ids()
    assert late in harness.pipeline.releasable_record_ids()


def test_reports_of_an_earlier_serving_load_never_fill_the_step_reported_again():
    """A Reef restarted mid-step serves under a new load: the step's reports of the old load
    keep a group of their own that never trains, and the slots reported again under the new
    load train as one step of that load only."""
    harness = Harness()
    old = [harness.rollout(0, 0, r, SCORES[0][r], load="before:1") for r in range(2)]
    for group, row in enumerate(SCORES):
        for rollout, score in enumerate(row):
            harness.rollout(0, group, rollout, score + 1.0, load="after:0")
    assert harness.pipeline.ready()
    batch = harness.pipeline.build_batch()
    assert batch.batch_id == f"{SCENARIO}:tttd:0"
    assert [trajectory_reward(item) for item in batch.items] == [
        s + 1.0 for row in SCORES for s in row
    ]
    sources = {source for item in batch.items for source in item.source_agent_record_ids}
    assert not sources.intersection(old)
    assert harness.status()["open_steps"] == [] and harness.status()["failed_steps"] == []


def test_constant_groups_are_removed_and_statistics_logged():
    harness = Harness()
    harness.grid(0, [[5.0, 5.0, 5.0, 5.0], [0.0, 1.0, 0.0, 2.0]])
    batch = harness.pipeline.build_batch()
    assert {grid_coordinates(item)["group"] for item in batch.items} == {1}
    namespace, metrics = harness.logger.logged[-1]
    assert namespace == "tttd"
    assert metrics["constant_groups"] == 1
    assert metrics["constant_groups_removed"] == 1
    assert metrics["training_groups"] == 1
    assert metrics["training_rollouts"] == 4
    assert metrics["reward_min"] == 0.0 and metrics["reward_max"] == 5.0
    assert metrics["reward_mean"] == pytest.approx(23.0 / 8)
    assert metrics["reward_zero_fraction"] == pytest.approx(2 / 8)


def test_when_every_group_is_constant_the_first_is_kept_for_a_zero_gradient_step():
    harness = Harness()
    harness.grid(0, [[0.0] * 4, [3.0] * 4])
    batch = harness.pipeline.build_batch()
    assert {grid_coordinates(item)["group"] for item in batch.items} == {0}
    metrics = harness.logger.logged[-1][1]
    assert (metrics["constant_groups"], metrics["constant_groups_removed"]) == (2, 1)
    signal = TTTDObjective().prepare(batch, {})
    assert signal.action == "train"
    assert signal.advantages == pytest.approx([0.0] * 4, abs=1e-11)


def test_steps_train_in_step_order_and_the_batch_feeds_the_objective():
    harness = Harness()
    harness.grid(1, [[1.0, 2.0, 3.0, 4.0], [4.0, 3.0, 2.0, 1.0]])
    harness.grid(0, SCORES)
    batch = harness.pipeline.build_batch()
    assert batch.batch_id.endswith(":tttd:0")
    signal = TTTDObjective().prepare(batch, {})
    assert list(signal.advantages) == pytest.approx(
        [*entropic_advantages(SCORES[0]), *entropic_advantages(SCORES[1])]
    )
    harness.pipeline.acknowledge(batch.batch_id)
    assert harness.pipeline.build_batch().batch_id.endswith(":tttd:1")


def test_group_selection_rules_on_plain_values():
    kept = select_training_groups(4, [[1.0, 1.0], [0.0, 2.0], [3.0, 3.0]])
    assert kept.training_groups == (1,)
    assert kept.metrics["grid_groups"] == 3 and kept.metrics["grid_rollouts"] == 6
    assert select_training_groups(4, [[1.0, 1.0], [2.0, 2.0]]).training_groups == (0,)
    with pytest.raises(ValueError, match="non-finite"):
        select_training_groups(4, [[1.0, float("inf")]])
