"""`guidance-ttt run`: the one command that starts (or resumes) a run; ./run.sh is a thin
wrapper over it. What it starts and in which order is `harness.run.stack`; here are its
flags, and the stop: SIGINT (Ctrl-C), SIGTERM or SIGHUP prints one line naming the exact
command that resumes, stops everything the run started and exits with 128 + the signal; a
second signal while stopping exits at once (`harness.cli.termination`).

    guidance-ttt run --config serve-frozen.yaml --state-dir work/run1 --steps 2 \\
        --groups 1 --rollouts 2 --set harness.max_rollout_workers=2
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.arms import ARMS, SELECTIONS

#: The flags that set a named setting (`harness.settings.run_copy.NAMED`), as argparse dests.
NAMED_FLAGS = (
    "steps",
    "groups",
    "rollouts",
    "arm",
    "selection",
    "seed",
    "guidance_url",
    "guidance_model",
    "executor_url",
    "executor_model",
    "judge_url",
)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The `run` subcommand and its flags (every default named)."""
    parser = subparsers.add_parser(
        "run",
        help="start or resume a run: settings copy, local judge, preflight, Reef, the episode",
        description="Start (or resume) one run from a settings file, with what the flags change "
        "written into the run's own settings copy in its state directory (status, resume and "
        "export read it). Without a judge URL the project's local judge is started for the "
        "task. Re-running the same command resumes; Ctrl-C stops everything it started.",
    )
    parser.add_argument(
        "--config",
        type=Path,
        help="serve.yaml (trained) or serve-frozen.yaml (frozen guidance) (default: "
        "$GUIDANCE_TTT_SERVE_YAML, else the project's serve.yaml)",
    )
    parser.add_argument(
        "--state-dir", type=Path, help="the run's state directory (default: the file's state_dir)"
    )
    parser.add_argument("--steps", type=int, help="STEPS, the final total (default: the file's)")
    parser.add_argument("--groups", type=int, help="G, groups per step (default: the file's)")
    parser.add_argument("--rollouts", type=int, help="R, rollouts per group (default: the file's)")
    parser.add_argument("--arm", choices=ARMS, help="the experiment arm (default: the file's)")
    parser.add_argument(
        "--selection", choices=SELECTIONS, help="parent selection (default: the file's)"
    )
    parser.add_argument("--seed", type=int, help="the run seed (default: the file's)")
    parser.add_argument(
        "--guidance-url",
        help="frozen mode: the guidance endpoint, without /v1 (default: the file's, "
        "$GUIDANCE_TTT_GUIDANCE_URL)",
    )
    parser.add_argument(
        "--guidance-model", help="frozen mode: the guidance model's id (default: the file's)"
    )
    parser.add_argument(
        "--executor-url",
        help="the executor endpoint, with /v1 (default: the file's, $GUIDANCE_TTT_EXECUTOR_URL)",
    )
    parser.add_argument("--executor-model", help="the executor model's id (default: the file's)")
    parser.add_argument(
        "--judge-url",
        help="a running judge (default: $FRONTIERCS_JUDGE_URL or the file's URL; with neither, "
        "the local judge is started for the task)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other setting, a dotted key from the file's root or its run section (e.g. "
        "harness.max_rollout_workers=2, reef.port=8901); validated as the file is (repeatable; "
        "default: none)",
    )
    return parser


def run(args: argparse.Namespace, console: Any = None) -> int:
    """Start (or resume) the run; returns the stack's exit status (128 + a signal's number when
    one stopped it)."""
    from harness.cli.termination import (
        Terminated,
        exit_now,
        resume_command,
        stopping_on_signals,
    )
    from harness.run.stack import StackRequest, start_stack

    request = StackRequest(
        config=args.config,
        state_dir=args.state_dir,
        named={name: getattr(args, name) for name in NAMED_FLAGS},
        sets=tuple(args.set),
        command=resume_command("run"),
    )
    try:
        with stopping_on_signals("guidance-ttt run", request.command):
            return start_stack(request)
    except Terminated as exc:  # the stopping line is printed; everything it started is stopped
        exit_now(int(exc.code))
        raise  # not reached
