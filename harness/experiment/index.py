"""The experiment directory's index, `experiment.json`: the plan and every run's state.

`write_index` rewrites it (atomically) as runs finish; `is_experiment` says whether a directory
holds one; `status_rows` reads every run's progress from its state directory for
`guidance-ttt status EXPERIMENT_DIR`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness import results
from harness.experiment.plan import Plan
from harness.storage.atomic import atomic_write_json
from harness.storage.state_files import exists, read_json_object

#: The file an experiment directory holds.
EXPERIMENT_FILE = "experiment.json"


def write_index(directory: Path, plan: Plan, status: Mapping[str, str]) -> None:
    atomic_write_json(
        directory / EXPERIMENT_FILE,
        {
            "name": plan.name,
            "plan": dict(plan.document),
            "runs": [
                {
                    "dir": run.directory,
                    "arm": run.arm.name,
                    "parent_selection": run.arm.selection,
                    "run_seed": run.arm.run_seed,
                    "status": status.get(run.directory, "planned"),
                }
                for run in plan.runs()
            ],
        },
    )


def is_experiment(directory: Path) -> bool:
    return exists(Path(directory) / EXPERIMENT_FILE)


def read_index(directory: Path) -> dict[str, Any]:
    """The index as written (a `StateFileError` naming the file when it is unreadable)."""
    return read_json_object(Path(directory) / EXPERIMENT_FILE)


def status_rows(directory: Path) -> list[dict[str, Any]]:
    """One row per run of an experiment directory: arm, seed, steps, best, state."""
    rows = []
    for entry in read_index(directory).get("runs", []):
        state = Path(directory) / str(entry["dir"])
        row = {**entry, "committed_steps": 0, "best_score": None, "seed_score": None}
        if results.find_store(state) is not None:
            view = results.load_run(state)
            trajectory = results.trajectory(view.archive, "run", view.committed_step)
            row.update(
                committed_steps=view.committed_step + 1,
                best_score=trajectory[-1].cumulative_best,
                seed_score=trajectory[0].cumulative_best,
                in_flight=len(view.in_flight),
            )
        rows.append(row)
    return rows
