"""The task vocabulary the harness needs, read from a Harbor task directory and validated once.

Nothing in `harness/` knows the task. Its problem text is the task's `instruction.md` (shown to
both models); everything else the prompts and the judge need is in `contract.json`; and of
`task.toml` (Harbor's file) the harness reads the judge problem id and where the solution goes.
The rules of all three are declared here as pydantic models and checked by the same code at
every entry: the run's start (`load_task`), the judge client (`FrontierCSScorer.for_task`) and the
preflight (`guidance-ttt doctor`). Each problem is reported as `<file>: <key>: <rule>, got
<value>`; unknown keys in `contract.json`, a `problem_prompt` key (the problem lives in
instruction.md only) and empty strings are refused.

What a task may declare lives in three named tables: `SOLUTION_LANGUAGES` (languages the judge
runs, with their fence tag, file extension and judge `lang`), `SCORE_DIRECTIONS` and
`VERIFIER_KINDS` (how the judge's answer gives the raw score: `frontiercs`, the judge's `score`,
100 x the mean case ratio; `value`, the mean `value` a verifier certified on every case; or
`geomean`, the geometric mean of the `value`s of the cases that carry one, every case passed). What
differs between tasks is declared there, never keyed on a task name in `harness/`; every key is
described in docs/adding-a-task.md.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from harness.validation import Section, error_lines, join, non_empty

CONTRACT_FILE = "contract.json"
INSTRUCTION_FILE = "instruction.md"
TASK_TOML = "task.toml"
#: The task text both models read by default: the task's own instruction.md and contract.json,
#: which carry the reference's facts and instructions only (docs/differences.md).
DEFAULT_TASK_TEXT = "reference"
#: Other task texts live in `variants/<name>/`: an `instruction.md` and optionally a
#: `contract.json` that may replace only the text keys of `VARIANT_KEYS`. Selected by serve.yaml's
#: `harness.task_text`; the run records the choice in its identity.
VARIANTS_DIR = "variants"
VARIANT_KEYS = ("solution_contract", "mechanism_constraint", "objective", "raw_score_label")
#: Code-fence tags that mark a C++ or a Python program in a model's answer.
CPP_LANGUAGES = ("cpp", "c++", "cxx")
PYTHON_LANGUAGES = ("python", "py")
#: Where the Harbor agent writes the best candidate unless task.toml names `solution_path`.
WORKSPACE = "/workspace"


class ContractError(ValueError):
    """A task file is missing or malformed; the message names the file, the key and the value."""


@dataclass(frozen=True)
class SolutionLanguage:
    """How the harness handles programs of one language: the code-fence tag prompts use and
    extraction looks for, the extension of a written candidate, and the `lang` the judge gets."""

    fence_tag: str
    extension: str
    judge_lang: str


_CPP = SolutionLanguage(fence_tag="cpp", extension="cpp", judge_lang="cpp")
_PYTHON = SolutionLanguage(fence_tag="python", extension="py", judge_lang="python")
#: The `solution_language` values a contract may declare (case-insensitive): only languages the
#: judge runs. FrontierCS's algorithmic problems take C++17; the local judge also runs Python 3
#: (with numpy) for packages that declare `language: python` (judges/README.md).
SOLUTION_LANGUAGES: Mapping[str, SolutionLanguage] = {
    "cpp": _CPP, "c++": _CPP, "cxx": _CPP, "python": _PYTHON, "py": _PYTHON,
}  # fmt: skip
#: `max`: a higher raw score is better; `min`: a lower one (PUCT then ranks by the negated score,
#: and the training reward is 1 / raw, see harness.adapters.judge.verdict.Scoring).
SCORE_DIRECTIONS = ("max", "min")
#: Where the raw score comes from: the judge's `score`, the mean certified per-case `value`, or
#: the geometric mean of the per-case `value`s (a timing task: every case passed, the timed ones
#: carry their latency).
VERIFIER_KINDS = ("frontiercs", "value", "geomean")


def fence_tag(solution_language: str) -> str:
    """The code-fence tag for a solution language: `cpp` for cpp/c++/cxx, else `python`."""
    return "cpp" if solution_language.strip().lower() in CPP_LANGUAGES else "python"


def _known_language(value: str) -> str:
    if value.strip().lower() not in SOLUTION_LANGUAGES:
        raise ValueError(
            f"must be a language the judge compiles, one of {', '.join(SOLUTION_LANGUAGES)}"
        )
    return value


def _verifier_kind(value: str) -> str:
    if value not in VERIFIER_KINDS:
        raise ValueError(f"must be one of {', '.join(map(repr, VERIFIER_KINDS))}")
    return value


def _score_direction(value: str) -> str:
    if value not in SCORE_DIRECTIONS:
        raise ValueError(f"must be one of {', '.join(map(repr, SCORE_DIRECTIONS))}")
    return value


Text = Annotated[str, AfterValidator(non_empty)]


class TaskContract(Section):
    """What a task tells the harness besides its problem text (`contract.json`)."""

    solution_language: Annotated[Text, AfterValidator(_known_language)]
    solution_contract: Text
    mechanism_constraint: Text
    objective: Text
    raw_score_label: Text
    score_direction: Annotated[Text, AfterValidator(_score_direction)]
    judge_problem_id: Text
    verifier: Annotated[Text, AfterValidator(_verifier_kind)] = "frontiercs"

    @model_validator(mode="before")
    @classmethod
    def _no_problem_prompt(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "problem_prompt" in data:
            raise ValueError(
                f"problem_prompt: not allowed: the problem text is the task's {INSTRUCTION_FILE}; "
                "remove the key"
            )
        return data

    @property
    def language(self) -> SolutionLanguage:
        """The entry of `SOLUTION_LANGUAGES` for this task's language."""
        return SOLUTION_LANGUAGES[self.solution_language.strip().lower()]

    @property
    def fence_tag(self) -> str:
        """The code-fence tag of this task's solutions (`cpp` or `python`)."""
        return fence_tag(self.solution_language)

    @classmethod
    def from_dict(cls, data: Any, source: str = CONTRACT_FILE) -> TaskContract:
        """Validate a parsed `contract.json`; `ContractError` names every wrong key and value."""
        if not isinstance(data, Mapping):
            raise ContractError(f"{source} must hold a JSON object, got {type(data).__name__}")
        return _validated(cls, data, source)


# ------------------------------------------------------------------------------- task.toml


def _problem_id_text(value: Any) -> Any:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


class _HarborOwned(Section):
    """A `task.toml` table Harbor owns: only the keys the harness reads are declared."""

    model_config = ConfigDict(extra="ignore")


class TaskMetadata(_HarborOwned):
    """`[metadata]`: the judge problem and the path the verifier re-scores."""

    judge_problem_id: Annotated[Text, BeforeValidator(_problem_id_text)] | None = None
    solution_path: Text | None = None

    @field_validator("solution_path")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and not PurePosixPath(value).is_absolute():
            raise ValueError("must be an absolute path inside the task container")
        return value


class Timeout(_HarborOwned):
    """`[agent]` / `[verifier]`: how long Harbor gives each."""

    timeout_sec: float | None = Field(None, gt=0)


class TaskToml(_HarborOwned):
    """The fields of a Harbor `task.toml` the harness reads or relies on."""

    schema_version: Text
    metadata: TaskMetadata = TaskMetadata()
    agent: Timeout = Timeout()
    verifier: Timeout = Timeout()


@dataclass(frozen=True)
class HarborTask:
    """A validated task directory: its contract, problem text and `task.toml` fields."""

    contract: TaskContract
    instruction: str
    toml: TaskToml

    @property
    def solution_path(self) -> str:
        """Where the best candidate is written in the task container."""
        default = f"{WORKSPACE}/solution.{self.contract.language.extension}"
        return self.toml.metadata.solution_path or default


# ------------------------------------------------------------------------------- loading


def _validated(model: type[Section], data: Mapping[str, Any], source: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ContractError(f"{source}: " + join(error_lines(exc, "", model))) from None


def load_contract(task_dir: Path) -> TaskContract:
    """Read and validate `<task_dir>/contract.json`."""
    path = Path(task_dir) / CONTRACT_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ContractError(f"{path} is missing; every task needs a contract.json") from exc
    except (OSError, ValueError) as exc:
        raise ContractError(f"{path} is not valid JSON: {exc}") from exc
    return TaskContract.from_dict(data, source=str(path))


def load_instruction(task_dir: Path) -> str:
    """Read `<task_dir>/instruction.md`, the problem statement both models see (non-empty)."""
    path = Path(task_dir) / INSTRUCTION_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ContractError(f"{path} is missing; it holds the problem statement") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ContractError(f"{path} cannot be read as UTF-8 text: {exc}") from exc
    if not text.strip():
        raise ContractError(f"{path} is empty; it must hold the problem statement")
    return text


def load_task_toml(task_dir: Path) -> TaskToml:
    """Read and validate the fields of `<task_dir>/task.toml` the harness reads."""
    path = Path(task_dir) / TASK_TOML
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ContractError(f"{path} is missing; every Harbor task needs a task.toml") from exc
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ContractError(f"{path} is not valid TOML: {exc}") from exc
    return _validated(TaskToml, data, str(path))


def load_harbor_task(task_dir: Path) -> HarborTask:
    """Validate a whole task directory, the files against each other too."""
    task = HarborTask(load_contract(task_dir), load_instruction(task_dir), load_task_toml(task_dir))
    toml_path, contract = Path(task_dir) / TASK_TOML, task.contract
    declared = task.toml.metadata.judge_problem_id
    if declared is not None and declared != contract.judge_problem_id:
        raise ContractError(
            f"{toml_path}: metadata.judge_problem_id: {declared!r} differs from "
            f"{CONTRACT_FILE} judge_problem_id {contract.judge_problem_id!r}; make them agree"
        )
    suffix = PurePosixPath(task.solution_path).suffix
    if suffix != f".{contract.language.extension}":
        raise ContractError(
            f"{toml_path}: metadata.solution_path: must end in .{contract.language.extension} "
            f"for solution_language {contract.solution_language!r}, got {task.solution_path!r}"
        )
    return task


def task_text_names(task_dir: Path) -> tuple[str, ...]:
    """The task texts a task offers: `reference` and every folder under `variants/`."""
    variants = Path(task_dir) / VARIANTS_DIR
    names = sorted(p.name for p in variants.iterdir() if p.is_dir()) if variants.is_dir() else []
    return (DEFAULT_TASK_TEXT, *names)


def load_variant(task_dir: Path, contract: TaskContract, name: str) -> tuple[TaskContract, str]:
    """The contract and problem text of task text `name`: the task's own for `reference`, else
    `variants/<name>/instruction.md` and its `contract.json`'s text keys over the task's."""
    if name == DEFAULT_TASK_TEXT:
        return contract, load_instruction(task_dir)
    folder = Path(task_dir) / VARIANTS_DIR / name
    if name not in task_text_names(task_dir):
        raise ContractError(
            f"{folder}: task_text {name!r} is not a text of this task; choose one of "
            f"{', '.join(task_text_names(task_dir))}"
        )
    overlay: Any = {}
    path = folder / CONTRACT_FILE
    if path.exists():
        try:
            overlay = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ContractError(f"{path} is not valid JSON: {exc}") from exc
        if not isinstance(overlay, Mapping):
            raise ContractError(f"{path} must hold a JSON object, got {type(overlay).__name__}")
        extra = sorted(set(overlay) - set(VARIANT_KEYS))
        if extra:
            raise ContractError(
                f"{path}: keys {extra} may not differ between task texts; a variant replaces "
                f"only {', '.join(VARIANT_KEYS)}"
            )
    merged = TaskContract.from_dict({**contract.model_dump(), **overlay}, source=str(path))
    return merged, load_instruction(folder)


def load_task(task_dir: Path, text: str = DEFAULT_TASK_TEXT) -> tuple[TaskContract, str]:
    """The contract and the problem text of a Harbor task directory for task text `text`
    (`load_variant`), after validating all of it (`load_harbor_task`)."""
    task = load_harbor_task(task_dir)
    return load_variant(task_dir, task.contract, text)
