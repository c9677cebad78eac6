"""Content digests of everything a verdict depends on, for the verdict cache's keys.

A verdict is a function of the candidate's source and of: the problem package (its cases, their
limits and answers, the checker, interactor or verifier source and `testlib.h`), the suite, the
judge's own code (built-in checkers, the runner, the case logic), the toolchain that compiles
and runs programs (g++, the system python3) and the judge settings that shape the record
(compile limits, the stored output prefix, the memory bound). Each digest here is a sha256 hex
string over sha256 digests of the parts, so no two different part lists give the same input.
"""

from __future__ import annotations

import functools
import hashlib
import subprocess
from pathlib import Path

from judges.problems.package import Problem

JUDGE_PACKAGE = Path(__file__).parent


def digest(*parts: bytes | str) -> str:
    """sha256 over the sha256 of each part (text is UTF-8 encoded)."""
    total = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        total.update(hashlib.sha256(data).digest())
    return total.hexdigest()


@functools.cache
def judge_code() -> str:
    """The judge's own code: every .py and .cpp file of the `judges` package, by path."""
    parts: list[bytes | str] = []
    for path in sorted(JUDGE_PACKAGE.rglob("*")):
        if path.suffix in (".py", ".cpp") and "__pycache__" not in path.parts:
            parts += [str(path.relative_to(JUDGE_PACKAGE)), path.read_bytes()]
    return digest(*parts)


@functools.cache
def toolchain() -> str:
    """The compiler's and the system python's version lines (what builds and runs candidates)."""
    lines = []
    for command in (["g++", "--version"], ["/usr/bin/python3", "--version"]):
        try:
            done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=30)
            first = (done.stdout or done.stderr or "no output").splitlines()[0]
        except (OSError, subprocess.TimeoutExpired) as error:
            first = str(error)
        lines.append(f"{command[0]}: {first}")
    return "\n".join(lines)


def problem_fingerprint(problem: Problem) -> str:
    """A problem's package as judged: kind, checker, language, its program source and
    `testlib.h`, and every case's number, limits, input and answer (not its id or folder)."""
    parts: list[bytes | str] = [
        problem.kind,
        problem.checker or "",
        problem.language,
        problem.program.name if problem.program else "",
        problem.program.read_bytes() if problem.program else b"",
        _read(problem.testlib / "testlib.h") if problem.testlib else b"",
    ]
    for case in problem.cases:
        answer = case.answer_path
        parts += [
            f"{case.number} {case.time_limit!r} {case.memory_limit}",
            case.input_path.read_bytes(),
            answer.read_bytes() if answer is not None else b"\0no answer",
        ]
    return digest(*parts)


def _read(path: Path) -> bytes:
    return path.read_bytes() if path.is_file() else b""
