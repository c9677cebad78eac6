"""Judging the case of an `evaluator` problem (`judges.problems.evaluator`): one sandboxed run.

The operator's evaluator and the candidate run together in one fresh sandbox, under the case's
limits (`run_limits`: the package's `time` as CPU seconds, twice that as wall time, its `memory`
for every process of the run together; the stack keeps the system's default, since a thread's
stack is reserved at that size and evaluators run programs in threads), through
`evaluator_runner.py`. Neither runs in the
judge's process. The runner prints one verdict line (the case message) and the metrics; the
evaluator's and the program's own output go to /dev/null inside the sandbox, so printing 100 MB
costs nothing. What the record says:

- `ok Value: <x>` and exit 0 — certified, ratio 1, `value` x, `metrics` the evaluator's metrics;
- `wrong answer …` (the metric is missing, NaN or infinite) or `fail …` (the evaluator raised
  or returned no metrics) — ratio 0, the reason in `msg`;
- a run stopped by a limit (an evaluator that hangs, or that takes the memory) — ratio 0, the
  judge's own `"<runStatus>: <detail>"` in `msg`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from judges.problems.evaluator import RUNNER
from judges.problems.package import Case
from judges.sandbox.outcome import ACCEPTED, INTERNAL_ERROR, NONZERO_EXIT
from judges.sandbox.runner import Sandbox
from judges.verdicts.judging import (
    STDERR_FIELD_CAP,
    Compiled,
    SandboxFailed,
    case_record,
    excerpt,
    raise_if_host_failed,
    run_limits,
)
from judges.verdicts.programs import MESSAGE_CAP, case_files, verdict

RUNNER_COMMAND = ("/usr/bin/env", "OPENBLAS_NUM_THREADS=1", "/usr/bin/python3", "/box/run.py")
#: The most metrics, and characters of their JSON, a case record keeps.
METRICS_CHARS = 8192


def judge_evaluated_case(
    sandbox: Sandbox, program: Compiled, case: Case, evaluator: Path, workdir: Path
) -> dict[str, Any]:
    """Run the evaluator on the candidate (`program`, a staged Python file) in the sandbox and
    return the case record. Raises JudgeFailure when the sandbox itself failed."""
    assert program.binary is not None
    settings, _ = case_files(case, workdir)
    runner = _staged_runner(workdir)
    stdout = workdir / f"case-{case.number}.evaluation.out"
    stderr = workdir / f"case-{case.number}.evaluation.err"
    binds = [
        ("ro", runner, "/box/run.py"),
        ("ro", settings, "/box/settings.json"),
        ("ro", evaluator, f"/box/evaluator/{evaluator.name}"),
        ("ro", program.binary, "/box/program.py"),
    ]
    command = [
        *RUNNER_COMMAND,
        "/box/settings.json",
        f"/box/evaluator/{evaluator.name}",
        "/box/program.py",
    ]
    try:
        outcome = sandbox.execute(
            command,
            limits=replace(run_limits(case), stack_bytes=0),  # a thread's stack: the default
            stdin=None,
            stdout=stdout,
            stderr=stderr,
            binds=binds,
            output_cap=MESSAGE_CAP,
        )
        raise_if_host_failed(outcome, f"case {case.number}: evaluator")
        if outcome.status == INTERNAL_ERROR:
            raise SandboxFailed(f"case {case.number}: evaluator sandbox failed: {outcome.detail}")
        if outcome.status not in (ACCEPTED, NONZERO_EXIT):
            return case_record(outcome, stderr=excerpt(stderr, STDERR_FIELD_CAP))
        text = excerpt(stdout, MESSAGE_CAP)
        if not text:
            text = (
                f"fail the evaluation ended without a verdict (exit code {outcome.exit_code}): "
                "the evaluator or the program it ran left the process"
            )
        first, _, rest = text.partition("\n")
        checked = verdict(outcome, first)
        code = checked.exit_code if text.startswith("ok ") else max(checked.exit_code, 1)
        record = case_record(outcome, checker_msg=first, checker_exit=code, output=b"")
        if code == 0 and checked.value is not None:
            record["value"] = checked.value
        metrics = _metrics(rest)
        if metrics is not None:
            record["metrics"] = metrics
        return record
    finally:
        stdout.unlink(missing_ok=True)
        stderr.unlink(missing_ok=True)


def _metrics(rest: str) -> dict[str, Any] | None:
    """The metrics line the runner printed after an `ok` verdict, when it is a JSON object of
    at most METRICS_CHARS characters."""
    line = rest.strip()
    if not line.startswith("metrics: ") or len(line) > METRICS_CHARS:
        return None
    try:
        found = json.loads(line.removeprefix("metrics: "))
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _staged_runner(workdir: Path) -> Path:
    """The runner script copied into the submission's folder, which the sandbox user can read
    (the project may sit where only the judge can)."""
    data = RUNNER.read_bytes()
    staged = workdir / f"evaluator-runner-{hashlib.sha256(data).hexdigest()[:16]}.py"
    if not staged.is_file():
        temporary = staged.with_name(f".{staged.name}.tmp")
        temporary.write_bytes(data)
        temporary.chmod(0o644)
        temporary.replace(staged)
    return staged
