"""Problem packages in the FrontierCS layout, loaded and validated once at startup.

Layout (as in a FrontierCS checkout's `algorithmic/problems`):

    <problems>/<id>/config.yaml   time: 2s, memory: 256m, subtasks: [{score: 100, n_cases: 70}]
    <problems>/<id>/testdata/<i>.in  (i = 1..total n_cases, numbered across subtasks)

`time` accepts `2s`, `1500ms` or a number of seconds; `memory` accepts `256m`, `1g`, `512k` or a
number of bytes (binary units, like the FrontierCS orchestrator). A subtask may override `time`
and `memory`; a top-level `n_cases` is accepted when there are no subtasks. Like FrontierCS,
numbered testdata pairs (`<k>.in` with `<k>.ans`) beyond the configured count are judged too.

How a problem is checked (its `kind`):

- `builtin` — a checker written in Python in this package (`judge_checker: <name>` in config.yaml,
  or problem `0` without a checker source). A package whose `chk.cc` is byte-identical to the
  FrontierCS Polyomino checker also uses the built-in one: it is the fast path, and the test suite
  shows both give the same verdict, message and ratio on every public case for several programs.
- `checker` — `type: default` with a testlib checker (`checker:`, default `chk.cc`, the
  special-judge form included), compiled against `testlib.h` and run as `chk in out ans`;
- `interactive` — `type: interactive` with an interactor (`interactor:`, default
  `interactor.cc`), run as `interactor in tout ans` with its stdio piped to the candidate's;
- `gpu` — `type: gpu`, a Python `custom_kernel(data)` timed on a GPU against the package's
  reference module (`judges.gpu`, judges/README.md "The GPU judge");
- `verifier` — `type: verifier`, a Python verifier (`verifier:`, a file in the package) run as
  `python3 verify.py in out` after the candidate; it prints `points <ratio>` or a value line (see
  `judges.verifier`). It is how a task that is not a FrontierCS problem is served.
- `evaluator` — `type: evaluator`, an operator's Python `evaluate(program_path)` run on the
  candidate in the sandbox (`judges.problems.evaluator`): how a task made from an evaluate()
  function, an OpenEvolve example among them, is served.

Checker and interactor sources need `testlib.h`: the `testlib` directory given to
`judges.kinds.load_problems`.
A package that cannot be served is skipped with a logged reason.

**A problem folder stays inside itself** (`judges.problems.folders`): every file it names
(config.yaml, statement.txt, the cases and their answers, the checker, interactor or verifier a
key names, generated.txt) must be a regular file inside the folder once links are resolved; a
key naming an absolute or `..` path, a link out or a FIFO makes the package unservable, and so
does a statement over `STATEMENT_LIMIT` bytes. config.yaml is read with its aliases bounded
(`judges.problems.bounded_yaml`).

**Pure verdicts.** `verdict_is_pure` says whether a problem's verdict is a function of the
candidate's source alone, so that the verdict cache (`judges.verdicts.cache`) may answer a
resubmission from a stored verdict. It is true for the CPU-checked kinds above and false for any
other kind (a timed benchmark, where a re-run is the point); `verdict_is_pure: true|false` in
config.yaml overrides it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from judges.problems.checkers import CHECKERS
from judges.problems.folders import CONFIG_LIMIT, member, read_bounded, regular
from judges.problems.folders import ProblemError as ProblemError  # its home before folders
from judges.problems.folders import read_config as read_config  # loaders import it from here

log = logging.getLogger("judges.problems.package")

_DEFAULT_CHECKER_BY_ID = {"0": "polyomino"}
# sha256 of FrontierCS's Polyomino chk.cc whose verdicts the built-in checker reproduces exactly.
_BUILTIN_EQUIVALENTS = {
    "9e1a344ee3bee030fa67cb509070be627b85ed3c3fa1c64b3a64582f04e6a58a": "polyomino",
}
KINDS = ("builtin", "checker", "interactive", "verifier", "gpu", "evaluator")
# Kinds whose verdict depends only on the source (CPU-time limits, checked outputs); others,
# e.g. timed GPU benchmarks, are not cached unless their config.yaml says `verdict_is_pure: true`.
PURE_KINDS = frozenset(("builtin", "checker", "interactive", "verifier"))
_TIME = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s)?\s*$", re.IGNORECASE)
_MEMORY = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmg]?)b?\s*$", re.IGNORECASE)


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

    @property
    def answer_path(self) -> Path | None:
        """The case's answer file (`<k>.ans`, else `<k>.out`), None when the package has none."""
        for suffix in (".ans", ".out"):
            path = self.input_path.with_suffix(suffix)
            if path.is_file():
                return path
        return None


@dataclass(frozen=True)
class Suite:
    """Where a problem's cases come from; generated suites are not comparable to FrontierCS."""

    kind: str  # "generated" or "package"
    label: str
    comparable_to_frontiercs: bool

    @property
    def name(self) -> str:
        """The suite's name in run records: `generated:<seed>:<cases>` for a generated suite
        (its label carries the generator's `seed=S cases=N` stamp), `public` for FrontierCS's
        public cases (a problem package or a folder of them)."""
        if self.kind == "generated":
            found = re.search(r"seed=(\d+) cases=(\d+)", self.label)
            return f"generated:{found[1]}:{found[2]}" if found else "generated"
        return "public"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "label": self.label,
            "comparableToFrontierCS": self.comparable_to_frontiercs,
        }


@dataclass(frozen=True)
class Problem:
    """A servable problem: id, directory, cases in order, how it is checked and its suite.

    `checker` names the built-in checker (kind `builtin`); `program` is the checker, interactor
    or verifier source of the other kinds, `testlib` the directory holding `testlib.h`, and
    `language` the candidate language the problem accepts (`cpp` or `python`);
    `declared_pure` the package's `verdict_is_pure` (None when it says nothing).
    """

    id: str
    directory: Path
    cases: tuple[Case, ...]
    checker: str | None
    suite: Suite
    kind: str = "builtin"
    program: Path | None = None
    testlib: Path | None = None
    language: str = "cpp"
    declared_pure: bool | None = field(default=None, kw_only=True)

    @property
    def verdict_is_pure(self) -> bool:
        """Whether a stored verdict may answer an identical resubmission: as declared, else
        exactly for PURE_KINDS (so a kind added later, e.g. a timed one, is not cached)."""
        return self.declared_pure if self.declared_pure is not None else self.kind in PURE_KINDS

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


def load_cpu_problem(
    directory: Path,
    config: dict[str, Any],
    config_path: Path,
    suite: Suite | None = None,
    testlib: Path | None = None,
) -> Problem:
    """Build a CPU-checked problem (builtin, checker, interactive, verifier) from its config.

    `testlib` is the directory holding `testlib.h`, needed by checker and interactor sources.
    Every input file of a built-in checker's problem is parsed once with its instance parser.
    Problems of every kind are loaded through `judges.kinds.load_problem`.
    """
    problem_id = directory.name
    kind, checker, program = _checking(directory, config, str(config_path))
    needs_testlib = kind in ("checker", "interactive") and program is not None
    if needs_testlib and (testlib is None or not (testlib / "testlib.h").is_file()):
        raise UnsupportedProblem(
            f"{config_path}: {program.name} needs testlib.h; pass the directory holding it "
            "(--testlib DIR, or a FrontierCS checkout with algorithmic/judge/include)"
        )
    language = str(config.get("language", "cpp")).lower()
    if language not in ("cpp", "python"):
        raise ProblemError(f"{config_path}: language {language!r} is not cpp or python")
    cases = list(_cases(directory, config, str(config_path)))
    if kind == "builtin":
        parse = CHECKERS[checker].parse
        for index, case in enumerate(cases):
            try:
                cases[index] = replace(case, instance=parse(case.input_path.read_text()))
            except ValueError as error:
                raise ProblemError(f"{case.input_path}: {error}") from None
    marker = directory / "generated.txt"
    if suite is None and marker.is_file():
        stamp = read_bounded(directory, marker, CONFIG_LIMIT, "generated.txt").strip()
        suite = Suite(
            "generated", f"generated Polyomino suite ({stamp}); not comparable to FrontierCS", False
        )
    suite = suite or Suite("package", f"cases of the problem package {directory}", True)
    return Problem(
        problem_id,
        directory,
        tuple(cases),
        checker,
        suite,
        kind,
        program,
        testlib if kind in ("checker", "interactive") else None,
        language,
        declared_pure=declared_purity(config, str(config_path)),
    )


def declared_purity(config: dict[str, Any], where: str) -> bool | None:
    """`verdict_is_pure` of a package's config.yaml: true, false, or None when absent."""
    declared = config.get("verdict_is_pure")
    if declared is not None and not isinstance(declared, bool):
        raise ProblemError(f"{where}: verdict_is_pure {declared!r} must be true or false")
    return declared


def _checking(
    directory: Path, config: dict[str, Any], where: str
) -> tuple[str, str | None, Path | None]:
    """(kind, built-in checker name, program source) of a package, from its config."""
    problem_type = config.get("type", "default")
    if config.get("judge_checker"):
        name = config["judge_checker"]
        if name not in CHECKERS:
            raise UnsupportedProblem(
                f"{where}: judge_checker {name!r} is not built in (one of {sorted(CHECKERS)})"
            )
        return "builtin", name, None
    if problem_type == "interactive":
        source = member(directory, config.get("interactor") or "interactor.cc", "interactor", where)
        if not regular(directory, source, "interactor").is_file():
            raise ProblemError(f"{source}: missing; an interactive problem needs its interactor")
        return "interactive", None, source
    if problem_type == "verifier":
        source = member(directory, config.get("verifier") or "verify.py", "verifier", where)
        if not regular(directory, source, "verifier").is_file():
            raise ProblemError(f"{source}: missing; a verifier problem needs its verifier")
        return "verifier", None, source
    if problem_type != "default":
        raise ProblemError(
            f"{where}: type {problem_type!r} is not supported (default, interactive, verifier)"
        )
    source = member(directory, config.get("checker") or "chk.cc", "checker", where)
    if regular(directory, source, "checker").is_file():
        builtin = _BUILTIN_EQUIVALENTS.get(hashlib.sha256(source.read_bytes()).hexdigest())
        if builtin is not None:
            return "builtin", builtin, None
        return "checker", None, source
    builtin = _DEFAULT_CHECKER_BY_ID.get(directory.name)
    if builtin is None:
        raise UnsupportedProblem(
            f"{where}: checker source {source.name} is missing and there is no built-in "
            f"checker for problem {directory.name!r} (set judge_checker to one of "
            f"{sorted(CHECKERS)})"
        )
    return "builtin", builtin, None


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
            cases.append(_contained(directory, Case(number, path, time, memory)))
    declared = {case.number for case in cases}
    extras = sorted(
        int(path.stem)
        for path in testdata.glob("*.in")
        if path.stem.isdigit()
        and int(path.stem) not in declared
        and (path.with_suffix(".ans").exists() or path.with_suffix(".out").exists())
    )
    last = cases[-1]
    cases.extend(
        _contained(directory, Case(k, testdata / f"{k}.in", last.time_limit, last.memory_limit))
        for k in extras
    )
    return tuple(cases)


def _contained(directory: Path, case: Case) -> Case:
    """`case`, once its input and any answer file are regular files inside `directory`."""
    regular(directory, case.input_path, "test input")
    for suffix in (".ans", ".out"):
        answer = case.input_path.with_suffix(suffix)
        if os.path.lexists(answer):
            regular(directory, answer, "test answer")
    return case


PUBLIC_TIME_LIMIT = 2.0  # FrontierCS problem 0's limits, used for a plain folder of its cases
PUBLIC_MEMORY_LIMIT = 256 << 20


def load_public_cases(directory: Path) -> Problem:
    """A plain folder of Polyomino cases (`<k>.in`, numbered from 1) as problem 0, with
    FrontierCS problem 0's limits and the built-in checker; its suite is `public`."""
    if not directory.is_dir():
        raise ProblemError(f"public cases folder {directory} does not exist")
    numbers = sorted(int(path.stem) for path in directory.glob("*.in") if path.stem.isdigit())
    if not numbers or numbers != list(range(1, len(numbers) + 1)):
        raise ProblemError(
            f"{directory}: expected cases 1.in, 2.in, ... numbered without gaps, found "
            f"{len(numbers)} numbered .in files"
        )
    parse = CHECKERS["polyomino"].parse
    cases = []
    for number in numbers:
        path = regular(directory, directory / f"{number}.in", "test input")
        try:
            instance = parse(path.read_text())
        except ValueError as error:
            raise ProblemError(f"{path}: {error}") from None
        cases.append(Case(number, path, PUBLIC_TIME_LIMIT, PUBLIC_MEMORY_LIMIT, instance))
    suite = Suite("public", f"the {len(cases)} public Polyomino cases in {directory}", True)
    return Problem("0", directory, tuple(cases), "polyomino", suite)


def find_testlib(root: Path) -> Path | None:
    """The directory holding `testlib.h` for a problems directory: a FrontierCS checkout keeps it
    in `algorithmic/judge/include`, next to `algorithmic/problems`; a plain copy may keep it in
    `include/` beside `problems/` or in the problems directory itself. None if there is none."""
    for candidate in (root.parent / "judge" / "include", root.parent / "include", root):
        if (candidate / "testlib.h").is_file():
            return candidate
    return None


def frontiercs_problems(path: Path) -> Path:
    """The problems directory of a FrontierCS checkout (`algorithmic/problems`), of its
    `algorithmic/` folder, or `path` itself when it already is one."""
    for candidate in (path / "algorithmic" / "problems", path / "problems", path):
        if candidate.is_dir() and any(candidate.glob("*/config.yaml")):
            return candidate
    raise ProblemError(
        f"{path}: no FrontierCS problems found; pass a checkout, its algorithmic/ folder or "
        "algorithmic/problems (folders <id>/config.yaml)"
    )
