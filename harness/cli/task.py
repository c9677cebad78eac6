"""`guidance-ttt task new|check|seed DIR`: a task written, checked, and its seed recorded.

A task is a directory of files (docs/adding-a-task.md). `check` validates every file and every
key the harness and Harbor read, then scores the seed program through the judge on the named
suite and compares it with the seed record; it prints one line per problem found (or one `ok`
line per check) and exits 1 when anything is wrong, naming the file and the key. `seed` scores a
program through the judge and writes `solution/seed.json`: the seed's archive entry, its root
node and the measurement with its suite.

    guidance-ttt task new DIR [--frontiercs CHECKOUT PROBLEM]   # every file, then edit
    guidance-ttt task new DIR --evaluator EVAL.py --program SEED.py   # from evaluate()
    guidance-ttt task new DIR --openevolve EXAMPLE                  # an OpenEvolve example
    guidance-ttt task check harbor/<task> [--judge-url URL] [--suite public]
    guidance-ttt task seed harbor/<task> harbor/<task>/solution/solution.cpp --summary-file S
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import sys
import tomllib
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import yaml

from harness.adapters.judge.frontiercs import FrontierCSScorer
from harness.adapters.judge.suites import suite_name
from harness.adapters.judge.token import judge_headers
from harness.cli.flags import JUDGE_URL_HELP, judge_url_of
from harness.contract import ContractError, TaskContract, load_contract
from harness.preflight.task_files import SEED_RECORD, Finding, task_findings
from harness.scorer import JudgeUnavailableError
from harness.state import LibraryEntry

SCORE_TOLERANCE = 1e-6
DEFAULT_SUITE = "public"


def check_with_judge(task: Path, contract: TaskContract, judge_url: str, suite: str) -> Finding:
    """The judge serves the task's problem on `suite` and reproduces the seed's recorded score."""
    where = f"{SEED_RECORD}: entry.verifier_raw_score"
    try:
        listing = httpx.get(
            f"{judge_url.rstrip('/')}/problems", timeout=30, headers=judge_headers()
        ).json()
    except (httpx.HTTPError, ValueError) as exc:
        return Finding(False, "judge", f"{judge_url} unreachable ({exc}); start it or --judge-url")
    problems = {str(p.get("id")): p for p in listing.get("problems", [])}
    problem = problems.get(contract.judge_problem_id)
    if problem is None:
        return Finding(
            False,
            "contract.json: judge_problem_id",
            f"{contract.judge_problem_id!r} is not served by {judge_url} "
            f"(it serves {sorted(problems)})",
        )
    device = problem.get("device")
    if isinstance(device, dict) and device.get("available") is False:
        kind = str(device.get("kind", "device")).upper()
        detail = device.get("detail", "no detail")
        return Finding(
            False,
            "judge",
            f"problem {contract.judge_problem_id} needs a {kind} and the judge at {judge_url} "
            f"has none ({detail}); serve it on a host that has one",
        )
    served = suite_name(problem.get("suite"))
    if served != suite:
        return Finding(
            False,
            "judge",
            f"serves problem {contract.judge_problem_id} on suite {served!r}, not {suite!r}: "
            f"check against that suite with --suite {served} (after `guidance-ttt task seed "
            f"{task} <program> --suite {served}` records the seed there), or start a judge "
            f"that serves {suite!r}",
        )
    seed = LibraryEntry.from_dict(json.loads((task / SEED_RECORD).read_text())["entry"])
    with FrontierCSScorer.for_task(task, judge_url, poll_interval_s=0.2) as scorer:
        try:
            verdict = scorer(seed.solution)
        except JudgeUnavailableError as exc:
            return Finding(False, "judge", str(exc))
    if not verdict.valid or verdict.raw_score is None:
        return Finding(
            False, where, f"the judge finds the seed {verdict.status}: {verdict.message}"
        )
    raw = seed.verifier_raw_score
    recorded = math.nan if raw is None else float(raw)  # a seed may score 0
    tolerance = score_tolerance(task)
    if not math.isclose(verdict.raw_score, recorded, rel_tol=tolerance, abs_tol=SCORE_TOLERANCE):
        within = f" (beyond the task's relative tolerance {tolerance:g})" if tolerance else ""
        return Finding(
            False,
            where,
            f"recorded {shown(recorded)} but the judge gives "
            f"{shown(verdict.raw_score)} on {suite!r}{within}; re-run `guidance-ttt task seed`",
        )
    return Finding(True, "judge", f"seed reproduced: {shown(verdict.raw_score)} on {suite!r}")


def shown(score: float) -> str:
    """A score for display: 6 decimals at most (`23.296825`, not `23.296825000000002`); the
    records keep the full value."""
    return repr(round(float(score), 6))


def score_tolerance(task: Path) -> float:
    """How far a re-judged seed may be from its record, relatively: task.toml's
    `[metadata] score_rel_tolerance` (a timing task's raw score is a measurement), else 0."""
    try:
        metadata = tomllib.loads((task / "task.toml").read_text()).get("metadata", {})
    except (OSError, tomllib.TOMLDecodeError):
        return 0.0
    value = metadata.get("score_rel_tolerance", 0.0) if isinstance(metadata, dict) else 0.0
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
        return 0.0
    return float(value)


def check_task(task: Path, judge_url: str | None, suite: str) -> list[Finding]:
    """Every check of a task directory, in order (`harness.preflight.task_files`, the rules the
    preflight applies too); the judge is asked only when the files pass. Without a judge a seed
    record that is not written yet passes with the command that writes it."""
    findings, harbor = task_findings(task, suite, seed_required=judge_url is not None)
    if harbor is not None and judge_url and all(f.ok for f in findings):
        findings.append(check_with_judge(task, harbor.contract, judge_url, suite))
    return findings


def write_seed(
    task: Path, program: Path, summary: str, judge_url: str, suite: str
) -> dict[str, Any]:
    """Score `program` through the judge and write `solution/seed.json` (entry, root node, the
    measurement on `suite`). Returns the record; ValueError when the program is not valid."""
    code = program.read_text()
    if not summary.strip():
        raise ValueError("the seed needs a code-free summary (--summary or --summary-file)")
    with FrontierCSScorer.for_task(task, judge_url, poll_interval_s=0.2) as scorer:
        verdict = scorer(code)
    if not verdict.valid or verdict.raw_score is None:
        raise ValueError(f"{program}: the judge finds it {verdict.status}: {verdict.message}")
    try:
        source = program.resolve().relative_to(task.resolve().parents[1]).as_posix()
    except ValueError:
        source = program.name
    command = f"guidance-ttt task seed {task.name} {source}"
    return save_seed_record(task, code, source, summary, verdict, judge_url, suite, command)


def save_seed_record(
    task: Path,
    code: str,
    source: str,
    summary: str,
    verdict: Any,
    judge: str,
    suite: str,
    command: str,
) -> dict[str, Any]:
    """Write `solution/seed.json` for a judged seed `verdict` (a valid VerificationResult)
    and return the record: the archive entry, its root node, the measurement on `suite`."""
    contract = load_contract(task)
    raw = verdict.raw_score
    entry_id, node_id = str(uuid.uuid4()), str(uuid.uuid4())
    entry = {
        "id": entry_id, "parent_id": None, "problem_id": task.name, "timestep": 0,
        "guidance": "", "execution_thinking": "", "solution": code,
        "verifier_reward": verdict.reward, "verifier_raw_score": raw,
        "verifier_status": verdict.status, "verifier_message": verdict.message,
        "summary": summary.strip(), "reusable_idea": summary.strip(), "failure_mode": None,
        "metadata": {"raw_model_summary": summary.strip(),
                     "summary_semantics": "canonical_full_candidate", "source": source},
    }  # fmt: skip
    sign = 1.0 if contract.score_direction == "max" else -1.0
    node = {
        "id": node_id, "problem_id": task.name, "timestep": 0, "entry_id": entry_id,
        "value": sign * raw, "raw_score": raw, "visits": 0, "parent_id": None, "children": [],
        "metadata": {"kind": "root", "archive_candidate": True, "verifier_status": "valid"},
    }  # fmt: skip
    artifacts = verdict.artifacts
    ratios = artifacts.get("case_ratios", [])
    label = artifacts.get("judge_suite", {}).get("label", "")
    measurement = {
        "suite": suite, "suite_description": label, "judge": judge, "score": raw,
        "cases": artifacts.get("case_count"), "valid_cases": sum(1 for r in ratios if r > 0),
        "date": datetime.date.today().isoformat(), "command": command,
    }  # fmt: skip
    path = task / SEED_RECORD
    previous = json.loads(path.read_text()).get("measured", {}) if path.is_file() else {}
    record = {"entry": entry, "node": node, "measured": {**previous, suite: measurement}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")
    return record


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "task",
        help="check, create (new) or seed a task directory",
        description=__doc__.splitlines()[0],
    )
    _add_actions(parser)


def _standalone() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="guidance-ttt task", description=__doc__.splitlines()[0])
    _add_actions(parser)
    return parser


def _add_actions(parser: argparse.ArgumentParser) -> None:
    """`task check`, `task new` and `task seed`, each with its flags."""
    sub = parser.add_subparsers(
        dest="action", required=True, metavar="{check,new,seed}", help="what to do with the task"
    )
    check = sub.add_parser("check", help="validate a task directory and its seed through the judge")
    check.add_argument("task", type=Path, help="the task directory, e.g. harbor/<task>")
    check.add_argument("--judge-url", help=JUDGE_URL_HELP)
    check.add_argument(
        "--suite",
        default=DEFAULT_SUITE,
        help="suite of the seed's measurement (default: %(default)s)",
    )
    check.add_argument(
        "--no-judge", action="store_true", help="check the files only (default: ask the judge too)"
    )
    new = sub.add_parser(
        "new",
        help="write every file of a new task (from a FrontierCS problem, or a skeleton)",
        description="Write every file a task needs into DIR: from a FrontierCS problem's "
        "config.yaml and statement with --frontiercs, else a skeleton marked TODO. Then write "
        "the seed program, record it with `task seed` and run `task check`.",
    )
    new.add_argument("task", type=Path, help="the new task's directory (anywhere)")
    new.add_argument(
        "--frontiercs",
        nargs=2,
        metavar=("CHECKOUT", "PROBLEM"),
        help="a FrontierCS checkout (or its algorithmic/problems) and the problem id "
        "(default: a skeleton)",
    )
    new.add_argument(
        "--problem-id", default="TODO", help="skeleton only: the judge problem id (default: TODO)"
    )
    new.add_argument(
        "--interactive", action="store_true", help="skeleton only: an interactive problem"
    )
    new.add_argument(
        "--evaluator",
        type=Path,
        metavar="EVAL.py",
        help="a Python file defining evaluate(program_path) -> metrics; with --program "
        "(default: none)",
    )
    new.add_argument(
        "--program", type=Path, metavar="SEED.py", help="with --evaluator: the seed program"
    )
    new.add_argument(
        "--openevolve",
        type=Path,
        metavar="EXAMPLE",
        help="an OpenEvolve example folder (initial_program.py, evaluator.py, config.yaml), "
        "read as it is (default: none)",
    )
    new.add_argument(
        "--metric",
        default="combined_score",
        help="with --evaluator/--openevolve: the metric that is the score (default: %(default)s)",
    )
    new.add_argument(
        "--direction",
        choices=("max", "min"),
        default="max",
        help="with --evaluator/--openevolve: whether a higher metric is better (default: "
        "%(default)s)",
    )
    new.add_argument(
        "--time",
        type=int,
        metavar="SECONDS",
        help="with --evaluator/--openevolve: CPU seconds per evaluation (default: 60, or "
        "OpenEvolve's evaluator.timeout per cascade stage)",
    )
    new.add_argument(
        "--score-tolerance",
        type=float,
        default=0.0,
        metavar="REL",
        help="with --evaluator/--openevolve: how far, relatively, `task check` lets a re-judged "
        "seed differ from its record, for an evaluator that samples (default: 0, exact)",
    )
    seed = sub.add_parser("seed", help="score a program through the judge and write seed.json")
    seed.add_argument("task", type=Path, help="the task directory, e.g. harbor/<task>")
    seed.add_argument("program", type=Path, help="the seed program (e.g. solution/solution.cpp)")
    seed.add_argument("--summary", default="", help="the seed's code-free summary (default: none)")
    seed.add_argument(
        "--summary-file", type=Path, help="read the summary from a file (default: --summary)"
    )
    seed.add_argument("--judge-url", help=JUDGE_URL_HELP)
    seed.add_argument(
        "--suite", default=DEFAULT_SUITE, help="the suite the judge serves (default: %(default)s)"
    )


def _new(args: argparse.Namespace, out: Callable[[str], None]) -> int:
    from harness.cli import task_new

    if args.evaluator or args.openevolve or args.program:
        return _new_from_evaluator(args, out)
    try:
        if args.frontiercs:
            checkout, problem_id = args.frontiercs
            problem = task_new.frontiercs_problem(Path(checkout), problem_id)
        else:
            problem = task_new.skeleton_problem(args.problem_id, args.interactive)
        written = task_new.write_task(args.task, problem)
    except (ValueError, OSError, yaml.YAMLError) as exc:
        print(f"guidance-ttt task new: {exc}", file=sys.stderr)
        return 2
    out(
        f"wrote {len(written)} files of task {args.task} ({problem.kind}, problem "
        f"{problem.problem_id}); next: edit instruction.md, write solution/solution.cpp, then "
        f"guidance-ttt task seed and task check (see {args.task / 'README.md'})"
    )
    return 0


def _new_from_evaluator(args: argparse.Namespace, out: Callable[[str], None]) -> int:
    """`task new DIR --evaluator EVAL.py --program SEED.py` or `--openevolve EXAMPLE`."""
    from harness.cli import task_evaluator

    try:
        if args.frontiercs:
            raise ValueError("--frontiercs writes a FrontierCS task; drop --evaluator/--openevolve")
        if args.openevolve:
            if args.evaluator or args.program:
                raise ValueError(
                    "--openevolve reads the example's own evaluator.py and "
                    "initial_program.py; drop --evaluator/--program"
                )
            spec = task_evaluator.from_openevolve(
                args.task, args.openevolve, args.metric, args.direction, args.time
            )
        elif not (args.evaluator and args.program):
            raise ValueError("--evaluator EVAL.py and --program SEED.py go together; name both")
        else:
            spec = task_evaluator.from_files(
                args.task, args.evaluator, args.program, args.metric, args.direction, args.time
            )
        spec = task_evaluator.with_tolerance(spec, args.score_tolerance)
        written = task_evaluator.write_evaluator_task(args.task, spec)
    except (ValueError, OSError, yaml.YAMLError) as exc:
        print(f"guidance-ttt task new: {exc}", file=sys.stderr)
        return 2
    out(
        f"wrote {len(written)} files of task {args.task} (problem {spec.problem_id}, metric "
        f"{spec.metric}, {spec.direction}); next: edit instruction.md, start a judge with "
        f"`guidance-ttt judge --task {args.task} --port 8081 &`, then guidance-ttt task seed "
        f"and task check (see {args.task / 'README.md'})"
    )
    return 0


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = print) -> int:
    """`guidance-ttt task ...` from its own arguments (`argv` after `task`)."""
    return run(_standalone().parse_args(argv), out)


def run(args: argparse.Namespace, out: Callable[[str], None] = print) -> int:
    """`guidance-ttt task ...`: 0 when the task passes (or the seed was written), 1 when a
    check fails or the seed is not valid, 2 for bad arguments."""
    task: Path = args.task
    if args.action == "new":
        return _new(args, out)
    if not task.is_dir():
        print(f"guidance-ttt task: {task} is not a directory", file=sys.stderr)
        return 2
    if args.action == "check":
        findings = check_task(
            task, None if args.no_judge else judge_url_of(args.judge_url), args.suite
        )
        for finding in findings:
            out(finding.line())
        return 0 if all(finding.ok for finding in findings) else 1
    summary = args.summary_file.read_text() if args.summary_file else args.summary
    program = args.program if args.program.is_file() else task / args.program
    try:
        record = write_seed(task, program, summary, judge_url_of(args.judge_url), args.suite)
    except (ValueError, OSError, ContractError, JudgeUnavailableError) as exc:
        print(f"guidance-ttt task seed: {exc}", file=sys.stderr)
        return 1
    score = shown(record["entry"]["verifier_raw_score"])
    out(f"wrote {task / SEED_RECORD}: {score} on {args.suite!r}")
    return 0
