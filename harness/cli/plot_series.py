"""The per-step series `guidance-ttt plot` draws (`harness.cli.plots`), from a run's state directory
or from a `trajectory.csv`, and the reference run's published best so far.

Steps are 0-based, as `status`, `inspect` and the progress display count them: update u of a
`trajectory.csv` (update 0 is the seed) is step u - 1. A state directory gives every rollout's
score, the malformed-guidance count, the tokens and the cost of each committed step; a
`trajectory.csv` gives only the best so far and the valid counts, so the other fields are None.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import results
from harness.adapters.judge.suites import PUBLIC
from harness.observe.cost import PriceTable
from harness.state import (
    ENVIRONMENT_ERROR,
    EXECUTION_ERROR,
    GUIDANCE_FORMAT_ERROR,
    INVALID,
    PARSE_ERROR,
)


@dataclass(frozen=True)
class StepSeries:
    """One step of a run as the plot shows it. From a `trajectory.csv` only `best_so_far`,
    `valid` and `sampled` are known; the other fields are None there."""

    step: int
    best_so_far: float
    valid: int | None
    sampled: int
    scores: tuple[float, ...] | None = None  # the valid rollouts' raw scores
    invalid: int | None = None
    format_errors: int | None = None
    executor_tokens: int | None = None
    guidance_tokens: int | None = None
    cost_usd: float | None = None  # None when unknown (a model without a price)
    #: Rollouts that produced no score, by failure kind (`FAILURE_KINDS`); None from a csv.
    failures: tuple[tuple[str, int], ...] | None = None


#: The failure kinds the health figure shows, and the rollout statuses each one counts.
FAILURE_KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("format", (GUIDANCE_FORMAT_ERROR,)),
    ("parse", (PARSE_ERROR,)),
    ("execution", (EXECUTION_ERROR, ENVIRONMENT_ERROR)),
    ("invalid", (INVALID,)),
)


def failure_counts(statuses: Sequence[str]) -> tuple[tuple[str, int], ...]:
    """How many of `statuses` fall in each failure kind, in `FAILURE_KINDS` order."""
    return tuple(
        (kind, sum(1 for status in statuses if status in members))
        for kind, members in FAILURE_KINDS
    )


@dataclass(frozen=True)
class Series:
    """What one plot is made of: the seed, the steps, the score direction and the labels."""

    task: str
    seed: float
    direction: str
    steps: tuple[StepSeries, ...]
    unpriced: tuple[str, ...] = ()
    note: str = ""  # e.g. `frozen run, suite public`: shown under the title
    suite: str | None = None  # the judge's suite the scores come from (None: not recorded)


def from_trajectory(
    rows: Sequence[results.TrajectoryRow], direction: str = "max", note: str = ""
) -> Series:
    """The series of a `trajectory.csv`'s rows of one task (update u is step u - 1)."""
    rows = sorted(rows, key=lambda r: r.update)
    if not rows or rows[0].update != 0:
        raise ValueError("a trajectory needs its seed row (update 0)")
    steps = tuple(
        StepSeries(r.update - 1, r.cumulative_best, r.valid_rollouts, r.sampled_rollouts)
        for r in rows[1:]
    )
    return Series(rows[0].task, rows[0].cumulative_best, direction, steps, note=note)


def from_run(view: results.RunView, task: str, prices: PriceTable | None = None) -> Series:
    """The series of a run's committed steps, from its archive (every rollout is kept there)."""
    rows = results.trajectory(view.archive, task, view.committed_step)
    by_step: dict[int, list[Any]] = {}
    for entry in view.archive.entries.values():
        if entry.timestep >= 1:
            by_step.setdefault(entry.timestep - 1, []).append(entry)
    usage = results.run_usage(view, in_flight=False)
    guide_model, executor_model = results.models(view)
    unpriced: set[str] = set()
    steps = []
    for row in rows[1:]:
        step = row.update - 1
        entries = by_step.get(step, [])
        scores = tuple(
            float(e.verifier_raw_score)
            for e in entries
            if e.is_valid and e.verifier_raw_score is not None
        )
        used = usage.get(step)
        cost = None
        if used is not None and prices is not None:
            estimate = prices.estimate(used.by_model(guide_model, executor_model))
            unpriced.update(estimate.unpriced)
            cost = None if estimate.unpriced else estimate.usd
        steps.append(
            StepSeries(
                step,
                row.cumulative_best,
                row.valid_rollouts,
                row.sampled_rollouts,
                scores,
                len(entries) - len(scores),
                sum(1 for e in entries if e.verifier_status == GUIDANCE_FORMAT_ERROR),
                used.executor.total_tokens if used else 0,
                used.guidance.total_tokens if used else 0,
                cost,
                failure_counts([e.verifier_status for e in entries]),
            )
        )
    return Series(
        task,
        rows[0].cumulative_best,
        view.direction,
        tuple(steps),
        tuple(sorted(unpriced)),
        results.run_note(view),
        results.run_suite(view),
    )


@dataclass(frozen=True)
class Reference:
    """A published run's best-so-far per step, drawn for comparison."""

    label: str
    steps: tuple[int, ...]
    best_so_far: tuple[float, ...]


def check_comparable(series: Series) -> None:
    """The reference run was judged on FrontierCS's public cases; a run scored on another suite
    is not on the same scale (docs/frozen.md, "One suite per comparison"). Raises `ValueError`
    naming both."""
    if series.suite is not None and series.suite != PUBLIC:
        raise ValueError(
            f"this run's scores come from suite {series.suite}, the reference run's from the "
            f"{PUBLIC} cases: they are not comparable; plot without --reference, or run on a "
            f"judge that serves the {PUBLIC} cases"
        )


def reference_run(directory: Path, task: str) -> Reference:
    """The reference run of `task` (its `task` or `task_id` in `runs.json`) from `directory`
    (`results/reference/`): its trajectory and a label naming the models and the grid."""
    if not (Path(directory) / "runs.json").is_file():
        raise ValueError(
            f"no published reference runs at {directory} (runs.json + trajectory.csv, as in the "
            "repository's results/reference/); name the folder with --reference-dir"
        )
    document = results.read_runs_json(Path(directory) / "runs.json")
    runs = [r for r in document if task in (r.get("task"), r.get("task_id"))]
    if not runs:
        names = sorted(str(r.get("task")) for r in document)
        raise ValueError(f"{directory} has no reference run of task {task!r} (it has {names})")
    run = runs[0]
    rows = [
        r
        for r in results.read_trajectory_csv(Path(directory) / "trajectory.csv")
        if r.task == run["task"] and r.update >= 1
    ]
    search = run.get("search", {})
    grid = f"{search.get('groups_per_update')}×{search.get('rollouts_per_group')}"
    model = str(run.get("models", {}).get("guidance", "?")).split("/")[-1]
    return Reference(
        f"reference run (published, {PUBLIC} cases): {model}, {grid}",
        tuple(r.update - 1 for r in rows),
        tuple(r.cumulative_best for r in rows),
    )
