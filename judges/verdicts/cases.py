"""Judging one case of a submission, for every kind of problem (see `judges.problems.package`).

    builtin      run the candidate → the Python checker reads its output
    checker      run the candidate → `chk in out ans` (testlib) in the sandbox
    verifier     run the candidate → `python3 verify.py in out ans` in the sandbox
    interactive  candidate ⇄ `interactor in tout ans`, stdio joined by two pipes
    evaluator    the operator's `evaluate(program_path)` on the candidate, in the sandbox
                 (`judges.verdicts.evaluated`)

The order of decisions is FrontierCS's: a candidate run that was not accepted (time, memory,
crash, non-zero exit) fails the case with our own message (never the candidate's stderr, which
goes to the `stderr` field); otherwise the checker's or interactor's message and exit code make
the case record. Blocking; the engine calls it from worker threads.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Any

from judges.problems.checkers import get_checker
from judges.problems.package import Case, Problem
from judges.sandbox.outcome import INTERNAL_ERROR, Limits, RunOutcome
from judges.sandbox.runner import Sandbox
from judges.sandbox.session import SessionPool
from judges.verdicts.evaluated import judge_evaluated_case
from judges.verdicts.judging import (
    OUTPUT_FIELD_CAP,
    STDERR_FIELD_CAP,
    STDOUT_CAP,
    Compiled,
    SandboxFailed,
    case_record,
    excerpt,
    raise_if_host_failed,
    run_limits,
)
from judges.verdicts.programs import MESSAGE_CAP, case_files, run_checker, verdict

INTERACTOR_SCALE = 4  # FrontierCS gives the interactor 4x the candidate's CPU and memory


def judge_case(
    sandbox: Sandbox,
    program: Compiled,
    case: Case,
    problem: Problem,
    workdir: Path,
    checker: Path | None = None,
    output_field_bytes: int = OUTPUT_FIELD_CAP,
    sessions: SessionPool | None = None,
) -> dict[str, Any]:
    """Run the candidate on one case and check its output; return the case record (whose
    `output` keeps at most `output_field_bytes` of stdout).

    `checker` is what `ProgramCache.program(problem)` gave (None for a built-in checker).
    `sessions`, when given, runs the candidate in one of the submission's kept sandboxes
    (`judges.sandbox.session`) rather than a sandbox of its own; the outcome means the same.
    Raises JudgeFailure when the sandbox could not run a program at all.
    """
    assert program.binary is not None
    if problem.kind == "interactive":
        assert checker is not None
        return _interactive_case(sandbox, program, case, checker, workdir)
    if problem.kind == "evaluator":  # one run of its own: `sessions` keep the candidate alone
        assert checker is not None
        return judge_evaluated_case(sandbox, program, case, checker, workdir)
    stdout = workdir / f"case-{case.number}.out"
    stderr = workdir / f"case-{case.number}.err"
    try:
        outcome = (sessions or sandbox).execute(
            list(program.command),
            limits=run_limits(case),
            stdin=case.input_path.read_bytes(),
            stdout=stdout,
            stderr=stderr,
            binds=[("ro", program.binary, f"/box/{program.mount}")],
            output_cap=STDOUT_CAP,
        )
        raise_if_host_failed(outcome, f"case {case.number}")
        if outcome.status == INTERNAL_ERROR:
            raise SandboxFailed(f"case {case.number}: {outcome.detail}")
        if not outcome.accepted:
            return case_record(outcome, stderr=excerpt(stderr, STDERR_FIELD_CAP))
        if problem.kind == "builtin":
            assert problem.checker is not None
            output = stdout.read_bytes()
            found = get_checker(problem.checker).check(case.instance, output)
            return case_record(
                outcome,
                checker_msg=found.render(),
                checker_exit=found.outcome.exit_code,
                output=output,
                output_field_bytes=output_field_bytes,
            )
        assert checker is not None
        checked = run_checker(sandbox, problem.kind, checker, case, stdout, workdir)
        record = case_record(
            outcome,
            checker_msg=checked.message,
            checker_exit=checked.exit_code,
            output=stdout.read_bytes(),  # at most STDOUT_CAP bytes: the run was accepted
            output_field_bytes=output_field_bytes,
        )
        if checked.value is not None:
            record["value"] = checked.value
        return record
    finally:
        stdout.unlink(missing_ok=True)
        stderr.unlink(missing_ok=True)


def _interactive_case(
    sandbox: Sandbox, program: Compiled, case: Case, interactor: Path, workdir: Path
) -> dict[str, Any]:
    """Candidate and interactor run at once in two sandboxes; each one's stdout is the other's
    stdin. The interactor gets the input and answer files and 4x the candidate's limits. Their
    runners share a 32-byte file through which each learns how long the other waited for a
    CPU and whether it is ready to run, so neither is charged wall-clock time for its
    partner's wait (host load)."""
    assert program.binary is not None
    share = os.memfd_create("judge-wait-share", os.MFD_CLOEXEC)
    try:
        os.ftruncate(share, 32)
        return _run_pair(sandbox, program, case, interactor, workdir, share)
    finally:
        os.close(share)


def _run_pair(
    sandbox: Sandbox, program: Compiled, case: Case, interactor: Path, workdir: Path, share: int
) -> dict[str, Any]:
    assert program.binary is not None
    to_interactor_read, to_interactor_write = os.pipe()
    to_candidate_read, to_candidate_write = os.pipe()
    candidate_err = workdir / f"case-{case.number}.err"
    interactor_err = workdir / f"case-{case.number}.interactor.err"
    inputs, answer = case_files(case, workdir)
    limits = run_limits(case)
    interactor_limits = Limits(
        cpu_seconds=limits.cpu_seconds * INTERACTOR_SCALE,
        wall_seconds=limits.wall_seconds * INTERACTOR_SCALE,
        memory_bytes=limits.memory_bytes * INTERACTOR_SCALE,
        processes=limits.processes,
        file_bytes=limits.file_bytes,
        tmpfs_bytes=limits.tmpfs_bytes,
        stack_bytes=limits.stack_bytes * INTERACTOR_SCALE,
    )
    binds = [
        ("ro", interactor, "/box/interactor"),
        ("ro", inputs, "/box/in.txt"),
        ("ro", answer, "/box/ans.txt"),
    ]
    outcomes: dict[str, RunOutcome] = {}
    failures: list[Exception] = []  # the interactor's run raised (the judge ran out of resources)

    def run_interactor() -> None:
        try:
            outcomes["interactor"] = sandbox.execute(
                ["/box/interactor", "/box/in.txt", "/tmp/tout.txt", "/box/ans.txt"],
                limits=interactor_limits,
                stdin=to_interactor_read,
                stdout=to_candidate_write,
                stderr=interactor_err,
                binds=binds,
                share=(share, 1),
            )
        except Exception as error:
            failures.append(error)

    helper = threading.Thread(target=run_interactor, name=f"interactor-{case.number}")
    try:
        helper.start()
    except RuntimeError:
        for fd in (to_interactor_read, to_interactor_write, to_candidate_read, to_candidate_write):
            with contextlib.suppress(OSError):
                os.close(fd)
        raise
    try:
        candidate = sandbox.execute(
            list(program.command),
            limits=limits,
            stdin=to_candidate_read,
            stdout=to_interactor_write,
            stderr=candidate_err,
            binds=[("ro", program.binary, f"/box/{program.mount}")],
            share=(share, 0),
        )
        helper.join()
        if failures:
            raise failures[0]
        other = outcomes.get("interactor")
        raise_if_host_failed(candidate, f"case {case.number}")
        if candidate.status == INTERNAL_ERROR or other is None:
            raise SandboxFailed(f"case {case.number}: {candidate.detail}")
        raise_if_host_failed(other, f"case {case.number}: interactor")
        if other.status == INTERNAL_ERROR:
            raise SandboxFailed(f"case {case.number}: interactor sandbox failed: {other.detail}")
        if not candidate.accepted:
            return case_record(candidate, stderr=excerpt(candidate_err, STDERR_FIELD_CAP))
        checked = verdict(other, excerpt(interactor_err, MESSAGE_CAP))
        record = case_record(
            candidate, checker_msg=checked.message, checker_exit=checked.exit_code, output=b""
        )
        record["memory"] = max(candidate.memory_bytes, other.memory_bytes)
        record["stderr"] = excerpt(candidate_err, STDERR_FIELD_CAP)
        if checked.value is not None:
            record["value"] = checked.value
        return record
    finally:
        helper.join()
        candidate_err.unlink(missing_ok=True)
        interactor_err.unlink(missing_ok=True)
