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
    """A task directory at `root`: contract.json, task.toml, instruction.md, the other files
    every task ships (`complete_files`), and, when `seed` (a program) is given, the seed record
    `solution/seed.json` holding it."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "contract.json").write_text(json.dumps(GOOD_CONTRACT if contract is None else contract))
    (root / "task.toml").write_text(task_toml)
    (root / "instruction.md").write_text(instruction)
    complete_files(root, contract or GOOD_CONTRACT, seed)
    if seed is not None:
        (root / "solution").mkdir(exist_ok=True)
        record = {"entry": {"solution": seed}}
        (root / "solution" / "seed.json").write_text(json.dumps(record))
    return root


def complete_files(root: Path, contract: dict[str, Any], seed: str | None) -> None:
    """The files every task ships besides its three described ones (docs/adding-a-task.md):
    the shipped verifier, a score check that accepts every case, task facts taken from the
    contract, the environment, the oracle and the seed program."""
    shipped = Path(__file__).resolve().parents[1] / "harbor" / "polyomino_packing"
    language = str(contract.get("solution_language", "cpp")).lower()
    ext = "py" if language in ("python", "py") else "cpp"
    files = {
        "tests/test.sh": (shipped / "tests" / "test.sh").read_text(),
        "tests/verify.py": (shipped / "tests" / "verify.py").read_text(),
        "tests/score_check.py": "def check_case(case):\n    return None\n",
        "tests/task_facts.json": json.dumps(
            {
                "judge_problem_id": contract.get("judge_problem_id"),
                "solution_language": contract.get("solution_language"),
                "solution_path": f"/workspace/solution.{ext}",
                "verifier": contract.get("verifier", "frontiercs"),
                "score_direction": contract.get("score_direction"),
            }
        ),
        "environment/Dockerfile": "FROM python:3.12-slim\n",
        "environment/docker-compose.yaml": "services: {}\n",
        "solution/solve.sh": "#!/usr/bin/env bash\n",
        f"solution/solution.{ext}": seed if seed is not None else "int main() {}\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
