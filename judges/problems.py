"""Problem packages in the FrontierCS layout, loaded and validated once at startup.

Layout (as in a FrontierCS checkout's `algorithmic/problems`):

    <problems>/<id>/config.yaml   time: 2s, memory: 256m, subtasks: [{score: 100, n_cases: 70}]
    <problems>/<id>/testdata/<i>.in  (i = 1..total n_cases, numbered across subtasks)

`time` accepts `2s`, `1500ms` or a number of seconds; `memory` accepts `256m`, `1g`, `512k` or a
number of bytes (binary units, like the FrontierCS orchestrator). A subtask may override `time`
and `memory`; a top-level `n_cases` is accepted when there are no subtasks. Like FrontierCS,
numbered testdata pairs (`<k>.in` with `<k>.ans`) beyond the configured count are judged too.

Only problems whose checker this judge implements are served: problem id `0`, or any package whose
config says `judge_checker: polyomino`. Others are skipped with a logged reason.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from judges.checkers import CHECKERS

log = logging.getLogger("judges.problems")

_DEFAULT_CHECKER_BY_ID = {"0": "polyomino"}
_TIME = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s)?\s*$", re.IGNORECASE)
_MEMORY = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmg]?)b?\s*$", re.IGNORECASE)


class ProblemError(ValueError):
    """A problem package is malformed; the message names the file, the key and the fix."""


class UnsupportedProblem(ProblemError):
    """A well-formed package whose checker this judge does not implement."""


@dataclass(frozen=True)
class Case:
    """One test: its input file, the parsed instance and the limits the candidate runs under."""

    number: int
    input_path: Path
    time_limit: float  # CPU seconds
    memory_limit: int  # bytes of address space
    instance: Any = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class Suite:
    """Where a problem's cases come from; generated suites are not comparable to FrontierCS."""

    kind: str  # "generated" or "package"
    label: str
    comparable_to_frontiercs: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "label": self.label,
            "comparableToFrontierCS": self.comparable_to_frontiercs,
        }


@dataclass(frozen=True)
class Problem:
    """A servable problem: id, directory, cases in order, checker name and suite label."""

    id: str
    directory: Path
    cases: tuple[Case, ...]
    checker: str
    suite: Suite

    def listing(self) -> dict[str, Any]:
        """The `/problems` entry: FrontierCS's `id` plus our case count and suite label."""
        return {"id": self.id, "cases": len(self.cases), "suite": self.suite.to_json()}


def parse_time_limit(value: Any, where: str) -> float:
    """Seconds from `2s`, `1500ms` or a bare number of seconds; ProblemError otherwise."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    match = _TIME.match(str(value))
    if not match or float(match.group(1)) <= 0:
        raise ProblemError(
            f"{where}: time {value!r} is not a positive duration like '2s' or '1500ms'"
        )
    seconds = float(match.group(1))
    return seconds / 1000 if (match.group(2) or "s").lower() == "ms" else seconds


def parse_memory_limit(value: Any, where: str) -> int:
    """Bytes from `256m`, `1g`, `512k` (binary units) or a bare number of bytes."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    match = _MEMORY.match(str(value))
    if not match or float(match.group(1)) <= 0:
        raise ProblemError(f"{where}: memory {value!r} is not a positive size like '256m' or '1g'")
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[match.group(2).lower()]
    return round(float(match.group(1)) * scale)


def load_problem(directory: Path, suite: Suite | None = None) -> Problem:
    """Load one package; raise ProblemError naming what is missing or malformed.

    The checker is `judge_checker` from config.yaml, else the built-in default for the id.
    Every input file is parsed once with the checker's instance parser.
    """
    config_path = directory / "config.yaml"
    if not config_path.is_file():
        raise ProblemError(f"{config_path}: missing; a FrontierCS problem needs config.yaml")
    try:
        config = yaml.safe_load(config_path.read_text()) or {}
    except yaml.YAMLError as error:
        raise ProblemError(f"{config_path}: not valid YAML ({error})") from None
    if not isinstance(config, dict):
        raise ProblemError(f"{config_path}: expected a mapping at the top level")
    problem_id = directory.name
    checker = config.get("judge_checker") or _DEFAULT_CHECKER_BY_ID.get(problem_id)
    if checker not in CHECKERS:
        raise UnsupportedProblem(
            f"{config_path}: no built-in checker for problem {problem_id!r} "
            f"(set judge_checker to one of {sorted(CHECKERS)})"
        )
    if config.get("type", "default") != "default":
        raise ProblemError(
            f"{config_path}: type {config.get('type')!r} is not supported (only default)"
        )
    parse = CHECKERS[checker].parse
    cases = []
    for case in _cases(directory, config, str(config_path)):
        try:
            cases.append(replace(case, instance=parse(case.input_path.read_text())))
        except ValueError as error:
            raise ProblemError(f"{case.input_path}: {error}") from None
    marker = directory / "generated.txt"
    if suite is None and marker.is_file():
        stamp = marker.read_text().strip()
        suite = Suite(
            "generated", f"generated Polyomino suite ({stamp}); not comparable to FrontierCS", False
        )
    suite = suite or Suite("package", f"cases of the problem package {directory}", True)
    return Problem(problem_id, directory, tuple(cases), checker, suite)


def _cases(directory: Path, config: dict[str, Any], where: str) -> tuple[Case, ...]:
    time_default = config.get("time_limit", config.get("time", "1s"))
    memory_default = config.get("memory_limit", config.get("memory", "256m"))
    subtasks = config.get("subtasks")
    if subtasks is None and "n_cases" in config:
        subtasks = [{"n_cases": config["n_cases"]}]
    if not isinstance(subtasks, list) or not subtasks:
        raise ProblemError(
            f"{where}: needs `subtasks: [{{score: 100, n_cases: N}}]` or `n_cases: N`"
        )
    testdata = directory / "testdata"
    cases: list[Case] = []
    for index, subtask in enumerate(subtasks):
        count = subtask.get("n_cases") if isinstance(subtask, dict) else None
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ProblemError(
                f"{where}: subtasks[{index}].n_cases must be a positive integer, got {count!r}"
            )
        time = parse_time_limit(subtask.get("time_limit", subtask.get("time", time_default)), where)
        memory = parse_memory_limit(
            subtask.get("memory_limit", subtask.get("memory", memory_default)), where
        )
        for _ in range(count):
            number = len(cases) + 1
            path = testdata / f"{number}.in"
            if not path.is_file():
                raise ProblemError(f"{path}: missing; config declares {number} or more cases")
            cases.append(Case(number, path, time, memory))
    declared = {case.number for case in cases}
    extras = sorted(
        int(path.stem)
        for path in testdata.glob("*.in")
        if path.stem.isdigit()
        and int(path.stem) not in declared
        and (path.with_suffix(".ans").exists() or path.with_suffix(".out").exists())
    )
    last = cases[-1]
    cases.extend(Case(k, testdata / f"{k}.in", last.time_limit, last.memory_limit) for k in extras)
    return tuple(cases)


def load_problems(root: Path) -> dict[str, Problem]:
    """Load every servable package under `root`; log and skip the others.

    Raises ProblemError when `root` is not a directory or nothing under it can be served.
    """
    if not root.is_dir():
        raise ProblemError(f"problems directory {root} does not exist")
    problems: dict[str, Problem] = {}
    unsupported = 0
    for directory in sorted(path for path in root.iterdir() if path.is_dir()):
        if not (directory / "config.yaml").is_file():
            continue
        try:
            problems[directory.name] = load_problem(directory)
        except UnsupportedProblem as error:
            unsupported += 1
            log.debug("skipping problem %s: %s", directory.name, error)
        except ProblemError as error:
            log.warning("skipping problem %s: %s", directory.name, error)
    if unsupported:
        log.info("skipped %d problems without a built-in checker under %s", unsupported, root)
    if not problems:
        raise ProblemError(
            f"no servable problem under {root}: expected <id>/config.yaml with a built-in checker "
            "(problem 0, or judge_checker: polyomino)"
        )
    return problems
