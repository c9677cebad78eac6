"""The task vocabulary the harness needs, read from a Harbor task directory.

Nothing in `harness/` knows the task. Its problem text is the task's `instruction.md` (shown to
both models); everything else the prompts and the judge need is in `contract.json`. The file is
checked strictly: unknown keys, a `problem_prompt` key (the problem lives in instruction.md
only) and empty strings are errors that name the key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

CONTRACT_FILE = "contract.json"
INSTRUCTION_FILE = "instruction.md"
CPP_LANGUAGES = ("cpp", "c++", "cxx")
PYTHON_LANGUAGES = ("python", "py")


class ContractError(ValueError):
    """`contract.json` or `instruction.md` is missing or malformed; the message names the key."""


def fence_tag(solution_language: str) -> str:
    """The code-fence tag for a solution language: `cpp` for cpp/c++/cxx, else `python`."""
    return "cpp" if solution_language.strip().lower() in CPP_LANGUAGES else "python"


@dataclass(frozen=True)
class TaskContract:
    """What a task tells the harness besides its problem text (SPEC §9 `contract.json`)."""

    solution_language: str
    solution_contract: str
    mechanism_constraint: str
    objective: str
    raw_score_label: str
    score_direction: str
    judge_problem_id: str

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if not isinstance(value, str):
                raise ContractError(f"contract key {item.name!r} must be a string, got {value!r}")
            if not value.strip():
                raise ContractError(f"contract key {item.name!r} is empty; give it a value")
        if self.score_direction not in ("max", "min"):
            raise ContractError(
                f"contract key 'score_direction' must be 'max' or 'min', "
                f"got {self.score_direction!r}"
            )

    @property
    def fence_tag(self) -> str:
        """The code-fence tag of this task's solutions (`cpp` or `python`)."""
        return fence_tag(self.solution_language)

    @classmethod
    def from_dict(cls, data: Any, source: str = CONTRACT_FILE) -> TaskContract:
        """Validate a parsed `contract.json`: exactly the seven keys, every value a non-empty
        string, `score_direction` in {max, min}."""
        if not isinstance(data, dict):
            raise ContractError(f"{source} must hold a JSON object")
        if "problem_prompt" in data:
            raise ContractError(
                f"{source} must not contain 'problem_prompt': the problem text is the task's "
                f"{INSTRUCTION_FILE}; remove the key"
            )
        allowed = [item.name for item in fields(cls)]
        for key in data:
            if key not in allowed:
                raise ContractError(
                    f"{source}: unknown key {key!r} (allowed: {', '.join(allowed)})"
                )
        missing = [key for key in allowed if key not in data]
        if missing:
            raise ContractError(f"{source}: missing key {missing[0]!r}")
        return cls(**data)


def load_contract(task_dir: Path) -> TaskContract:
    """Read and validate `<task_dir>/contract.json`."""
    path = Path(task_dir) / CONTRACT_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ContractError(f"{path} is missing; every task needs a contract.json") from exc
    except ValueError as exc:
        raise ContractError(f"{path} is not valid JSON: {exc}") from exc
    return TaskContract.from_dict(data, source=str(path))


def load_instruction(task_dir: Path) -> str:
    """Read `<task_dir>/instruction.md`, the problem statement both models see (non-empty)."""
    path = Path(task_dir) / INSTRUCTION_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ContractError(f"{path} is missing; it holds the problem statement") from exc
    if not text.strip():
        raise ContractError(f"{path} is empty; it must hold the problem statement")
    return text


def load_task(task_dir: Path) -> tuple[TaskContract, str]:
    """The contract and the problem text of a Harbor task directory."""
    return load_contract(task_dir), load_instruction(task_dir)
