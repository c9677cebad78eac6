"""A problem package as one value for Ray's object store, and its copy on a worker node.

The front reads each served problem once (`bundle_problem`) and puts the bundle in the object
store; a node that runs one of its cases writes it out once (`NodeProblems.get`, under a file
lock shared by the node's worker processes) as a package folder the ordinary judging code reads:
`testdata/<k>.in` and `<k>.ans`, the checker, interactor or verifier source, and `testlib.h`.
Folders are named by the package's content digest, so a changed package is a new folder and a
node never judges with stale files. A built-in checker's instances are parsed on first use of
each case, in each worker process.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from judges.problems.checkers import CHECKERS
from judges.problems.package import Case, Problem, Suite
from judges.verdicts.fingerprints import problem_fingerprint

COMPLETE = ".complete"


@dataclass(frozen=True)
class CaseData:
    """One case's number, limits, input and answer (None when the package has none)."""

    number: int
    time_limit: float
    memory_limit: int
    input: bytes
    answer: bytes | None


@dataclass(frozen=True)
class ProblemBundle:
    """Everything a node needs to judge a problem's cases; `digest` names its content."""

    digest: str
    id: str
    kind: str
    checker: str | None
    language: str
    program_name: str | None
    program: bytes | None
    testlib: bytes | None
    cases: tuple[CaseData, ...]


def bundle_problem(problem: Problem) -> ProblemBundle:
    """Read `problem`'s package into a bundle (blocking: reads every case file)."""
    cases = tuple(_case_data(case) for case in problem.cases)
    testlib = problem.testlib / "testlib.h" if problem.testlib is not None else None
    return ProblemBundle(
        problem_fingerprint(problem),
        problem.id,
        problem.kind,
        problem.checker,
        problem.language,
        problem.program.name if problem.program else None,
        problem.program.read_bytes() if problem.program else None,
        testlib.read_bytes() if testlib is not None else None,
        cases,
    )


def _case_data(case: Case) -> CaseData:
    answer = case.answer_path
    data = case.input_path.read_bytes()
    return CaseData(
        case.number,
        case.time_limit,
        case.memory_limit,
        data,
        answer.read_bytes() if answer is not None else None,
    )


@contextlib.contextmanager
def node_lock(path: Path) -> Iterator[None]:
    """An exclusive lock shared by every process of this machine (flock on `path`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class NodeProblems:
    """The problems this worker process judged, written out under `root/problems/<digest>`."""

    def __init__(self, root: Path) -> None:
        self.root = root / "problems"
        self._lock = threading.Lock()
        self._problems: dict[str, Problem] = {}
        self._cases: dict[tuple[str, int], Case] = {}

    def known(self, digest: str) -> bool:
        """True when this process has the problem, or the node has it written out."""
        return digest in self._problems or (self.root / digest / COMPLETE).is_file()

    def get(self, digest: str, bundle: ProblemBundle | None) -> Problem:
        """The node's copy of problem `digest`, written from `bundle` if the node lacks it."""
        with self._lock:
            if digest in self._problems:
                return self._problems[digest]
        directory = self.root / digest
        if not (directory / COMPLETE).is_file():
            if bundle is None:
                raise LookupError(f"problem {digest} is not on this node and no bundle came")
            with node_lock(self.root / f".{digest}.lock"):
                if not (directory / COMPLETE).is_file():
                    _write_package(bundle, directory)
        problem = _read_package(directory)
        with self._lock:
            return self._problems.setdefault(digest, problem)

    def case(self, problem: Problem, digest: str, number: int) -> Case:
        """Case `number` of the problem, its instance parsed once for a built-in checker."""
        key = (digest, number)
        with self._lock:
            if key in self._cases:
                return self._cases[key]
        case = next((case for case in problem.cases if case.number == number), None)
        if case is None:
            raise LookupError(f"problem {problem.id} has no case {number}")
        if problem.kind == "builtin" and problem.checker is not None:
            instance = CHECKERS[problem.checker].parse(case.input_path.read_text())
            case = replace(case, instance=instance)
        with self._lock:
            return self._cases.setdefault(key, case)


def _write_package(bundle: ProblemBundle, directory: Path) -> None:
    """Write the package files, then the marker that says they are complete."""
    testdata = directory / "testdata"
    testdata.mkdir(parents=True, exist_ok=True)
    for case in bundle.cases:
        _write(testdata / f"{case.number}.in", case.input)
        if case.answer is not None:
            _write(testdata / f"{case.number}.ans", case.answer)
    if bundle.program is not None and bundle.program_name is not None:
        _write(directory / bundle.program_name, bundle.program)
    if bundle.testlib is not None:
        _write(directory / "include" / "testlib.h", bundle.testlib)
    header = {
        "id": bundle.id,
        "kind": bundle.kind,
        "checker": bundle.checker,
        "language": bundle.language,
        "program": bundle.program_name,
        "cases": [[c.number, c.time_limit, c.memory_limit] for c in bundle.cases],
    }
    _write(directory / "bundle.json", json.dumps(header).encode())
    _write(directory / COMPLETE, b"")


def _read_package(directory: Path) -> Problem:
    """The Problem of a package written by `_write_package`."""
    header = json.loads((directory / "bundle.json").read_text())
    cases = tuple(
        Case(number, directory / "testdata" / f"{number}.in", time_limit, memory_limit)
        for number, time_limit, memory_limit in header["cases"]
    )
    testlib = directory / "include"
    program = header["program"]
    return Problem(
        header["id"],
        directory,
        cases,
        header["checker"],
        Suite("package", f"node copy of problem {header['id']}", False),
        header["kind"],
        directory / program if program else None,
        testlib if (testlib / "testlib.h").is_file() else None,
        header["language"],
    )


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_bytes(data)
    temporary.chmod(0o644)
    temporary.replace(path)
