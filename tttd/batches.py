"""Step → batch: the third pipeline stage of tttd.

A complete step is laid back out as its grid, groups whose rewards are all equal are dropped
(they carry no relative signal), and when every group is constant the first one is kept so the
backend still runs a well-defined zero-gradient step. The per-step reward statistics are logged
(Python log and the scenario's experiment logger, namespace ``tttd``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Self

from reef.core.batches import TrainDataItem, TrainingBatch, TrajectoryItem
from reef.core.plugins import NoSettings
from reef.core.trajectories import trajectory_reward
from reef.pipeline_context import PipelineContext
from reef.record2record import Record2Record
from reef.record2task import Record2Task
from reef.task2batch import Task2Batch

from tttd.samples import grid_coordinates

log = logging.getLogger(__name__)


def is_constant(rewards: Sequence[float]) -> bool:
    """Whether every reward of a group equals the first (no relative signal)."""
    return all(reward == rewards[0] for reward in rewards[1:])


@dataclass(frozen=True)
class StepSelection:
    """Which groups of a step train, and the step's reward statistics (JSON-safe numbers)."""

    training_groups: tuple[int, ...]
    metrics: Mapping[str, float | int]


def select_training_groups(step: int, groups: Sequence[Sequence[float]]) -> StepSelection:
    """Drop constant-reward groups, keeping the first group when every group is constant.

    ``groups`` are the step's rewards, group-major. The statistics are the grid, reward
    min/max/mean/std (population), the fraction of zero rewards, how many constant groups were
    removed, and how many groups and rollouts train. Raises ``ValueError`` for an empty step or
    a non-finite reward.
    """
    rewards = [reward for group in groups for reward in group]
    if not groups or not rewards:
        raise ValueError(f"tttd step {step} has no rewards")
    if not all(math.isfinite(reward) for reward in rewards):
        raise ValueError(f"tttd step {step} has a non-finite reward: {rewards}")
    varied = tuple(index for index, group in enumerate(groups) if not is_constant(group))
    kept = varied or (0,)
    mean = math.fsum(rewards) / len(rewards)
    std = math.sqrt(math.fsum((reward - mean) ** 2 for reward in rewards) / len(rewards))
    metrics = {
        "step": step,
        "grid_groups": len(groups),
        "grid_rollouts": len(rewards),
        "reward_min": min(rewards),
        "reward_max": max(rewards),
        "reward_mean": mean,
        "reward_std": std,
        "reward_zero_fraction": sum(reward == 0 for reward in rewards) / len(rewards),
        "constant_groups": len(groups) - len(varied),
        "constant_groups_removed": len(groups) - len(kept),
        "training_groups": len(kept),
        "training_rollouts": sum(len(groups[index]) for index in kept),
    }
    return StepSelection(kept, metrics)


def step_grid(
    samples: Sequence[TrajectoryItem],
) -> tuple[int, tuple[tuple[TrajectoryItem, ...], ...]]:
    """Lay one step's samples back out as its grid: ``(step, groups of rollouts)``, in order.

    Raises ``ValueError`` when the samples span several steps or leave a hole in the grid.
    """
    coordinates = [grid_coordinates(sample) for sample in samples]
    steps = {coordinate["step"] for coordinate in coordinates}
    if len(steps) != 1:
        raise ValueError(f"a tttd batch holds exactly one step, got steps {sorted(steps)}")
    cells: dict[int, dict[int, TrajectoryItem]] = {}
    for sample, coordinate in zip(samples, coordinates, strict=True):
        cells.setdefault(coordinate["group"], {})[coordinate["rollout"]] = sample
    groups = []
    for group in range(len(cells)):
        rollouts = cells.get(group, {})
        if sorted(rollouts) != list(range(len(rollouts))) or not rollouts:
            raise ValueError(f"tttd step {next(iter(steps))} has a hole at group {group}")
        groups.append(tuple(rollouts[rollout] for rollout in range(len(rollouts))))
    return next(iter(steps)), tuple(groups)


class StepBatches(Task2Batch):
    """One complete step per batch, minus its constant-reward groups. Takes no config."""

    def __init__(self, context: PipelineContext) -> None:
        # One record set is one whole step.
        super().__init__(context, 1)

    @classmethod
    def from_config(
        cls,
        config: Mapping[str, Any],
        *,
        context: PipelineContext,
        record2record: Record2Record,
        record2task: Record2Task,
        environ: Mapping[str, str],
    ) -> Self:
        """Build the stage of one scenario; any config key is refused."""
        NoSettings.parse(config, plugin_class=cls)
        return cls(context)

    def make_batch(self, tasks: tuple[TrainDataItem, ...], batch_number: int) -> TrainingBatch:
        """The step's training groups, group-major, each trajectory tagged with its group."""
        samples = []
        for task in tasks:
            if not isinstance(task, TrajectoryItem):
                raise TypeError(f"a tttd batch holds trajectories, got {type(task).__name__}")
            samples.append(task)
        step, groups = step_grid(samples)
        selection = select_training_groups(
            step, [[trajectory_reward(sample) for sample in group] for group in groups]
        )
        log.info("tttd step statistics: %s", dict(selection.metrics))
        self.experiment_logger.log(selection.metrics, namespace="tttd")
        items = tuple(sample for index in selection.training_groups for sample in groups[index])
        return TrainingBatch(f"{self.scenario}:tttd:{step}", items)
