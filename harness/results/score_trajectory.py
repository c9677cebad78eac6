"""Scores and the trajectory of a run: pure functions of its archive, plus `trajectory.csv`.

The trajectory is the seed row and one row per step: the valid and sampled rollouts of that
step and the best raw score seen so far (entries are never pruned, so it is exact). In
`trajectory.csv` (`task,update,cumulative_best,valid_rollouts,sampled_rollouts`) update 0 is the
seed (no valid count, 0 sampled) and update u ≥ 1 is step u - 1. "Better" follows the archive's
score direction (`max` or `min`) everywhere.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.archive.best import seed_entry
from harness.library import Archive
from harness.state import LibraryEntry

TRAJECTORY_FIELDS = ("task", "update", "cumulative_best", "valid_rollouts", "sampled_rollouts")


def better(direction: str, a: float, b: float) -> bool:
    """Whether score `a` is strictly better than `b` in `direction`."""
    return a > b if direction == "max" else a < b


__all__ = [
    "TRAJECTORY_FIELDS",
    "TrajectoryRow",
    "best_step",
    "best_update",
    "better",
    "read_trajectory_csv",
    "seed_entry",
    "trajectory",
    "trajectory_csv",
]


@dataclass(frozen=True)
class TrajectoryRow:
    """One line of `trajectory.csv`."""

    task: str
    update: int
    cumulative_best: float
    valid_rollouts: int | None
    sampled_rollouts: int


def trajectory(archive: Archive, task: str, through_step: int) -> list[TrajectoryRow]:
    """The seed row and one row per step 0..`through_step`: valid and sampled rollouts of that
    step and the best raw score seen so far. Entries are never pruned, so this is exact."""
    direction = archive.config.score_direction
    best = seed_entry(archive).verifier_raw_score
    by_step: dict[int, list[LibraryEntry]] = {}
    for entry in archive.entries.values():
        if entry.timestep >= 1:
            by_step.setdefault(entry.timestep - 1, []).append(entry)
    rows = [TrajectoryRow(task, 0, float(best), None, 0)]
    for step in range(through_step + 1):
        entries = by_step.get(step, [])
        for entry in entries:
            score = entry.verifier_raw_score
            if entry.is_valid and score is not None and better(direction, score, best):
                best = score
        valid = sum(1 for e in entries if e.is_valid)
        rows.append(TrajectoryRow(task, step + 1, float(best), valid, len(entries)))
    return rows


def best_update(rows: Sequence[TrajectoryRow], direction: str) -> int:
    """The first update at which the final cumulative best was reached."""
    final = rows[-1].cumulative_best
    return next(r.update for r in rows if not better(direction, final, r.cumulative_best))


def best_step(rows: Sequence[TrajectoryRow], direction: str) -> int | None:
    """The step (0-based, as the CLI and progress count them) whose rollouts first reached the
    final cumulative best; None when no step beat the seed."""
    update = best_update(rows, direction)
    return None if update == 0 else update - 1


def trajectory_csv(rows: Iterable[TrajectoryRow]) -> str:
    """The rows as CSV text with the header (`repr` floats, an empty valid count for the seed)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(TRAJECTORY_FIELDS)
    for r in rows:
        valid = "" if r.valid_rollouts is None else r.valid_rollouts
        writer.writerow([r.task, r.update, repr(r.cumulative_best), valid, r.sampled_rollouts])
    return out.getvalue()


def read_trajectory_csv(path: Path) -> list[TrajectoryRow]:
    """Rows of a `trajectory.csv` (any tasks), in file order; a wrong header is an error."""
    with Path(path).open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if tuple(reader.fieldnames or ()) != TRAJECTORY_FIELDS:
            raise ValueError(f"{path}: header {reader.fieldnames} is not {list(TRAJECTORY_FIELDS)}")
        return [
            TrajectoryRow(
                row["task"],
                int(row["update"]),
                float(row["cumulative_best"]),
                int(row["valid_rollouts"]) if row["valid_rollouts"] else None,
                int(row["sampled_rollouts"]),
            )
            for row in reader
        ]
