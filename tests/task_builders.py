"""Builds Harbor task directories for tests: a valid one, which a test then damages on purpose."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: A complete, valid `contract.json`.
GOOD_CONTRACT: dict[str, Any] = {
    "solution_language": "cpp",
    "solution_contract": "Return one C++17 program.",
    "mechanism_constraint": "No hard-coded answers.",
    "objective": "Maximise density.",
    "raw_score_label": "Packing score",
    "score_direction": "max",
    "judge_problem_id": "0",
}
#: A `task.toml` with the fields the harness reads.
GOOD_TASK_TOML = """\
schema_version = "1.4"

[task]
name = "tests/task"

[metadata]
judge_problem_id = "0"
solution_path = "/workspace/solution.cpp"

[agent]
timeout_sec = 600.0

[verifier]
timeout_sec = 60.0
"""


def write_task(
    root: Path,
    seed: str | None = None,
    *,
    contract: dict[str, Any] | None = None,
    task_toml: str = GOOD_TASK_TOML,
    instruction: str = "Pack the pieces.",
) -> Path:
    """A task directory at `root`: contract.json, task.toml, instruction.md, and, when `seed` (a
    program) is given, the seed record `solution/seed.json` holding it."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "contract.json").write_text(json.dumps(GOOD_CONTRACT if contract is None else contract))
    (root / "task.toml").write_text(task_toml)
    (root / "instruction.md").write_text(instruction)
    if seed is not None:
        (root / "solution").mkdir(exist_ok=True)
        record = {"entry": {"solution": seed}}
        (root / "solution" / "seed.json").write_text(json.dumps(record))
    return root
