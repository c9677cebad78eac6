"""`guidance-ttt rehearse [STATE]`: a frozen-guidance run on this CPU machine with scripted
stand-in models (`harness.rehearsal` runs it), or with `--backend tinker` a trained one on a
stand-in for Tinker's service; then the commands to look at it."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from rich.console import Console

from harness.arms import ARMS, DEFAULT_ARM, DEFAULT_SELECTION, SELECTIONS


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    rehearse = subparsers.add_parser(
        "rehearse",
        help="frozen-guidance run on this CPU machine with scripted stand-in models",
        description="Run frozen-guidance mode end to end: real reef serve (record-only), the "
        "real local judge, scripted stand-ins for the guidance model and the executor, live "
        "G×R display; then print the commands to look at the state directory. Re-running "
        "resumes.",
    )
    rehearse.add_argument(
        "state_dir",
        type=Path,
        nargs="?",
        help="where the rehearsal's state goes (default: work/rehearsal, or "
        "work/rehearsal-<task> with --task; -tinker appended with --backend tinker)",
    )
    rehearse.add_argument(
        "--task",
        type=Path,
        help="rehearse this task directory (anywhere) with a stand-in executor that edits its "
        "own seed (default: the template's Polyomino task)",
    )
    rehearse.add_argument(
        "--judge-url",
        help="with --task: a running judge that serves its problem (default: start one)",
    )
    rehearse.add_argument(
        "--frontiercs",
        type=Path,
        help="with --task: a FrontierCS checkout for the local judge to serve (default: the "
        "task's own judge/ packages)",
    )
    rehearse.add_argument(
        "--seed",
        help="the seed record inside the task (default: solution/shelf/seed.json, or "
        "solution/seed.json with --task)",
    )
    rehearse.add_argument(
        "--steps", type=int, default=2, help="STEPS, the final total (default: %(default)s)"
    )
    rehearse.add_argument(
        "--groups", type=int, default=2, help="G, groups per step (default: %(default)s)"
    )
    rehearse.add_argument(
        "--rollouts", type=int, default=4, help="R, rollouts per group (default: %(default)s)"
    )
    rehearse.add_argument(
        "--cases", type=int, default=2, help="generated judge cases (default: %(default)s)"
    )
    rehearse.add_argument(
        "--judge-seed", type=int, default=11, help="generated suite seed (default: %(default)s)"
    )
    rehearse.add_argument(
        "--backend",
        choices=("frozen", "tinker"),
        default="frozen",
        help="frozen: serve-frozen.yaml, nothing trained (default); tinker: serve-tinker.yaml, "
        "Reef's Tinker backend trains the guidance LoRA on a local stand-in for Tinker's "
        "service (needs the tinker extra; no network, no account)",
    )
    rehearse.add_argument(
        "--wandb",
        choices=("offline", "online"),
        help="log to W&B in this mode, under STATE/wandb (default: off, as serve-frozen.yaml)",
    )
    _add_arm_arguments(rehearse)


def _add_arm_arguments(rehearse: argparse.ArgumentParser) -> None:
    """The arm, seed and spend-limit flags."""
    rehearse.add_argument(
        "--arm", choices=ARMS, default=DEFAULT_ARM, help="experiment arm (default: %(default)s)"
    )
    rehearse.add_argument(
        "--parent-selection",
        choices=SELECTIONS,
        default=DEFAULT_SELECTION,
        help="parent selection (default: %(default)s)",
    )
    rehearse.add_argument("--run-seed", type=int, default=0, help="run seed (default: 0)")
    rehearse.add_argument(
        "--max-tokens", type=int, help="spend limit in tokens (default: no limit)"
    )
    rehearse.add_argument(
        "--max-cost-usd", type=float, help="spend limit in US dollars (default: no limit)"
    )


def run(args: argparse.Namespace, console: Console | None = None) -> int:
    console = console or Console()
    if args.wandb and importlib.util.find_spec("wandb") is None:  # before anything starts
        print(
            f"guidance-ttt rehearse: --wandb {args.wandb} needs the wandb package, which is not "
            "installed: pip install -e '.[watch]' (the watch extra), or leave out --wandb",
            file=sys.stderr,
        )
        return 2
    if args.backend == "tinker" and importlib.util.find_spec("tinker") is None:
        print(
            "guidance-ttt rehearse: --backend tinker drives Reef's Tinker backend through the "
            "Tinker SDK, which is not installed: pip install -e '.[tinker]' (the tinker extra)",
            file=sys.stderr,
        )
        return 2
    from harness.cli.termination import (
        Terminated,
        exit_now,
        resume_command,
        stopping_on_signals,
    )
    from harness.rehearsal.rehearse import (
        RehearsalOptions,
        default_state_dir,
        next_commands,
        refuse_backend,
        rehearse,
    )
    from harness.run.controller import ResumeRefused
    from harness.run.spend import SpendLimitReached

    options = RehearsalOptions(
        steps=args.steps,
        groups=args.groups,
        rollouts=args.rollouts,
        cases=args.cases,
        judge_seed=args.judge_seed,
        task=args.task.resolve() if args.task else None,
        judge_url=args.judge_url,
        frontiercs=args.frontiercs,
        seed=args.seed,
        wandb=(("enabled", True), ("mode", args.wandb)) if args.wandb else (),
        arm=args.arm,
        parent_selection=args.parent_selection,
        run_seed=args.run_seed,
        max_cost_usd=args.max_cost_usd,
        max_tokens=args.max_tokens,
        backend=args.backend,
    )
    try:
        refuse_backend(options)
    except ValueError as exc:
        print(f"guidance-ttt rehearse: {exc}", file=sys.stderr)  # one line, before anything
        return 2
    args.state_dir = args.state_dir or default_state_dir(options)
    try:
        with stopping_on_signals("guidance-ttt rehearse", resume_command("rehearse")):
            result = rehearse(args.state_dir, options, console)
    except Terminated as exc:  # the stopping line is printed; every process it started is stopped
        exit_now(int(exc.code))
        raise  # not reached
    except SpendLimitReached as exc:
        console.print(f"rehearsal stopped: {exc}", markup=False, soft_wrap=True)
        return 1
    except ResumeRefused as exc:
        if "already finished" not in str(exc):
            raise
        print(f"guidance-ttt rehearse: {exc}", file=sys.stderr)  # one line, at once
        return 2
    best = result.best.verifier_raw_score if result.best else None
    console.print(
        f"rehearsal done: steps {result.start_step}..{result.next_step - 1} committed, best "
        f"{'--' if best is None else f'{best:.4f}'} (arm {args.arm}, scripted stand-in models"
        + (", trained on the Tinker stand-in)" if args.backend == "tinker" else ")")
    )
    console.print("look at it:")
    for command in next_commands(args.state_dir):
        console.print(f"  {command}", markup=False, highlight=False, soft_wrap=True)
    if args.wandb == "offline":
        runs = Path(args.state_dir) / "wandb" / "wandb" / "offline-run-*"
        console.print(f"  wandb sync {runs}", markup=False, highlight=False, soft_wrap=True)
    return 0
