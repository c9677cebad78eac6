"""Preflight: can this machine run a Guidance-TTT run?

Each check returns a `CheckResult` — ready or missing, one line of detail and, when missing, how
to fix it — and never raises: a check that crashes is itself reported as missing. `run.sh` runs
this module before its episode (a frozen run's Reef starts beside it), and `guidance-ttt doctor`
can call `run_preflight` alone. Nothing here downloads or trains: the model is only looked for
(or found fetchable), the judge scores one given seed candidate, and the executor (and a frozen
run's guidance endpoint) answers one tiny request. The only file written is `--usage-file`, what
those calls used, which the run counts in its cost.

This module is the entry point: `run_preflight` runs the rows at once and reports them in table
order, and `main` is the command line (`python -m harness.preflight`, `guidance-ttt doctor`),
whose flags left out come from `serve.yaml`. The rows live beside it: `machine` (Python, GPUs,
model, git-lfs, disk), `services` (judge, executor, guidance endpoint), `tinker` (a run on
Reef's Tinker backend: key, model, cost, instead of GPUs and model), `task` (the task
directory and its seed) and `report` (the table).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console

from harness.adapters.executor.backends import (
    EXECUTOR_CHOICES,
    ExecutionBackend,
    configured_backend,
)
from harness.preflight.machine import (
    DEFAULT_MIN_FREE_GB,
    DEFAULT_MODEL_ID,
    check_disk,
    check_git_lfs,
    check_gpus,
    check_model,
    check_python,
    check_trial_environment,
)
from harness.preflight.report import CheckResult, PreflightReport, missing_check, ready_check
from harness.preflight.services import (
    JUDGE_ANNOUNCE_S,
    check_executor,
    check_guidance,
    check_judge,
    judge_announced,
)
from harness.preflight.task import check_task, seed_scorer
from harness.preflight.tinker import tinker_checks
from harness.request_shapes import RequestShape
from harness.settings.precedence import run_copy_in, settings_file_for
from harness.settings.run_settings import (
    SETTINGS_BASE,
    RunSettings,
    RunSettingsError,
)
from harness.settings.task_dirs import task_dir_of
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
    settings_keys: Callable[[str], str] | None = None,
    environment: Callable[[], CheckResult] | None = None,
    guidance_model: str | None = None,
    guidance_shape: RequestShape | None = None,
    local_judge: str | None = None,
    hosted: Sequence[tuple[str, Callable[[], CheckResult]]] = (),
) -> PreflightReport:
    """Run every check, all at once, and collect the rows in table order; never raises for a
    failing check.
    `score_seed=None` checks the judge's health only; `task_dir` adds the task row.
    `guidance_url` (frozen-guidance mode: the OpenAI-compatible endpoint Reef proxies) replaces
    the GPU and model rows by a guidance row: a frozen run trains nothing and loads no weights.
    `settings_keys` names a run-level key as the settings file in use spells it (fix hints
    name it); `environment` adds the row of where the Harbor trial runs (run.sh's episode).
    `guidance_model` and `guidance_shape` make the guidance row send one request of the run's
    shape (without them it only lists the endpoint's models).
    `local_judge` (what the judge the command started for itself serves) adds its row.
    `hosted` (a run on Reef's Tinker backend: `harness.preflight.tinker.tinker_checks`) replaces
    the GPU and model rows by its own: the model is trained and sampled on Tinker's machines."""
    key = settings_keys or (lambda name: f"training.config.{name}")
    checks: list[tuple[str, Callable[[], CheckResult]]] = [("python", check_python)]
    if hosted:
        checks += hosted
    elif guidance_url is None:
        checks += [
            ("GPUs", lambda: check_gpus(min_gpus)),
            ("model", lambda: check_model(model_dir, model_id)),
        ]
    else:
        checks.append(
            (
                "guidance",
                lambda: check_guidance(
                    guidance_url, model=guidance_model, shape=guidance_shape, settings_key=key
                ),
            )
        )
    if task_dir is not None:
        checks.append(("task", lambda: check_task(task_dir, seed_file)))
    checks += [
        ("judge", lambda: check_judge(judge_url, score_seed)),
        *(
            [("local judge", lambda: ready_check("local judge", str(local_judge)))]
            if local_judge
            else []
        ),
        ("executor", lambda: check_executor(executor, settings_key=key)),
        ("git-lfs", check_git_lfs),
        ("disk", lambda: check_disk(state_dir, min_free_gb, key)),
    ]
    if environment is not None:
        checks.append(("trial", environment))
    # Every check waits on its own endpoint, process or file: they run at once, so the table
    # takes as long as its slowest row (the real model calls), not the sum of them all.
    with ThreadPoolExecutor(len(checks), thread_name_prefix="preflight") as pool:
        pending = [(name, pool.submit(check)) for name, check in checks]
    results = []
    for name, done in pending:
        try:
            results.append(done.result())
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
        help="serve.yaml whose settings give the defaults below (default: the run's own "
        "settings copy in its state directory, written by guidance-ttt run, else the project's "
        "serve.yaml)",
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
        "--local-judge",
        metavar="TEXT",
        help="a row for the judge the command started for itself: what it serves and its log "
        "(default: no such row; `guidance-ttt run` and ./run.sh pass it)",
    )
    parser.add_argument(
        "--local-judge-file",
        type=Path,
        metavar="FILE",
        help="the judge the command is starting beside the preflight: wait for its URL and row "
        "in FILE (two lines, written whole once it listens), which replace --judge-url and "
        "--local-judge (default: none; `guidance-ttt run` passes it)",
    )
    parser.add_argument(
        "--skip-judge-score",
        action="store_true",
        help="check the judge's /health only (default: also score the seed)",
    )
    parser.add_argument(
        "--executor",
        choices=list(EXECUTOR_CHOICES),
        metavar="NAME",
        help=f"executor backend: {', '.join(EXECUTOR_CHOICES)} (default: serve.yaml's, set by "
        "$GUIDANCE_TTT_EXECUTOR)",
    )
    parser.add_argument(
        "--executor-model",
        help="the executor's model id (default: serve.yaml's harness.executor.model, else the "
        "preset's)",
    )
    parser.add_argument(
        "--executor-url",
        help="executor base URL (default: serve.yaml's harness.executor.base_url, set by "
        "$GUIDANCE_TTT_EXECUTOR_URL, else the preset's)",
    )
    parser.add_argument(
        "--reasoning-effort",
        help="gpt_oss_120b reasoning effort (default: serve.yaml's, "
        "set by $GUIDANCE_TTT_REASONING_EFFORT)",
    )
    parser.add_argument(
        "--min-free-gb",
        type=float,
        help="free disk needed at the state directory, in GB (default: serve.yaml's "
        f"harness.min_free_gb, else {DEFAULT_MIN_FREE_GB:g} trained / 5 frozen)",
    )
    parser.add_argument(
        "--min-gpus",
        type=int,
        help="GPUs needed (default: serve.yaml's inference.num-gpus, the GPUs run.sh gives "
        "Reef; else 1)",
    )
    parser.add_argument(
        "--trial-environment",
        choices=["docker", "local"],
        help="where run.sh's Harbor trial runs: docker, or local (no Docker: bubblewrap on this "
        "host); checked as the trial row (default: not checked)",
    )
    parser.add_argument(
        "--usage-file",
        type=Path,
        metavar="FILE",
        help="write what the real model calls used (guidance, executor) to FILE, for the run "
        "to count in its cost; ./run.sh passes <state>/guidance-run/preflight-usage.json "
        "(default: not written)",
    )
    parser.add_argument(
        "--guidance-url",
        help="frozen-guidance mode: the guidance endpoint, checked instead of GPUs and model "
        "(default: serve-frozen.yaml's when --config names one, else none)",
    )
    return parser


def resolve_defaults(args: argparse.Namespace) -> argparse.Namespace:
    """Fill the flags left out from `args.config` (paths as the settings file means them: from
    the repository root, docs/running.md; the task directory from the installed package).
    Raises `RunSettingsError` for a broken serve.yaml or `FileNotFoundError` for a task that is
    not installed, when a value is needed from them.

    The settings file is read whenever it exists, so a configured seed, problem id, executor
    or guidance endpoint is used even when the main flags are given; it is not needed when
    those are given and it does not exist."""
    needed = ("state_dir", "model_dir", "judge_url", "task_dir", "executor", "reasoning_effort")
    config = settings_file(args)
    if all(getattr(args, name) is not None for name in needed) and not config.is_file():
        return argparse.Namespace(**{**vars(args), "settings": None})
    settings = RunSettings.load(config)
    task_dir = args.task_dir or task_dir_of(settings)
    return argparse.Namespace(
        **{
            **vars(args),
            "settings": settings,
            "state_dir": args.state_dir or settings.state_dir,
            "model_dir": args.model_dir or SETTINGS_BASE / "work" / "model",
            "judge_url": args.judge_url or settings.judge_url,
            "task_dir": task_dir,
            "problem_id": args.problem_id or settings.judge_problem_id,
            "seed_file": args.seed_file or task_dir / settings.seed_file,
            "guidance_url": args.guidance_url or settings.guidance_upstream_url,
            "executor": args.executor or settings.executor_backend,
            "reasoning_effort": args.reasoning_effort or settings.gpt_oss_reasoning_effort,
            "min_free_gb": settings.min_free_gb if args.min_free_gb is None else args.min_free_gb,
            "min_gpus": args.min_gpus or settings.num_gpus or 1,
        }
    )


def settings_file(args: argparse.Namespace) -> Path:
    """The settings file the flags left out come from, in the one order of
    `harness.settings.precedence`: `--config`, else the run's own copy in its state directory
    (`--state-dir`, else the one the project's serve.yaml names), else the project's serve.yaml."""
    config = settings_file_for(args.config, args.state_dir)
    if args.config is None and args.state_dir is None and config.is_file():
        config = run_copy_in(RunSettings.load(config).state_dir) or config
    return config


def configured_executor(args: argparse.Namespace) -> ExecutionBackend:
    """The executor the run would call: the settings file's (`harness.executor_backend` and
    `harness.executor`), with the flags given replacing its preset, URL, model and effort."""
    settings: RunSettings | None = args.settings
    same_preset = settings is not None and settings.executor_backend == args.executor
    arguments = dict(settings.executor_config) if same_preset and settings else {}
    if args.executor == "gpt_oss_120b" and args.reasoning_effort:
        arguments["reasoning_effort"] = args.reasoning_effort
    if args.executor_url:
        arguments["base_url"] = args.executor_url
    if args.executor_model:
        arguments["model"] = args.executor_model
    return configured_backend(args.executor, **arguments)


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
        executor = configured_executor(args)
    except ValueError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    if args.local_judge_file is not None:  # imported and configured while the judge starts
        announced = judge_announced(args.local_judge_file)
        if announced is None:
            print(
                f"{prog}: no judge URL in {args.local_judge_file} within "
                f"{JUDGE_ANNOUNCE_S:g} s: the judge did not start (its log says why)",
                file=sys.stderr,
            )
            return 2
        args.judge_url, args.local_judge = announced
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
        min_free_gb=DEFAULT_MIN_FREE_GB if args.min_free_gb is None else args.min_free_gb,
        min_gpus=args.min_gpus or 1,
        model_id=args.model_id,
        task_dir=args.task_dir,
        seed_file=args.seed_file,
        guidance_url=args.guidance_url,
        settings_keys=args.settings.settings_key if args.settings else None,
        guidance_model=args.settings.model if args.settings and args.guidance_url else None,
        guidance_shape=args.settings.guidance_shape if args.settings else None,
        environment=(
            (lambda: check_trial_environment(args.trial_environment))
            if args.trial_environment
            else None
        ),
        local_judge=args.local_judge,
        hosted=tinker_checks(args.settings, os.environ)
        if args.settings and args.settings.tinker
        else (),
    )
    report.render(Console())
    if args.usage_file is not None:
        write_usage(args.usage_file, report)
    if report.ok:
        return 0
    print(report.failure_message(), file=sys.stderr)
    return 1


def write_usage(path: Path, report: PreflightReport) -> None:
    """Add the usage of the rows that made a real model call to `path` (`{"guidance": {...},
    "executor": {...}}`: prompt and completion tokens and calls), whole or not at all (a
    temporary file renamed into place); nothing when no call reported usage. What a preflight
    that stopped the run left there is kept and added to (its calls were billed too). The run
    logs the file as a `preflight_usage` event and removes it (harness.run.spend)."""
    used = {check.name: check.usage for check in report.checks if check.usage}
    if not used:
        return
    try:
        left = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        left = {}
    total = dict(left) if isinstance(left, dict) else {}
    for name, usage in used.items():
        before = total.get(name) if isinstance(total.get(name), dict) else {}
        total[name] = {
            key: _count(before.get(key)) + _count(usage.get(key, 1 if key == "calls" else 0))
            for key in ("prompt_tokens", "completion_tokens", "calls")
        }
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(total) + "\n", encoding="utf-8")
    os.replace(temporary, path)


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


if __name__ == "__main__":
    sys.exit(main())
