"""A problem's own programs: testlib checkers, interactors and Python verifiers.

They are problem code, not the candidate's, but they read the candidate's output, so they run in
the same sandbox as candidates with only what they need mounted read-only (the input, the
candidate's output, the answer file) and FrontierCS's checker limits (10 s CPU, 256 MiB).

**Compile cache.** A checker or interactor is compiled once, in the sandbox, with the FrontierCS
judge's flags `g++ <src> -O2 -pipe -std=gnu++17 -I <testlib include>`, and cached by the sha256
of the flags, the source and `testlib.h`: in memory for the service's life and on disk under the
state directory, so a restarted judge (warm cache) does not compile again; that copy is read
and written through no link, and only a regular file is taken for a compiled program.
`stats()` counts compiles, their seconds and cache hits (the throughput benchmark reports them).

**Verdicts** follow FrontierCS: the case message is the checker's stdout, or its stderr when
stdout is empty (testlib writes its verdict to stderr); the case is `ok` when the checker exits 0;
the ratio is read from `Ratio: <x>` in that message (see `judges.verdicts.judging.case_record`). A
message carrying `Value: <number>` also gives the case a raw `value` (a verifier's certified bound).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from judges.problems.package import Case, Problem
from judges.sandbox.outcome import ACCEPTED, INTERNAL_ERROR, NONZERO_EXIT, Limits, RunOutcome
from judges.sandbox.runner import Sandbox
from judges.verdicts.judging import (
    COMPILE_COMMAND,
    CompileLimits,
    JudgeFailure,
    SandboxFailed,
    compile_cpp,
    excerpt,
    raise_if_host_failed,
)
from judges.verdicts.nofollow import create_nofollow, is_regular, read_regular, refuse_links_below

CHECKER_LIMITS = Limits(
    cpu_seconds=10.0,
    wall_seconds=20.0,
    memory_bytes=256 << 20,
    processes=128,
    file_bytes=(1 << 20) + 1,
    tmpfs_bytes=16 << 20,
    stack_bytes=256 << 20,
)
VERIFIER_LIMITS = Limits(
    cpu_seconds=20.0,
    wall_seconds=40.0,
    memory_bytes=2 << 30,
    processes=16,
    file_bytes=(1 << 20) + 1,
    tmpfs_bytes=16 << 20,
)
MESSAGE_CAP = 1 << 20
# testlib.h alone takes several CPU seconds to compile; a problem program gets at least this.
PROGRAM_COMPILE_SECONDS = 120.0
VERIFIER_COMMAND = ("/usr/bin/env", "OPENBLAS_NUM_THREADS=1", "/usr/bin/python3", "/box/verify.py")
_VALUE = re.compile(r"Value: (-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)")


@dataclass(frozen=True)
class Checked:
    """A problem program's verdict on one output: its message, exit code and reported value."""

    message: str
    exit_code: int
    value: float | None


class ProgramCache:
    """Compiled checkers and interactors, keyed by the hash of flags, source and `testlib.h`."""

    def __init__(self, sandbox: Sandbox, store: Path, limits: CompileLimits) -> None:
        self.sandbox = sandbox
        self.store = store
        self.limits = replace(limits, cpu_seconds=max(limits.cpu_seconds, PROGRAM_COMPILE_SECONDS))
        self._lock = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._compiles = 0
        self._compile_seconds = 0.0
        self._hits = 0

    def stats(self) -> dict[str, float]:
        """Compiles so far, the seconds they took, and the times a compiled program was reused."""
        with self._lock:
            return {
                "compiles": self._compiles,
                "compileSeconds": round(self._compile_seconds, 3),
                "hits": self._hits,
            }

    def program(self, problem: Problem) -> tuple[Path | None, str]:
        """What the cases of `problem` need besides the candidate — the compiled checker or
        interactor, the verifier source, or None for a built-in checker — and where it came
        from: `none`, `source`, `memory`, `disk` (warm cache) or `compiled` (cold). Blocking;
        compiles on first use. Raises JudgeFailure when the problem's program does not compile."""
        if problem.kind == "builtin" or problem.program is None:
            return None, "none"
        if problem.kind in ("verifier", "evaluator"):
            return self._staged_source(problem.program), "source"
        assert problem.testlib is not None
        source = problem.program.read_bytes()
        header = (problem.testlib / "testlib.h").read_bytes()
        digest = hashlib.sha256()
        for part in (" ".join(COMPILE_COMMAND).encode(), source, header):
            digest.update(hashlib.sha256(part).digest())
        key = digest.hexdigest()
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            local = self.sandbox.scratch / "programs" / key / "program"
            if local.is_file():
                with self._lock:
                    self._hits += 1
                return local, "memory"
            local.parent.mkdir(parents=True, exist_ok=True)
            local.parent.chmod(0o711)
            saved = self.store / key / "program"
            refuse_links_below(self.store.parent, saved)  # the state dir's programs/, no link
            if is_regular(saved):
                _write_whole(read_regular(saved), local)
                with self._lock:
                    self._hits += 1
                return local, "disk"
            self._compile(problem, source, local, saved)
            return local, "compiled"

    def _staged_source(self, source: Path) -> Path:
        """A copy of a verifier source in the scratch directory, which the sandbox user can
        reach (the problem package may sit under a directory only the judge can read)."""
        data = source.read_bytes()
        staged = self.sandbox.scratch / "programs" / hashlib.sha256(data).hexdigest() / source.name
        with self._lock:
            if not staged.is_file():
                staged.parent.mkdir(parents=True, exist_ok=True)
                staged.parent.chmod(0o711)
                temporary = staged.with_name(f".{source.name}.tmp")
                temporary.write_bytes(data)
                temporary.chmod(0o644)
                temporary.replace(staged)
        return staged

    def _staged_include(self, include: Path | None) -> Path | None:
        """A copy of the testlib include folder's files in the scratch directory: bubblewrap
        opens bind sources as the sandbox user, who cannot reach a checkout under a private
        (mode 700) home directory, so the compiler gets this copy, as programs and cases do."""
        if include is None:
            return None
        files = sorted(p for p in include.iterdir() if p.is_file())
        digest = hashlib.sha256()
        for path in files:
            digest.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
        staged = self.sandbox.scratch / "programs" / f"include-{digest.hexdigest()[:32]}"
        with self._lock:
            if not (staged / ".complete").is_file():
                staged.mkdir(parents=True, exist_ok=True)
                staged.chmod(0o711)
                for path in files:
                    temporary = staged / f".{path.name}.tmp"
                    temporary.write_bytes(path.read_bytes())
                    temporary.chmod(0o644)
                    temporary.replace(staged / path.name)
                (staged / ".complete").write_bytes(b"")
        return staged

    def _compile(self, problem: Problem, source: bytes, local: Path, saved: Path) -> None:
        assert problem.program is not None
        started = time.monotonic()
        workdir = local.parent / "work"
        shutil.rmtree(workdir, ignore_errors=True)
        try:
            compiled = compile_cpp(
                self.sandbox,
                source.decode("utf-8", "replace"),
                workdir,
                self.limits,
                source_name=problem.program.name,
                include=self._staged_include(problem.testlib),
            )
            if compiled.binary is None:
                raise JudgeFailure(
                    f"problem {problem.id}: {problem.program.name} does not compile "
                    f"({compiled.error[:2000]}); fix the problem package"
                )
            _copy_whole(compiled.binary, local)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        saved.parent.mkdir(parents=True, exist_ok=True)
        refuse_links_below(self.store.parent, saved)
        _write_whole(local.read_bytes(), saved)
        with self._lock:
            self._compiles += 1
            self._compile_seconds += time.monotonic() - started


def run_checker(
    sandbox: Sandbox, kind: str, program: Path, case: Case, output: Path, workdir: Path
) -> Checked:
    """Run a checker (`chk in out ans`) or a Python verifier (`verify.py in out ans`) on one
    candidate output, in the sandbox. Raises JudgeFailure when the sandbox itself failed."""
    inputs, answer = case_files(case, workdir)
    binds = [
        ("ro", inputs, "/box/in.txt"),
        ("ro", output, "/box/out.txt"),
        ("ro", answer, "/box/ans.txt"),
    ]
    if kind == "verifier":
        command = [*VERIFIER_COMMAND, "/box/in.txt", "/box/out.txt", "/box/ans.txt"]
        binds.append(("ro", program, "/box/verify.py"))
        limits = VERIFIER_LIMITS
    else:
        command = ["/box/chk", "/box/in.txt", "/box/out.txt", "/box/ans.txt"]
        binds.append(("ro", program, "/box/chk"))
        limits = CHECKER_LIMITS
    stdout = workdir / f"case-{case.number}.chk.out"
    stderr = workdir / f"case-{case.number}.chk.err"
    try:
        outcome = sandbox.execute(
            command, limits=limits, stdin=None, stdout=stdout, stderr=stderr, binds=binds
        )
        raise_if_host_failed(outcome, f"case {case.number}: checker")
        if outcome.status == INTERNAL_ERROR:
            raise SandboxFailed(f"case {case.number}: checker sandbox failed: {outcome.detail}")
        message = excerpt(stdout, MESSAGE_CAP) or excerpt(stderr, MESSAGE_CAP)
        return verdict(outcome, message)
    finally:
        stdout.unlink(missing_ok=True)
        stderr.unlink(missing_ok=True)


def verdict(outcome: RunOutcome, message: str) -> Checked:
    """A checker's or interactor's result: exit code 0 is `ok`; a checker stopped by a limit or a
    signal reports -1 and says so in the message. `Value: <x>` in the message is kept."""
    if outcome.status in (ACCEPTED, NONZERO_EXIT) and outcome.exit_code is not None:
        code = outcome.exit_code
    else:
        code = -1
        message = f"{message}\n[checker {outcome.status}: {outcome.detail}]".strip()
    found = _VALUE.search(message)
    return Checked(message, code, float(found.group(1)) if found else None)


def case_files(case: Case, workdir: Path) -> tuple[Path, Path]:
    """The case's input and answer files copied into `workdir` (an empty answer when the package
    has none). The problem package may sit where only the judge can read; bubblewrap opens bind
    sources as the sandbox user, so problem programs get these copies."""
    staged = []
    for source, suffix in ((case.input_path, "in"), (case.answer_path, "ans")):
        path = workdir / f"case-{case.number}.{suffix}"
        if not path.exists():
            temporary = path.with_name(f".{path.name}.tmp")
            temporary.write_bytes(source.read_bytes() if source is not None else b"")
            temporary.chmod(0o644)
            temporary.replace(path)
        staged.append(path)
    return staged[0], staged[1]


def _write_whole(data: bytes, target: Path) -> None:
    """Write an executable so that `target` is either absent or complete (see `_copy_whole`),
    never through a link at its place or its temporary name."""
    temporary = target.with_name(f".{target.name}.tmp")
    try:
        with os.fdopen(create_nofollow(temporary, 0o755), "wb") as file:
            file.write(data)
        temporary.chmod(0o755)
        temporary.replace(target)
    except BaseException:
        with contextlib.suppress(OSError):
            if not temporary.is_symlink():
                temporary.unlink()
        raise


def _copy_whole(source: Path, target: Path) -> None:
    """Copy an executable so that `target` is either absent or complete: the caches treat an
    existing file as a finished compile, so a copy cut short (a full disk, no descriptors left)
    must never be left under that name."""
    temporary = target.with_name(f".{target.name}.tmp")
    try:
        shutil.copyfile(source, temporary)
        temporary.chmod(0o755)
        temporary.replace(target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
