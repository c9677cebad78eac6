"""`guidance-ttt reevaluate RUN --top K --suite SUITE --repeats N`: held-out re-evaluation.

A run's best candidates were selected on the suite it searched on, so their scores there are
optimistic. This command re-judges the K best distinct valid candidates (the run's ranking,
`harness.archive.best`, one per program; the seed is judged too, as the baseline) on another
suite, N times each (N = 1 is enough for a deterministic task: no spread is reported), and
writes the figures, with both suites named, to `<state>/guidance-run/reevaluation.json`;
`guidance-ttt export` copies them into runs.json's `fixed_candidate_reevaluation`, which
results/check_results.py checks.

SUITE is `generated:<seed>:<n>` (a fresh generated suite: a local judge is started for it unless
`--judge-url` names one serving it) or `public` (`--judge-url` must serve the public cases).
The judge's own suite label must be SUITE, and SUITE must not be the searched suite. For each
candidate the repeats' mean and sample standard deviation are reported, as the reference
reports its kernel task's latency (mean ± sd over repeats); a score label in microseconds keeps
the reference's field names (`scores_microseconds`, ...). The table names each candidate by
its entry id, which `guidance-ttt show` opens.
"""

from __future__ import annotations

import argparse
import re
import statistics
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from harness import results
from harness.adapters.judge.frontiercs import FrontierCSScorer
from harness.adapters.judge.suites import PUBLIC
from harness.contract import load_contract
from harness.observe.terminal import escape_terminal
from harness.results.records import REEVALUATION
from harness.settings.task_dirs import bundled_task_dir
from harness.state import LibraryEntry
from harness.storage.atomic import atomic_write_json

_GENERATED = re.compile(r"^generated:(\d+):(\d+)$")


def candidates(view: results.RunView, top: int) -> list[LibraryEntry]:
    """The `top` best distinct valid rollout candidates of the run (one per program, the seed's
    program left out: it is the baseline), in the run's one ranking (`harness.archive.best`)."""
    seed = results.seed_entry(view.archive).solution.strip()
    chosen, seen = [], {seed}
    for entry in results.ranked(view.archive):
        key = entry.solution.strip()
        if entry.timestep >= 1 and key not in seen:
            seen.add(key)
            chosen.append(entry)
    return chosen[:top]


def _figures(scores: list[float], failed: int, micro: bool) -> dict[str, Any]:
    mean = statistics.fmean(scores) if scores else None
    std = statistics.stdev(scores) if len(scores) >= 2 else None
    suffix = "_microseconds" if micro else ""
    return {
        f"scores{suffix}": scores,
        f"mean{suffix}": mean,
        f"sample_std{suffix}": std,
        "failed_repeats": failed,
        "all_correct": failed == 0,
    }


def judge_repeats(
    scorer: Any,
    entry: LibraryEntry,
    repeats: int,
    micro: bool,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """`repeats` verdicts of one candidate on the scorer's suite, summarised; `progress` gets
    one line per verdict (`repeat r/R: <score>` or the failure's status)."""
    scores, failed, messages = [], 0, []
    for repeat in range(1, repeats + 1):
        verdict = scorer(entry.solution)
        if verdict.valid and verdict.raw_score is not None:
            scores.append(float(verdict.raw_score))
            said = f"{float(verdict.raw_score):.4f}"
        else:
            failed += 1
            messages.append(f"{verdict.status}: {verdict.message}"[:200])
            said = verdict.status
        if progress is not None:
            progress(f"repeat {repeat}/{repeats}: {said}")
    return {
        "entry_id": entry.id,
        "step": entry.timestep - 1 if entry.timestep >= 1 else None,
        "search_score": entry.verifier_raw_score,
        **_figures(scores, failed, micro),
        "failures": messages,
    }


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    reevaluate = subparsers.add_parser(
        "reevaluate",
        help="re-judge a run's best candidates on another suite, N times",
        description="Re-judge the K best candidates of a run on another suite N times and write "
        "the figures (suite named) to <state>/guidance-run/reevaluation.json; `export` puts them "
        "in runs.json's fixed_candidate_reevaluation.",
    )
    reevaluate.add_argument("state_dir", type=Path, help="the run's state directory")
    reevaluate.add_argument("--top", type=int, default=3, help="candidates (default: 3)")
    reevaluate.add_argument(
        "--suite",
        required=True,
        help="generated:SEED:N (a fresh generated suite, judged by a local judge started for "
        "it) or public (the judge at --judge-url must serve the public cases); required, no "
        "default",
    )
    reevaluate.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="judgings of each candidate (default: 3; 1 for a deterministic task, no spread)",
    )
    reevaluate.add_argument(
        "--judge-url", help="a running judge that serves the suite (default: start a local one)"
    )
    reevaluate.add_argument("--task-dir", type=Path, help="the task (default: the run's task)")


def run(args: argparse.Namespace, console: Console | None = None) -> int:
    """Re-judge and write the figures; a signal stops the local judge it started, exit 128 +
    the signal (`harness.cli.termination`)."""
    from harness.cli.termination import (
        Terminated,
        exit_now,
        resume_command,
        stopping_on_signals,
    )

    try:
        with stopping_on_signals(
            "guidance-ttt reevaluate",
            resume_command("reevaluate"),
            kept="nothing is written before the re-evaluation ends",
        ):
            return _reevaluate(args, console or Console())
    except Terminated as exc:
        exit_now(int(exc.code))
        raise  # not reached


def _reevaluate(args: argparse.Namespace, console: Console) -> int:
    if args.top < 1 or args.repeats < 1:
        raise ValueError(
            f"--top {args.top} --repeats {args.repeats}: both must be ≥ 1 (--repeats 1 for a "
            "deterministic task, ≥ 2 for a spread)"
        )
    view = results.load_run(args.state_dir)
    seed = results.seed_entry(view.archive)
    task_dir = Path(args.task_dir) if args.task_dir else bundled_task_dir(seed.problem_id)
    contract = load_contract(task_dir)
    searched = results.run_suite(view)
    suite = str(args.suite)
    generated = _GENERATED.match(suite)
    if suite != PUBLIC and generated is None:
        raise ValueError(f"--suite {suite!r}: use generated:<seed>:<cases> or {PUBLIC}")
    if suite == searched:
        raise ValueError(
            f"--suite {suite} is the suite {args.state_dir} searched on; a held-out "
            "re-evaluation needs another suite (e.g. a fresh generated:<seed>:<n>)"
        )
    if suite == PUBLIC and not args.judge_url:
        raise ValueError("--suite public needs --judge-url of a judge serving the public cases")
    chosen = candidates(view, args.top)
    if not chosen:
        raise ValueError(f"{args.state_dir} has no valid candidate to re-evaluate yet")
    micro = "microsecond" in contract.raw_score_label.lower() or "µs" in contract.raw_score_label
    with ExitStack() as stack:
        url = args.judge_url
        if url is None:
            from harness.adapters.judge.process import LocalJudge

            assert generated is not None
            console.print(
                f"reevaluate: starting a local judge for {suite} (no --judge-url given)",
                markup=False,
                soft_wrap=True,
            )
            judge = stack.enter_context(
                LocalJudge(
                    Path(args.state_dir) / "guidance-run" / "reevaluation-judge",
                    "--generated-cases",
                    generated[2],
                    "--seed",
                    generated[1],
                    with_token=True,
                )
            )
            url = judge.url
        console.print(
            f"reevaluate: judging {len(chosen)} candidate(s) and the seed × {args.repeats} "
            f"on {suite} at {url}",
            markup=False,
            soft_wrap=True,
        )
        scorer = FrontierCSScorer.for_task(task_dir, url)
        serving = scorer.suite()
        if serving != suite:
            raise ValueError(f"the judge at {url} serves suite {serving}, not {suite}")
        cases = f"{generated[2]} cases" if generated is not None else "the public cases"
        items = [*chosen, seed]

        def judged(index: int, entry: LibraryEntry) -> dict[str, Any]:
            name = "the seed" if entry is seed else f"candidate {entry.id[:8]}"
            where = f"reevaluate: {index}/{len(items)} {name} on {suite} ({cases})"
            return judge_repeats(
                scorer,
                entry,
                args.repeats,
                micro,
                lambda line: console.print(f"{where}, {line}", markup=False, soft_wrap=True),
            )

        rows = [judged(i, entry) for i, entry in enumerate(chosen, 1)]
        baseline = judged(len(items), seed)
    best = rows[0]
    figures = {k: v for k, v in best.items() if k not in ("failures",)}
    record = {
        "suite": suite,
        "searched_suite": searched,
        "repeats": args.repeats,
        "top": args.top,
        "score_label": contract.raw_score_label,
        "score_direction": contract.score_direction,
        "method": "each candidate judged `repeats` times on the suite; mean and sample sd",
        **{k: v for k, v in figures.items() if k not in ("entry_id", "step", "search_score")},
        "best_entry_id": best["entry_id"],
        "candidates": rows,
        "seed": baseline,
    }
    atomic_write_json(Path(args.state_dir) / REEVALUATION, record)
    _render(record, micro, console)
    console.print(f"wrote {Path(args.state_dir) / REEVALUATION}", markup=False, soft_wrap=True)
    return 0


def _render(record: dict[str, Any], micro: bool, console: Console) -> None:
    suffix = "_microseconds" if micro else ""
    repeats = "1 repeat" if record["repeats"] == 1 else f"{record['repeats']} repeats"
    table = Table(
        title=Text(
            escape_terminal(
                f"re-evaluated on {record['suite']} (searched on {record['searched_suite']}), "
                f"{repeats}"
            )
        )
    )
    spread = record["repeats"] >= 2
    for column in ("#", "entry", "step", "searched score", "mean ± sd" if spread else "score"):
        table.add_column(column, no_wrap=True)
    table.add_column("failed", no_wrap=True)
    for name, row in [
        *((str(i + 1), r) for i, r in enumerate(record["candidates"])),
        ("seed", record["seed"]),
    ]:
        mean, std = row[f"mean{suffix}"], row[f"sample_std{suffix}"]
        shown = "--" if mean is None else f"{mean:.4f}"
        if spread and mean is not None:
            shown += f" ± {0.0 if std is None else std:.4f}"
        table.add_row(
            name,
            row["entry_id"][:8],
            "seed" if row["step"] is None else str(row["step"]),
            f"{row['search_score']:.4f}",
            shown,
            str(row["failed_repeats"]),
        )
    console.print(table)
    for row in [*record["candidates"], record["seed"]]:
        for failure in row["failures"]:
            console.print(
                Text(f"{row['entry_id'][:8]}: {escape_terminal(failure, multiline=False)}")
            )
