"""Where a Harbor task directory is, found from the installed package, not the current directory.

A run names its task by `task` (`task_dir_of`): a directory name under `harbor/`, or a path to a
task anywhere (absolute, or relative to the repository root).

An installed wheel carries the task directories as package data, `harness/harbor_tasks/<task>`
(pyproject.toml's `force-include`); an editable install or a checkout has them at
`<checkout>/harbor/<task>`. `bundled_task_dir` looks in both, so commands such as
`guidance-ttt doctor` work from any directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from harness.settings.paths import REPO_ROOT, TASK_ROOTS


def bundled_task_dir(task: str) -> Path:
    """The directory of the task named `task` (a directory name under `harbor/`). Raises
    `FileNotFoundError` naming the places looked in."""
    for root in TASK_ROOTS:
        candidate = root / task
        if (candidate / "task.toml").is_file() or (candidate / "contract.json").is_file():
            return candidate
    looked = ", ".join(str(root / task) for root in TASK_ROOTS)
    raise FileNotFoundError(
        f"no task directory {task!r} in the installed package (looked in {looked}); "
        "pass --task-dir, or set training.config.task in serve.yaml to an installed task"
    )


class _NamesATask(Protocol):
    task: str


def task_dir_of(settings: _NamesATask, base: Path | None = None) -> Path:
    """The task directory a run's settings name: ``task`` as an absolute path, a relative path
    (with a ``/``: from ``base``, the repository root), or a directory name under ``harbor/``
    (the checkout's, else the installed package's)."""
    task = Path(settings.task).expanduser()
    if task.is_absolute():
        return task
    if len(task.parts) > 1:
        return ((base or REPO_ROOT) / task).resolve()
    return bundled_task_dir(settings.task)
