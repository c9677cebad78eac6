"""The one validator of a task directory's files: what `guidance-ttt task check` prints and what
the preflight's task row (`guidance-ttt doctor`, run.sh) refuses, with the same rules.

Every file docs/adding-a-task.md calls required must exist; `task.toml` may use only the keys
this project's tasks use and must set the required ones; `contract.json`, `instruction.md` and
`task.toml` pass the run's own validation (`harness.contract.load_harbor_task`, which also
refuses a problem id or solution path the two files disagree on); `tests/score_check.py` loads
and defines `check_case`; `tests/task_facts.json` agrees with the contract; the seed record,
when written, agrees with itself and the seed program. Each problem is one `Finding` naming the
file and the key.
"""

from __future__ import annotations

import json
import math
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.adapters.judge.verdict import SCORE_CHECK_PATH, Scoring, load_case_check
from harness.contract import ContractError, HarborTask, load_harbor_task
from harness.state import LibraryEntry, LibraryNode

SEED_RECORD = Path("solution") / "seed.json"
#: Every file a task ships (docs/adding-a-task.md, "The files"); `{ext}` is the solution
#: language's extension. The seed record is required too, once the seed program is written
#: (`guidance-ttt task seed` writes it).
REQUIRED_FILES = (
    "task.toml",
    "instruction.md",
    "contract.json",
    "environment/Dockerfile",
    "environment/docker-compose.yaml",
    "tests/test.sh",
    "tests/verify.py",
    str(SCORE_CHECK_PATH),
    "tests/task_facts.json",
    "solution/solve.sh",
    "solution/solution.{ext}",
)
#: task.toml: the tables and keys this project's tasks may use (Harbor's schema 1.4 subset);
#: None means any key (free-form tables). Required keys are listed in TOML_REQUIRED.
TOML_KEYS: dict[str, set[str] | None] = {
    "": {"schema_version", "artifacts", "task", "metadata", "agent", "verifier", "environment"},
    "task": {"name", "description", "keywords"},
    "metadata": None,
    "agent": {"timeout_sec"},
    "verifier": {"timeout_sec", "env"},
    "verifier.env": None,
    "environment": {
        "cpus", "memory_mb", "storage_mb", "build_timeout_sec", "network_mode", "allowed_hosts",
        "docker_image",
    },
}  # fmt: skip
TOML_REQUIRED = ("schema_version", "task.name", "agent.timeout_sec", "verifier.timeout_sec")
#: tests/task_facts.json: its keys and where their values come from.
FACT_KEYS = (
    "judge_problem_id",
    "solution_language",
    "solution_path",
    "verifier",
    "score_direction",
)
SCORE_TOLERANCE = 1e-6


@dataclass(frozen=True)
class Finding:
    """One line of the check: `ok` or a problem naming its file and key."""

    ok: bool
    where: str
    message: str

    def line(self) -> str:
        return f"{'ok  ' if self.ok else 'FAIL'} {self.where}: {self.message}"


def _extension(task: Path) -> str:
    try:
        data = json.loads((task / "contract.json").read_text(encoding="utf-8"))
        language = str(data.get("solution_language", "cpp")).strip().lower()
    except (OSError, ValueError, AttributeError):
        language = "cpp"
    return "py" if language in ("python", "py") else "cpp"


def required_files(task: Path) -> list[str]:
    """The required files of `task`, with its solution language's extension filled in."""
    ext = _extension(task)
    return [name.format(ext=ext) for name in REQUIRED_FILES]


def check_files(task: Path) -> list[Finding]:
    """Every required file exists."""
    names = required_files(task)
    missing = [name for name in names if not (task / name).is_file()]
    found = [
        Finding(False, name, "missing (every task ships it; docs/adding-a-task.md)")
        for name in missing
    ]
    return found or [Finding(True, "files", f"all {len(names)} required files present")]


def check_task_toml(task: Path) -> list[Finding]:
    """task.toml parses, uses only known tables and keys, and sets the required ones."""
    path = task / "task.toml"
    if not path.is_file():
        return []
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        return [Finding(False, "task.toml", f"not valid TOML ({exc})")]
    found = []

    def walk(table: dict[str, Any], prefix: str) -> None:
        allowed = TOML_KEYS.get(prefix, set())
        for key, value in table.items():
            name = f"{prefix}.{key}" if prefix else key
            if allowed is not None and key not in allowed:
                known = ", ".join(sorted(allowed)) or "none"
                found.append(Finding(False, "task.toml", f"unknown key {name!r} (known: {known})"))
            elif isinstance(value, dict) and allowed is not None:
                walk(value, name)

    walk(data, "")
    for dotted in TOML_REQUIRED:
        table: Any = data
        for part in dotted.split("."):
            table = table.get(part) if isinstance(table, dict) else None
        if table is None:
            found.append(Finding(False, "task.toml", f"key {dotted!r} is required but not set"))
    return found or [Finding(True, "task.toml", "every key known, required keys set")]


def check_contract(task: Path) -> tuple[list[Finding], HarborTask | None]:
    """contract.json, instruction.md and task.toml through the run's own loader (the two files
    must agree on the problem id and the solution path)."""
    if not all((task / name).is_file() for name in ("contract.json", "task.toml")):
        return [], None
    try:
        harbor = load_harbor_task(task)
    except ContractError as exc:
        where, _, message = _relative(str(exc), task).partition(": ")
        return [Finding(False, where, message)], None
    contract = harbor.contract
    return [
        Finding(
            True,
            "contract.json",
            f"{contract.solution_language}, {contract.score_direction}, verifier "
            f"{contract.verifier}, judge problem {contract.judge_problem_id!r}",
        )
    ], harbor


def check_score_check(task: Path) -> list[Finding]:
    """tests/score_check.py loads and defines check_case (the judge client loads it so)."""
    path = task / SCORE_CHECK_PATH
    if not path.is_file():
        return []
    try:
        load_case_check(path)
    except Exception as exc:  # any error of the user's module: one line, not a traceback
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return [
            Finding(
                False,
                str(SCORE_CHECK_PATH),
                f"does not load: {type(exc).__name__}: {_relative(first, task)}; it must define "
                "check_case(case) -> str | None",
            )
        ]
    return [Finding(True, str(SCORE_CHECK_PATH), "loads; defines check_case")]


def check_facts(task: Path, harbor: HarborTask) -> list[Finding]:
    """tests/task_facts.json holds what contract.json and task.toml say (the in-container
    verifier reads it)."""
    path = task / "tests" / "task_facts.json"
    if not path.is_file():
        return []
    try:
        facts = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        return [Finding(False, "tests/task_facts.json", f"not valid JSON ({exc})")]
    contract = harbor.contract
    expected = {
        "judge_problem_id": contract.judge_problem_id,
        "solution_language": contract.solution_language,
        "solution_path": harbor.solution_path,
        "verifier": contract.verifier,
        "score_direction": contract.score_direction,
    }
    found = [
        Finding(
            False,
            f"tests/task_facts.json: {key}",
            f"{facts.get(key)!r} differs from {value!r} (contract.json / task.toml)",
        )
        for key, value in expected.items()
        if not isinstance(facts, dict) or facts.get(key) != value
    ]
    return found or [Finding(True, "tests/task_facts.json", "agrees with contract.json")]


def check_seed_record(
    task: Path, harbor: HarborTask, suite: str | None, *, required: bool = True
) -> list[Finding]:
    """seed.json holds a valid entry whose program is the task's seed program, a root node that
    agrees with it, and (when `suite` is given) a measurement on `suite` equal to the entry's
    raw score. Not written yet: one line saying how to write it (through a judge), a failure
    unless `required` is False (`task check --no-judge` checks the hand-written files)."""
    contract = harbor.contract
    path = task / SEED_RECORD
    where = str(SEED_RECORD)
    program = task / "solution" / f"solution.{contract.language.extension}"
    if not path.is_file():
        needed = "" if required else " (a run needs it)"
        return [
            Finding(
                not required,
                where,
                f"not recorded yet{needed}: start a judge that serves problem "
                f"{contract.judge_problem_id} and run `guidance-ttt task seed {task} "
                f"{program.relative_to(task)} --summary-file SUMMARY`",
            )
        ]
    try:
        data = json.loads(path.read_text())
        entry = LibraryEntry.from_dict(data["entry"])
        node = LibraryNode.from_dict(data["node"])
    except (ValueError, KeyError, TypeError) as exc:
        return [Finding(False, where, f"unreadable seed record ({type(exc).__name__}: {exc})")]
    found = []
    if program.is_file() and entry.solution != program.read_text():
        found.append(Finding(False, f"{where}: entry.solution", f"differs from {program.name}"))
    if not entry.is_valid or entry.verifier_raw_score is None:
        return [*found, Finding(False, f"{where}: entry.verifier_status", "the seed is not valid")]
    raw = float(entry.verifier_raw_score)
    scoring = Scoring(contract.score_direction, contract.verifier)
    if not math.isclose(entry.verifier_reward, scoring.reward(raw), rel_tol=1e-12):
        found.append(
            Finding(
                False,
                f"{where}: entry.verifier_reward",
                f"{entry.verifier_reward!r} is not the reward of raw score {raw!r} "
                f"({contract.score_direction})",
            )
        )
    sign = 1.0 if contract.score_direction == "max" else -1.0
    if node.entry_id != entry.id or node.raw_score != raw or node.value != sign * raw:
        found.append(Finding(False, f"{where}: node", "does not agree with the entry"))
    if suite is not None:
        measured = [m for m in data.get("measured", {}).values() if m.get("suite") == suite]
        if not measured:
            found.append(Finding(False, f"{where}: measured", f"no measurement on suite {suite!r}"))
        elif not math.isclose(measured[0].get("score", math.nan), raw, abs_tol=SCORE_TOLERANCE):
            found.append(
                Finding(
                    False,
                    f"{where}: measured",
                    f"score on {suite!r} is not the entry's raw score {raw!r}",
                )
            )
    on = f" measured on {suite!r}" if suite is not None else ""
    return found or [Finding(True, where, f"seed {raw!r}{on}")]


def task_findings(
    task: Path, suite: str | None = None, *, seed_required: bool = True, seed: bool = True
) -> tuple[list[Finding], HarborTask | None]:
    """Every file check of a task directory, in order, and the validated task (None when its
    files do not pass the run's loader). `seed_required=False` lets a seed record that is not
    written yet pass with a line saying how to write it; `seed=False` leaves the seed record
    to the caller (the preflight judges the configured seed in its judge row)."""
    findings = [*check_files(task), *check_task_toml(task)]
    contract_findings, harbor = check_contract(task)
    findings += contract_findings
    findings += check_score_check(task)
    if harbor is not None:
        findings += check_facts(task, harbor)
        if seed:
            findings += check_seed_record(task, harbor, suite, required=seed_required)
    return findings, harbor


def _relative(message: str, task: Path) -> str:
    return message.replace(str(task) + os.sep, "").replace(str(task.resolve()) + os.sep, "")
