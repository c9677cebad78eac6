"""Judging steps for one submission: compile, run one case and check it, aggregate the cases.

`compile_cpp` and `judge_case` are blocking adapters over the sandbox (the engine runs them in
worker threads); `case_record` and `aggregate` are pure and build the FrontierCS result record:

    {"status": "done", "passed", "result", "score", "scoreUnbounded", "cases": [...]}

with score = 100 x mean(scoreRatio), summed in case order as the FrontierCS orchestrator does.
Each case carries FrontierCS's fields — `ok`, `status` ("Correct" when the ratio is exactly 1,
else "Wrong Answer"), `time` (wall ns), `memory` (bytes), `msg`, `output` (checked runs only),
`scoreRatio`, `scoreRatioUnbounded` — plus ours: `runStatus` (go-judge style: Accepted, Time
Limit Exceeded, …), `cpuTime` (ns), `waitTime` (ns the run was ready but waited for a CPU:
host load, not counted against its wall-clock limit), `checkerExitCode`, `stderr`, and for
checked runs `outputBytes`, `outputSha256`, `outputTruncated`: `output` is only the first 4 KiB
of stdout.

Where this judge deliberately differs from FrontierCS (docs/design.md §11):
- `msg` of a run that was not accepted is our own text, `"<runStatus>: <detail>"`; the
  candidate's stderr goes to the separate `stderr` field. A program can therefore never put
  `Ratio: …` where a checker verdict is read, and its ratio is 0 (defect 1 closed).
- `ok` and `status` keep FrontierCS's meaning: on problem 0 a valid case is a testlib
  partial-points verdict (exit code 7), so `ok` is false and `status` "Wrong Answer" unless the
  ratio is exactly 1 (defect 4 reproduced, so clients written for FrontierCS read us alike).
"""

from __future__ import annotations

import errno
import hashlib
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judges.problems.package import Case
from judges.sandbox.outcome import (
    ACCEPTED,
    INTERNAL_ERROR,
    JUDGE_MEMORY,
    NONZERO_EXIT,
    STARVED,
    Limits,
    RunOutcome,
)
from judges.sandbox.runner import Sandbox

COMPILE_COMMAND = ["g++", "main.cpp", "-O2", "-pipe", "-std=gnu++17", "-o", "a"]
STDOUT_CAP = 128 * 1024 * 1024  # FrontierCS collects at most 128 MiB of stdout
# Bytes of stdout kept in the stored `output` field: the rest is summarised by its size and
# sha256. A record's size is then bounded whatever the program prints (a control byte becomes
# a six-character JSON escape), so results stay quick to store, serve and parse.
OUTPUT_FIELD_CAP = 4096
STDERR_FIELD_CAP = 4096
COMPILE_LOG_CAP = 64 * 1024
RUN_PROCESSES = 128
RUN_TMPFS = 64 * 1024 * 1024
_RATIO = re.compile(r"Ratio: ([\d.]+)")
_RATIO_UNBOUNDED = re.compile(r"RatioUnbounded: ([\d.]+)")


class JudgeFailure(RuntimeError):
    """The judge itself failed (sandbox could not start, I/O error): not the candidate's fault."""


class PassingFailure(JudgeFailure):
    """A failure of the judge's that may pass: no verdict is given, nothing is cached, and the
    engine judges the submission again later (see `judges.service.engine`)."""


class HostOverloaded(PassingFailure):
    """A run was kept from its CPU by host load until its real-time backstop."""


class JudgeOutOfMemory(PassingFailure):
    """The kernel killed a run's process below the run's memory bound: the judge's cgroup or
    the host ran out of memory (a compile killed so is not the candidate's compile error)."""


class SandboxFailed(PassingFailure):
    """The sandbox itself could not start or run a program (bubblewrap, its cgroup)."""


def raise_if_host_failed(outcome: RunOutcome, where: str) -> None:
    """Raise the passing failure naming `where` when the host, not the program, ended the run:
    HostOverloaded when it was starved of CPU (STARVED), JudgeOutOfMemory when the kernel
    killed it below its memory bound for the judge's or the host's lack of memory."""
    if outcome.status == STARVED:
        raise HostOverloaded(f"{where}: {outcome.detail}")
    if outcome.status == JUDGE_MEMORY:
        raise JudgeOutOfMemory(f"{where}: {outcome.detail}")


@dataclass(frozen=True)
class CompileLimits:
    """Limits of the compiler run: CPU seconds, address-space bytes, processes, file bytes."""

    cpu_seconds: float = 10.0
    memory_bytes: int = 1 << 30
    processes: int = 50
    file_bytes: int = 64 * 1024 * 1024


@dataclass(frozen=True)
class Compiled:
    """A prepared candidate: on success the file to mount at `/box/<mount>` and the command that
    runs it; else the FrontierCS-style error text."""

    binary: Path | None
    error: str
    command: tuple[str, ...] = ("/box/a",)
    mount: str = "a"


PYTHON_COMMAND = ("/usr/bin/env", "OPENBLAS_NUM_THREADS=1", "/usr/bin/python3", "/box/main.py")


def prepare_candidate(
    sandbox: Sandbox, source: str, language: str, workdir: Path, limits: CompileLimits
) -> Compiled:
    """Compile a C++ candidate, or stage a Python one (run by the system `python3`, with numpy,
    under the same limits; a syntax error is the run's failure, as in FrontierCS's `py`)."""
    if language != "python":
        return compile_cpp(sandbox, source, workdir, limits)
    staged = workdir / "build"
    staged.mkdir(parents=True)
    (staged / "main.py").write_text(source)
    return Compiled(staged / "main.py", "", PYTHON_COMMAND, "main.py")


def compile_cpp(
    sandbox: Sandbox,
    source: str,
    workdir: Path,
    limits: CompileLimits,
    *,
    source_name: str = "main.cpp",
    include: Path | None = None,
) -> Compiled:
    """Compile `source` with `g++ <source_name> -O2 -pipe -std=gnu++17` inside the sandbox.

    `include` (a directory, mounted read-only at /include) adds `-I /include`: how checkers and
    interactors find `testlib.h`. `workdir` must not exist yet. Returns the binary, or `error` =
    "compile failed: …" with the compiler's messages (or the limit that was hit). Raises
    JudgeFailure if the sandbox itself failed.
    """
    build = workdir / "build"
    build.mkdir(parents=True)
    build.chmod(0o700)
    (build / source_name).write_text(source)
    sandbox.own(build)
    log_path = workdir / "compile.log"
    command = [COMPILE_COMMAND[0], source_name, *COMPILE_COMMAND[2:]]
    binds = [("rw", build, "/box")]
    if include is not None:
        command[-2:-2] = ["-I", "/include"]
        binds.append(("ro", include, "/include"))
    outcome = sandbox.execute(
        command,
        limits=Limits(
            cpu_seconds=limits.cpu_seconds,
            wall_seconds=2 * limits.cpu_seconds,
            memory_bytes=limits.memory_bytes,
            processes=limits.processes,
            file_bytes=limits.file_bytes,
            tmpfs_bytes=256 * 1024 * 1024,
        ),
        stdin=None,
        stdout=workdir / "compile.out",
        stderr=log_path,
        binds=binds,
        workdir="/box",
    )
    raise_if_host_failed(outcome, "compile")
    if outcome.status == INTERNAL_ERROR:
        raise SandboxFailed(f"compile sandbox failed: {outcome.detail}")
    binary = build / "a"
    messages = excerpt(log_path, COMPILE_LOG_CAP)
    if outcome.accepted and binary.is_file():
        return Compiled(binary, "")
    raise_if_disk_full(build, limits.file_bytes)
    if outcome.status in (ACCEPTED, NONZERO_EXIT) and messages:
        return Compiled(None, f"compile failed: {messages}")
    reason = f"{outcome.status} ({outcome.detail})"
    return Compiled(None, f"compile failed: {reason}" + (f"\n{messages}" if messages else ""))


def raise_if_disk_full(build: Path, needed: int) -> None:
    """Raise OSError(ENOSPC) when a compile failed where the judge's own disk lacks room: the
    work folder's file system has less free than a compile may write (`needed`), once a
    partial output is removed. The compiler's words do not tell (a linker that hits a full
    disk may only say `ld returned 1 exit status`), and a compiler that filled the sandbox's
    private /tmp is the candidate's compile error: the judge's disk has room then. The engine
    judges the submission again later; no compile error is recorded, or cached, for it."""
    (build / "a").unlink(missing_ok=True)
    stats = os.statvfs(build)
    free = stats.f_bavail * stats.f_frsize
    if free < needed:
        raise OSError(
            errno.ENOSPC,
            f"No space left on device: a compile failed where the judge's scratch folder has "
            f"{free} bytes free, less than the {needed} a compile may write",
        )


def run_limits(case: Case) -> Limits:
    """The candidate's limits on one case (FrontierCS: CPU = the time limit, wall twice that,
    address space and stack = the memory limit, 128 processes, 128 MiB of stdout)."""
    return Limits(
        cpu_seconds=case.time_limit,
        wall_seconds=2 * case.time_limit,
        memory_bytes=case.memory_limit,
        processes=RUN_PROCESSES,
        file_bytes=STDOUT_CAP + 1,
        tmpfs_bytes=RUN_TMPFS,
        stack_bytes=case.memory_limit,
    )


def case_record(
    outcome: RunOutcome,
    *,
    checker_msg: str | None = None,
    checker_exit: int | None = None,
    output: bytes | None = None,
    stderr: str = "",
    output_field_bytes: int = OUTPUT_FIELD_CAP,
) -> dict[str, Any]:
    """The stored case record for a run outcome and, when the run was accepted, its verdict."""
    record: dict[str, Any] = {
        "ok": checker_exit == 0,
        "status": "",
        "time": outcome.wall_ns,
        "memory": outcome.memory_bytes,
    }
    if checker_msg is None:
        record["msg"] = f"{outcome.status}: {outcome.detail}"
        ratio = 0.0
        unbounded = 0.0
    else:
        record["msg"] = checker_msg
        record.update(output_summary(output or b"", output_field_bytes))
        bounded = _RATIO.search(checker_msg)
        ratio = float(bounded.group(1)) if bounded else (1.0 if record["ok"] else 0.0)
        free = _RATIO_UNBOUNDED.search(checker_msg)
        unbounded = float(free.group(1)) if free else ratio
    record["scoreRatio"] = ratio
    record["scoreRatioUnbounded"] = unbounded
    record["status"] = "Correct" if ratio == 1.0 else "Wrong Answer"
    record["runStatus"] = outcome.status
    record["cpuTime"] = outcome.cpu_ns
    record["waitTime"] = outcome.wait_ns
    if checker_exit is not None:
        record["checkerExitCode"] = checker_exit
    else:
        record["stderr"] = stderr
    return record


def output_summary(output: bytes, keep: int = OUTPUT_FIELD_CAP) -> dict[str, Any]:
    """What a program's stdout contributes to a stored record: its first `keep` bytes (as
    text, invalid UTF-8 replaced), its size, sha256 and whether the prefix is all of it."""
    return {
        "output": output[:keep].decode("utf-8", "replace"),
        "outputBytes": len(output),
        "outputSha256": hashlib.sha256(output).hexdigest(),
        "outputTruncated": len(output) > keep,
    }


def aggregate(cases: list[dict[str, Any]], suite: dict[str, Any]) -> dict[str, Any]:
    """The final `done` record: FrontierCS's score arithmetic plus our `suite` label, and the
    mean `value` when every case reported one (`Value: <x>` in its checker message)."""
    total = 0.0
    total_unbounded = 0.0
    for case in cases:  # summed in case order, like the orchestrator
        total += case["scoreRatio"]
        total_unbounded += case["scoreRatioUnbounded"]
    count = len(cases)
    passed = all(case["scoreRatio"] == 1.0 for case in cases)
    record = {
        "status": "done",
        "passed": passed,
        "result": "Correct Answer" if passed else "Wrong Answer",
        "score": (total / count) * 100 if count else 0,
        "scoreUnbounded": (total_unbounded / count) * 100 if count else 0,
        "cases": cases,
        "suite": suite,
    }
    values = [case.get("value") for case in cases]
    if count and all(isinstance(value, float) for value in values):
        record["value"] = math.fsum(values) / count  # ours: the mean raw value (a verifier's)
    return record


def error_record(message: str, kind: str) -> dict[str, Any]:
    """A final `error` record; `kind` is "compile" (the candidate's) or "judge" (ours)."""
    return {"status": "error", "error": f"Error: {message}", "errorKind": kind}


def excerpt(path: Path, limit: int) -> str:
    """The first `limit` bytes of a file as text, marked when cut; empty when it is missing."""
    try:
        with open(path, "rb") as file:
            data = file.read(limit + 1)
    except FileNotFoundError:
        return ""
    text = data[:limit].decode("utf-8", "replace").strip()
    return text + "\n[... truncated]" if len(data) > limit else text
