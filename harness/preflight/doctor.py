"""Preflight: can this machine run a Guidance-TTT run?

Each check returns a `CheckResult` — ready or missing, one line of detail and, when missing, how
to fix it — and never raises: a check that crashes is itself reported as missing. `run.sh` runs
this module before it starts anything, and `guidance-ttt doctor` can call `run_preflight` alone.
Nothing here downloads, trains or writes: the model is only looked for (or found fetchable), the
judge scores one given seed candidate, and the executor answers one 1-token request.

This module is the entry point: `run_preflight` runs the rows in table order, and `main` is the
command line (`python -m harness.preflight`, `guidance-ttt doctor`), whose flags left out come
from `serve.yaml`. The rows live beside it: `machine` (Python, GPUs, model, git-lfs, disk),
`services` (judge, executor, guidance endpoint), `task` (the task directory and its seed) and
`report` (the table).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Console

from harness.adapters.executor.backends import BUILTIN_BACKENDS, ExecutionBackend, backend_from_name
from harness.preflight.machine import (
    DEFAULT_MIN_FREE_GB,
    DEFAULT_MODEL_ID,
    check_disk,
    check_git_lfs,
    check_gpus,
    check_model,
    check_python,
)
from harness.preflight.report import CheckResult, PreflightReport, missing_check
from harness.preflight.services import check_executor, check_guidance, check_judge
from harness.preflight.task import check_task, seed_scorer
from harness.settings.run_settings import DEFAULT_SERVE_YAML, RunSettings, RunSettingsError
from harness.settings.task_dirs import bundled_task_dir
from harness.state import VerificationResult


def run_preflight(
    *,
    state_dir: Path,
    model_dir: Path,
    judge_url: str,
    executor: ExecutionBackend,
    score_seed: Callable[[], VerificationResult] | None = None,
    min_free_gb: float = DEFAULT_MIN_FREE_GB,
    min_gpus: int = 1,
    model_id: str = DEFAULT_MODEL_ID,
    task_dir: Path | None = None,
    seed_file: Path | None = None,
    guidance_url: str | None = None,
) -> PreflightReport:
    """Run every check in table order and collect the rows; never raises for a failing check.
    `score_seed=None` checks the judge's health only; `task_dir` adds the task row.
    `guidance_url` (frozen-guidance mode: the OpenAI-compatible endpoint Reef proxies) replaces
    the GPU and model rows by a guidance row: a frozen run trains nothing and loads no weights."""
    checks: list[tuple[str, Callable[[], CheckResult]]] = [("python", check_python)]
    if guidance_url is None:
        checks += [
            ("GPUs", lambda: check_gpus(min_gpus)),
            ("model", lambda: check_model(model_dir, model_id)),
        ]
    else:
        checks.append(("guidance", lambda: check_guidance(guidance_url)))
    if task_dir is not None:
        checks.append(("task", lambda: check_task(task_dir, seed_file)))
    checks += [
        ("judge", lambda: check_judge(judge_url, score_seed)),
        ("executor", lambda: check_executor(executor)),
        ("git-lfs", check_git_lfs),
        ("disk", lambda: check_disk(state_dir, min_free_gb)),
    ]
    results = []
    for name, check in checks:
        try:
            results.append(check())
        except Exception as exc:  # a bug in one check must not hide the others
            results.append(
                missing_check(
                    name,
                    f"check crashed: {type(exc).__name__}: {exc}",
                    "a bug in the preflight: report it with this line",
                )
            )
    return PreflightReport(tuple(results))


# ----------------------------------------------------------------------------------------- CLI


def build_parser(prog: str = "python -m harness.preflight") -> argparse.ArgumentParser:
    """The preflight's flags (also `guidance-ttt doctor`'s). Flags left out take their values
    from `serve.yaml` (`--config`), so the command works from any directory; every help text
    names its default."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Check that this machine can run Guidance-TTT; exit 1 naming what is missing.",
    )
    parser.add_argument(
        "--config",
        type=Path,
        default=DEFAULT_SERVE_YAML,
        help="serve.yaml whose settings give the defaults below (default: the project's)",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        help="the run's state directory (default: serve.yaml's training.config.state_dir)",
    )
    parser.add_argument(
        "--model-dir",
        type=Path,
        help="where the guidance model is (default: work/model beside serve.yaml, where "
        "run.sh fetches it)",
    )
    parser.add_argument(
        "--model-id",
        default=os.environ.get("MODEL_ID", DEFAULT_MODEL_ID),
        help="the guidance model (default: $MODEL_ID, else %(default)s)",
    )
    parser.add_argument(
        "--judge-url", help="the judge (default: serve.yaml's, set by $FRONTIERCS_JUDGE_URL)"
    )
    parser.add_argument(
        "--task-dir",
        type=Path,
        help="the Harbor task (default: serve.yaml's task, from the installed package)",
    )
    parser.add_argument(
        "--problem-id", help="judge problem id (default: serve.yaml's, else contract.json)"
    )
    parser.add_argument(
        "--seed-file",
        type=Path,
        help="seed record (.json) or program to judge (default: serve.yaml's seed in the task)",
    )
    parser.add_argument(
        "--skip-judge-score",
        action="store_true",
        help="check the judge's /health only (default: also score the seed)",
    )
    parser.add_argument(
        "--executor",
        choices=list(BUILTIN_BACKENDS),
        help="executor backend (default: serve.yaml's, set by $GUIDANCE_TTT_EXECUTOR)",
    )
    parser.add_argument(
        "--executor-url",
        default=os.environ.get("GUIDANCE_TTT_EXECUTOR_URL"),
        help="executor base URL (default: $GUIDANCE_TTT_EXECUTOR_URL, else the backend's)",
    )
    parser.add_argument(
        "--reasoning-effort",
        help="gpt_oss_120b reasoning effort (default: serve.yaml's, "
        "set by $GUIDANCE_TTT_REASONING_EFFORT)",
    )
    parser.add_argument(
        "--min-free-gb",
        type=float,
        default=DEFAULT_MIN_FREE_GB,
        help="free disk needed at the state directory, in GB (default: %(default)s)",
    )
    parser.add_argument(
        "--min-gpus", type=int, default=1, help="GPUs needed (default: %(default)s)"
    )
    parser.add_argument(
        "--guidance-url",
        help="frozen-guidance mode: the guidance endpoint, checked instead of GPUs and model "
        "(default: serve-frozen.yaml's when --config names one, else none)",
    )
    return parser


def resolve_defaults(args: argparse.Namespace) -> argparse.Namespace:
    """Fill the flags left out from `args.config` (paths relative to its folder, the task
    directory from the installed package). Raises `RunSettingsError` for a broken serve.yaml
    or `FileNotFoundError` for a task that is not installed, when a value is needed from them.

    The settings file is read whenever a flag is left out and the file exists, so a configured
    seed, problem id or guidance endpoint is used even when the six main flags are given; it
    is not needed when those six are given and it does not exist."""
    needed = ("state_dir", "model_dir", "judge_url", "task_dir", "executor", "reasoning_effort")
    optional = ("problem_id", "seed_file", "guidance_url")
    config = Path(args.config)
    if all(getattr(args, name) is not None for name in needed) and (
        all(getattr(args, name) is not None for name in optional) or not config.is_file()
    ):
        return args
    settings = RunSettings.load(config, base_dir=config.parent)
    task_dir = args.task_dir or bundled_task_dir(settings.task)
    return argparse.Namespace(
        **{
            **vars(args),
            "state_dir": args.state_dir or settings.state_dir,
            "model_dir": args.model_dir or config.parent / "work" / "model",
            "judge_url": args.judge_url or settings.judge_url,
            "task_dir": task_dir,
            "problem_id": args.problem_id or settings.judge_problem_id,
            "seed_file": args.seed_file or task_dir / settings.seed_file,
            "guidance_url": args.guidance_url or settings.guidance_upstream_url,
            "executor": args.executor or settings.executor_backend,
            "reasoning_effort": args.reasoning_effort or settings.gpt_oss_reasoning_effort,
        }
    )


def main(argv: Sequence[str] | None = None, prog: str = "python -m harness.preflight") -> int:
    """Run the preflight from command-line flags, print the table, and return 0 when every
    check is ready, 1 otherwise (with a line on stderr naming the missing checks), 2 for bad
    flags."""
    args = build_parser(prog).parse_args(argv)
    try:
        args = resolve_defaults(args)
    except (RunSettingsError, FileNotFoundError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    try:
        executor = backend_from_name(
            args.executor, reasoning_effort=args.reasoning_effort, base_url=args.executor_url
        )
    except ValueError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    score_seed = None
    if not args.skip_judge_score:
        score_seed = seed_scorer(
            args.task_dir, args.judge_url, problem_id=args.problem_id, seed_file=args.seed_file
        )
    report = run_preflight(
        state_dir=args.state_dir,
        model_dir=args.model_dir,
        judge_url=args.judge_url,
        executor=executor,
        score_seed=score_seed,
        min_free_gb=args.min_free_gb,
        min_gpus=args.min_gpus,
        model_id=args.model_id,
        task_dir=args.task_dir,
        seed_file=args.seed_file,
        guidance_url=args.guidance_url,
    )
    report.render(Console())
    if report.ok:
        return 0
    print(report.failure_message(), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
