"""How long `guidance-ttt run` takes to refuse, and to start a resumed frozen run.

    python benchmarks/run_start.py [--skip-resume] [--repeats N]

Four launches, each timed from the command's start to its answer:

- a typo'd flag (`--stesp 3`): the usage error;
- a missing task folder (`--set task=<no such folder>`): the one-line refusal;
- a dead URL (`--guidance-url http://127.0.0.1:9`): the one-line refusal;
- a resumed frozen run: `guidance-ttt run --config serve-frozen.yaml --steps 1 --groups 1
  --rollouts 2` against the scripted stand-in models (`harness.rehearsal`) runs to its end,
  then the same command with `--steps 2` is launched and timed until its first rollout starts
  (its first `rollout_stage` event in the run's event log); it is then stopped with SIGINT.
  The local judge's verdict cache (`<state>/judge/verdicts.sqlite`) answers the seed's score
  on the second launch; its hits are counted from the judge's log.

With `--repeats N` each refusal and the resumed launch are timed N times (the resumed run is
stopped before its step commits, so every launch resumes the same step); each line then shows
the median, with the lowest and highest in brackets.

Targets (issue 47): a typo'd flag, a missing folder or a dead URL answered in ≤ 2 s; the resumed
frozen run's first rollout ≤ 5 s after launch. Prints one line per launch kind.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FROZEN = REPO / "serve-frozen.yaml"
RUN = [sys.executable, "-m", "harness.cli.entry", "run", "--config", str(FROZEN)]


def clean_environment() -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("GUIDANCE_TTT_", "FRONTIERCS_"))
    }
    return {**env, "GUIDANCE_TTT_EXECUTOR": "openai_compatible"}


def timed(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, int, str]:
    start = time.monotonic()
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or [""]
    return time.monotonic() - start, done.returncode, last[0][:160]


def first_rollout_after(
    log: Path, lines_before: int, deadline_s: float, process: subprocess.Popen
) -> float | None:
    """Seconds (from now) until a `rollout_stage` event beyond `lines_before` appears; None when
    `process` ends first or the deadline passes."""
    start = time.monotonic()
    while time.monotonic() - start < deadline_s and process.poll() is None:
        if log.exists():
            lines = log.read_text(encoding="utf-8", errors="replace").splitlines()[lines_before:]
            if any(json.loads(line).get("event") == "rollout_stage" for line in lines if line):
                return time.monotonic() - start
        time.sleep(0.02)
    return None


def spread(seconds: list[float]) -> str:
    """`median s` for one figure, `median s [lowest–highest]` for more."""
    middle = f"{statistics.median(seconds):6.2f} s"
    if len(seconds) == 1:
        return middle
    return f"{middle} [{min(seconds):.2f}–{max(seconds):.2f}]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-resume", action="store_true", help="only the three refusals")
    parser.add_argument("--repeats", type=int, default=1, help="launches of each kind (default 1)")
    args = parser.parse_args()
    env = clean_environment()
    with tempfile.TemporaryDirectory(prefix="run-start-") as scratch:
        work = Path(scratch)
        dead = ["--guidance-url", "http://127.0.0.1:9", "--guidance-model", "m"]
        dead += ["--executor-url", "http://127.0.0.1:9/v1", "--executor-model", "e"]
        refusals = {
            "typo'd flag": [*RUN, "--state-dir", str(work / "a"), "--stesp", "3"],
            "missing task folder": [
                *RUN,
                "--state-dir",
                str(work / "b"),
                *dead,
                "--set",
                f"task={work}/nope",
            ],
            "dead URL": [*RUN, "--state-dir", str(work / "c"), *dead],
        }
        for name, command in refusals.items():
            answers = [timed(command, env, work) for _ in range(args.repeats)]
            _, code, last = answers[-1]
            shown = spread([seconds for seconds, _, _ in answers])
            print(f"{name:22s} {shown}  exit {code}  {last}", flush=True)
        if not args.skip_resume:
            resumed(work, env, args.repeats)
    return 0


def resumed(work: Path, env: dict[str, str], repeats: int) -> None:
    from harness.adapters.reef.process import free_port
    from harness.rehearsal.openai_server import OpenAIFixture
    from harness.rehearsal.stand_ins import GuidanceScript, executor_reply

    state = work / "run"
    with (
        OpenAIFixture(GuidanceScript(), model="my-guidance") as guidance,
        OpenAIFixture(executor_reply, model="my-executor") as executor,
    ):
        command = [*RUN, "--state-dir", str(state), "--guidance-url", guidance.base_url]
        command += ["--guidance-model", "my-guidance", "--executor-url", executor.v1_url]
        command += ["--executor-model", "my-executor", "--set", f"reef.port={free_port()}"]
        command += ["--set", "harness.seed=solution/shelf/seed.json"]
        seconds, code, last = timed(
            [*command, "--steps", "1", "--groups", "1", "--rollouts", "2"], env, work
        )
        print(f"{'first run (1 step)':22s} {seconds:6.2f} s  exit {code}  {last}", flush=True)
        launches = [launch_to_first_rollout(state, [*command, "--steps", "2"], env, work)]
        while len(launches) < repeats and launches[-1][0] is not None:
            launches.append(launch_to_first_rollout(state, [*command, "--steps", "2"], env, work))
    reached = [seconds for seconds, _ in launches if seconds is not None]
    hits = sum(cached for _, cached in launches)
    if len(reached) < len(launches):
        print(f"{'resumed frozen run':22s} no rollout within 300 s (or the run ended first)")
        return
    print(
        f"{'resumed frozen run':22s} {spread(reached)}  to its first rollout; seed cached: {hits}"
    )


def launch_to_first_rollout(
    state: Path, command: list[str], env: dict[str, str], work: Path
) -> tuple[float | None, int]:
    """Launch the resumed run, time it to its first rollout, stop it with SIGINT; the seconds
    (None when no rollout came) and how many verdicts the judge's cache answered."""
    log = state / "guidance-run" / "events.jsonl"
    before = len(log.read_text(encoding="utf-8").splitlines()) if log.exists() else 0
    judge_log = state / "judge.log"
    judged_before = judge_log.stat().st_size if judge_log.exists() else 0
    start = time.monotonic()
    second = subprocess.Popen(
        command,
        env=env,
        cwd=work,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    waited = first_rollout_after(log, before, 300, second)
    launch_to_rollout = None if waited is None else time.monotonic() - start
    second.send_signal(signal.SIGINT)
    try:
        second.wait(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(second.pid, signal.SIGKILL)
    text = judge_log.read_text(errors="replace")[judged_before:] if judge_log.exists() else ""
    # judges.verdicts.cache logs "submission N: the verdict of submission M (cached)".
    return launch_to_rollout, text.count("(cached)")


if __name__ == "__main__":
    sys.exit(main())
