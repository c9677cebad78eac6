"""Preflight of the Harbor task and its seed: the task row, and the seed the judge row scores.

`check_task` validates the task directory exactly as the run does at its start
(`harness.contract`) and that its seed record holds a program. `seed_scorer` binds the run's own
`FrontierCSScorer` to that seed, so the judge row exercises the client the run uses; the verdict
carries the seed record's own measured score and suite for the judge row to report.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from harness.adapters.judge.frontiercs import FrontierCSScorer
from harness.adapters.judge.suites import seed_suite
from harness.contract import ContractError, load_harbor_task
from harness.preflight.report import CheckResult, missing_check, ready_check
from harness.preflight.task_files import task_findings
from harness.state import VerificationResult

#: The seed record the judge row scores, relative to the task directory.
DEFAULT_SEED = Path("solution/seed.json")
#: How often the judge row asks for the seed's result (as `guidance-ttt task check` does): a
#: verdict the judge's cache answers is final at once, and the run's 2 s poll would hold every
#: launch that long for it.
SEED_POLL_S = 0.2


def check_task(task_dir: Path, seed_file: Path | None = None) -> CheckResult:
    """The Harbor task directory is valid by the rules `guidance-ttt task check` applies (one
    validator, `harness.preflight.task_files`: every required file, task.toml's keys, the run's
    own loader of contract.json, instruction.md and task.toml, score_check.py, task_facts.json),
    and the seed the judge row scores (`seed_file`, default `solution/seed.json`) holds a
    program."""
    try:  # the run's own loader first: the row then says what the run's start would say
        load_harbor_task(task_dir)
    except ContractError as exc:
        return missing_check("task", str(exc), "fix the named file (see docs/task.md for each key)")
    findings, harbor = task_findings(task_dir, seed=False)
    failed = [finding for finding in findings if not finding.ok]
    if failed or harbor is None:
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        first = failed[0].line().removeprefix("FAIL ") if failed else "the task does not load"
        return missing_check(
            "task",
            f"{task_dir}: {first}{more}",
            f"fix the named file (guidance-ttt task check {task_dir} lists every problem; "
            "docs/adding-a-task.md)",
        )
    contract, seed = harbor.contract, seed_file or task_dir / DEFAULT_SEED
    try:
        seed_program(seed)
    except (OSError, ValueError) as exc:
        return missing_check(
            "task",
            f"no seed program: {exc}",
            f"record the seed: guidance-ttt task seed {task_dir} solution/solution."
            f"{contract.language.extension} --summary-file SUMMARY",
        )
    return ready_check(
        "task",
        f"{task_dir}: {contract.solution_language}, score {contract.score_direction}, "
        f"judge problem {contract.judge_problem_id!r}",
    )


def seed_program(path: Path) -> str:
    """The program of a seed: the `entry.solution` of a seed record (`.json`), else the file."""
    text = path.read_text()
    if path.suffix != ".json":
        return text
    try:
        return str(json.loads(text)["entry"]["solution"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path} is not a seed record with an entry.solution ({exc})") from None


def seed_scorer(
    task_dir: Path, judge_url: str, *, problem_id: str | None = None, seed_file: Path | None = None
) -> Callable[[], VerificationResult]:
    """A `score_seed` callable for a Harbor task directory: the seed program judged by the run's
    own `FrontierCSScorer`, one attempt. `seed_file` is a seed record (`.json`: its entry's
    program is judged) or a program file; `solution/seed.json` unless given. The task directory
    is validated first, as the run does (a broken task is a `ContractError`, so the judge row is
    not ready); the problem id comes from `contract.json` unless given."""

    def score() -> VerificationResult:
        contract = load_harbor_task(task_dir).contract
        pid = contract.judge_problem_id if problem_id is None else problem_id
        record = Path(seed_file or task_dir / DEFAULT_SEED)
        code = seed_program(record)
        with FrontierCSScorer.for_task(
            task_dir, judge_url, pid, attempts=1, poll_interval_s=SEED_POLL_S
        ) as scorer:
            verdict = scorer(code)
        if record.suffix == ".json":  # a seed record: its measured score names its suite
            try:
                score = json.loads(record.read_text())["entry"]["verifier_raw_score"]
                recorded = {"suite": seed_suite(record), "score": score}
            except (KeyError, TypeError, ValueError):
                recorded = {"suite": None, "score": None}
            verdict = replace(verdict, artifacts={**verdict.artifacts, "seed_file": recorded})
        return verdict

    return score
