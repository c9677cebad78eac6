"""`guidance-ttt score FILE [--task DIR]`: score one program through the configured judge.

The judge is the run's (`--judge-url`, else `$FRONTIERCS_JUDGE_URL`, else serve.yaml's
`judge_url`); the problem is the task's `judge_problem_id` (contract.json) unless
`--problem-id` says otherwise; the task's case check and the judge client's score hardening
apply exactly as in a run. Prints one row per case (ratio and whether it scored), the score,
the verdict and the suite the score was measured on.

Exit status: 0 the program was judged valid; 1 judged, but not valid (compile error, no case
scored, an inconsistent result: the verdict says which); 3 the judge could not be reached or
failed as infrastructure (no verdict: nothing was scored); 2 a bad argument.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from harness.adapters.judge.frontiercs import FrontierCSScorer
from harness.adapters.judge.suites import PUBLIC, suite_name
from harness.adapters.judge.verdict import case_verdict
from harness.cli.flags import JUDGE_URL_HELP, judge_url_of
from harness.contract import load_contract
from harness.scorer import JudgeUnavailableError
from harness.settings.run_settings import RunSettings, RunSettingsError
from harness.settings.task_dirs import task_dir_of
from harness.state import VerificationResult

EXIT_INVALID, EXIT_JUDGE_DOWN = 1, 3


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    score = subparsers.add_parser(
        "score",
        help="score one program through the configured judge",
        description="Score one program through the configured judge: per-case table, score, "
        "verdict, suite. Exit 0 valid, 1 judged not valid, 3 judge unavailable.",
    )
    add_arguments(score)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `score` subcommand's flags."""
    parser.add_argument("file", type=Path, help="the program to score (e.g. a solution.cpp)")
    parser.add_argument(
        "--task",
        type=Path,
        help="the Harbor task directory: its problem id and case check (default: the task "
        "serve.yaml selects, harbor/<training.config.task>)",
    )
    parser.add_argument("--judge-url", help=JUDGE_URL_HELP)
    parser.add_argument(
        "--problem-id", help="the judge's problem id (default: the task's contract.json)"
    )
    parser.add_argument(
        "--cases",
        action="store_true",
        help="show each case's verdict, time and the checker's or interactor's message "
        "(default: ratios only)",
    )
    parser.add_argument(
        "--attempts",
        type=int,
        default=2,
        help="tries when the judge fails as infrastructure (default: %(default)s)",
    )


def selected_task() -> Path:
    """The task directory serve.yaml selects (`training.config.task`); ValueError naming
    `--task` when serve.yaml cannot say."""
    try:
        return task_dir_of(RunSettings.load())
    except (RunSettingsError, OSError) as exc:
        raise ValueError(f"serve.yaml cannot name the task ({exc}); pass --task DIR") from None


def run(args: argparse.Namespace, console: Console | None = None) -> int:
    """Score `args.file` and print the report; returns the exit status."""
    console = console or Console()
    code = Path(args.file).read_text(encoding="utf-8", errors="replace")
    args.task = args.task or selected_task()
    contract = load_contract(args.task)
    url = judge_url_of(args.judge_url)
    problem = args.problem_id or contract.judge_problem_id
    with FrontierCSScorer.for_task(
        args.task, url, problem, attempts=max(1, args.attempts), retry_backoff_s=1.0
    ) as scorer:
        try:
            verdict = scorer(code)
            suite = _suite(verdict, scorer)
        except JudgeUnavailableError as exc:
            console.print(
                f"guidance-ttt score: the judge at {url} is unavailable, nothing was scored: {exc}",
                markup=False,
                soft_wrap=True,
            )
            return EXIT_JUDGE_DOWN
        answer = scorer.last_answer
    label = score_label(contract.raw_score_label, suite, verdict.artifacts.get("judge_suite"))
    render(verdict, suite, args.file, url, problem, label, console)
    if getattr(args, "cases", False):
        render_cases((answer or {}).get("cases") or [], console)
    return 0 if verdict.valid else EXIT_INVALID


def score_label(label: str, suite: str, judge_suite: object) -> str:
    """The task's score label, unless it names FrontierCS and the suite is not FrontierCS's:
    then `score on generated:0:10 (not comparable to FrontierCS)`, what the judge labels it.
    A judge's suite label says so (`comparableToFrontierCS`); without one, only the public
    cases are FrontierCS's."""
    comparable = (
        judge_suite.get("comparableToFrontierCS") if isinstance(judge_suite, dict) else None
    )
    if not isinstance(comparable, bool):
        comparable = suite == PUBLIC
    if "frontiercs" in label.lower() and not comparable:
        return f"score on {suite} (not comparable to FrontierCS)"
    return label


def _suite(verdict: VerificationResult, scorer: FrontierCSScorer) -> str:
    label = verdict.artifacts.get("judge_suite")
    return suite_name(label) if label is not None else scorer.suite()


def render(
    verdict: VerificationResult,
    suite: str,
    file: Path,
    url: str,
    problem: str,
    label: str,
    console: Console,
) -> None:
    """The per-case table, then score, verdict and suite."""
    ratios = verdict.artifacts.get("case_ratios") or []
    if ratios:
        table = Table(box=box.SIMPLE_HEAD)
        for column in ("case", "ratio", "scored"):
            table.add_column(column, justify="right" if column != "scored" else "left")
        for index, ratio in enumerate(ratios, start=1):
            table.add_row(str(index), f"{ratio:.6f}", "yes" if ratio > 0 else "no (0)")
        console.print(table)
    score = "--" if verdict.raw_score is None else f"{verdict.raw_score:.4f}"
    console.print(f"{file}: {label} {score} ({verdict.status})", markup=False, soft_wrap=True)
    console.print(f"verdict: {verdict.message}", markup=False, soft_wrap=True)
    for key in ("case_detail", "judge_logs", "score_check"):  # the judge's words, kept aside
        if verdict.artifacts.get(key):
            text = f"{key.replace('_', ' ')}: {verdict.artifacts[key]}"
            console.print(text, markup=False, soft_wrap=True)
    console.print(f"suite: {suite} (judge {url}, problem {problem})", markup=False, soft_wrap=True)


def render_cases(cases: list, console: Console) -> None:
    """One row per judged case: its verdict, run status, time, ratio and the checker's or
    interactor's message (a run that was not accepted: the judge's own words)."""
    table = Table(box=box.SIMPLE_HEAD, title="cases")
    for column in ("case", "verdict", "run", "time", "ratio", "message"):
        table.add_column(column, justify="right" if column in ("case", "time", "ratio") else "left")
    for index, case in enumerate(cases, start=1):
        if not isinstance(case, dict):
            continue
        wall = case.get("time")
        time_text = f"{wall / 1e6:.0f} ms" if isinstance(wall, int | float) else "--"
        ratio = case.get("scoreRatio")
        message = " ".join(str(case.get("msg", "")).split())
        table.add_row(
            str(index),
            case_verdict(case),  # a partially correct case is `partial`, not "Wrong Answer"
            str(case.get("runStatus", "")),
            time_text,
            f"{ratio:.6f}" if isinstance(ratio, int | float) else "--",
            message[:160],
        )
    console.print(table)
