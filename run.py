"""One reef-eval episode: the task under `harness:HarborAgent`, i.e. one whole Guidance-TTT run.

    python run.py                 # run (or resume) the episode; prints the verifier's reward
    python run.py --describe      # check serve.yaml; print the settings run.sh reads (KEY=value)
    python run.py --serve-yaml serve-frozen.yaml   # frozen-guidance mode (docs/frozen.md)

`run.sh` starts the Reef stack first; see docs/running.md. The episode goes through
`reef_eval.Lab(<state>/lab)`, which stores one row per episode key. A failed episode keeps its
row (the audit trail of the attempt), so the next invocation uses the next attempt number and
the agent resumes the run from its state directory; a finished episode is not run again. Raising
STEPS in serve.yaml gives a new key, so the run continues to the new total.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parent
AGENT = "harness:HarborAgent"
RESUME_HINT = "fix the cause, then re-run the same command (./run.sh) to resume the run"


def _settings(serve_yaml: Path):  # imported lazily: --help must work without the project deps
    from harness.settings.run_settings import RunSettings

    return RunSettings.load(serve_yaml)  # relative paths: from the repository root


def check_executor_key(settings: Any) -> None:
    """Refuse to start when the configured executor needs an API key and its environment
    variable is unset: `MissingAPIKeyError`, one line naming the variable."""
    from harness.adapters.executor.client import require_api_key
    from harness.run.services import executor_backend

    require_api_key(executor_backend(settings, os.environ.get("GUIDANCE_TTT_EXECUTOR_URL")))


def problem_id(override: str, task_dir: Path) -> str:
    """The judge problem of the run: serve.yaml's override, else the task's own (contract.json)."""
    if override:
        return override
    from harness.contract import load_contract

    return load_contract(Path(task_dir)).judge_problem_id


def describe(serve_yaml: Path, task_dir: Path) -> str:
    """The settings run.sh needs, one shell-quoted `KEY=value` per line. The task directory is
    checked with the run's task text first (`harness.task_text`), as the run will load it."""
    from harness.contract import load_task
    from harness.storage.run_files import preflight_usage_path

    settings = _settings(serve_yaml)
    load_task(Path(task_dir), settings.task_text)
    values = {
        "MODE": settings.mode,
        "TRAINING_BACKEND": settings.training_backend,
        "GUIDANCE_URL": settings.guidance_upstream_url or "",
        "STATE_DIR": settings.state_dir,
        "RUN_DIR": settings.run_dir,
        "REEF_URL": settings.reef_url,
        "JUDGE_URL": settings.judge_url,
        "JUDGE_PROBLEM_ID": problem_id(settings.judge_problem_id, task_dir),
        "EXECUTOR": settings.executor_backend,
        "REASONING_EFFORT": settings.gpt_oss_reasoning_effort,
        "MODEL": settings.model,
        "TASK_DIR": task_dir,
        "SEED_FILE": Path(task_dir) / settings.seed_file,
        "PREFLIGHT_USAGE_FILE": preflight_usage_path(settings.state_dir),
        "TASK_TEXT": settings.task_text,
        "STEPS": settings.steps,
        "STARTUP_DEADLINE_S": settings.startup_deadline_s,
        "TRIAL": trial_environment(),
    }
    return "\n".join(f"{key}={shlex.quote(str(value))}" for key, value in values.items())


def trial_environment() -> str:
    """Where the Harbor trial runs: `$GUIDANCE_TTT_TRIAL` (`docker` or `local`), else Docker
    when the docker command is on PATH, else the local non-Docker environment (bubblewrap on
    this host, `harness.run.local_environment`); the preflight's trial row says which."""
    chosen = os.environ.get("GUIDANCE_TTT_TRIAL", "").strip()
    if chosen:
        return chosen
    return "docker" if docker_answers() else "local"


def docker_answers() -> bool:
    """True when the docker command is on PATH and its daemon answers (a client without a
    daemon cannot start the trial container)."""
    docker = shutil.which("docker")
    if docker is None:
        return False
    try:
        done = subprocess.run(
            [docker, "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0 and bool(done.stdout.strip())


def local_trial() -> dict[str, Any]:
    """Harbor's `environment` config of the local non-Docker trial (kept for inspection)."""
    from harness.run.local_environment import IMPORT_PATH

    return {"import_path": IMPORT_PATH, "delete": False, "env": {"PYTHON": sys.executable}}


async def run_episode(serve_yaml: Path, task_dir: Path, **overrides: Any) -> int:
    """Run the episode through reef-eval and print its reward; 1 when it failed. `overrides` go
    to `Lab.run` (Harbor TrialConfig fields, e.g. another `environment`); without one, the
    trial runs where `trial_environment()` says."""
    import reef_eval

    settings = _settings(serve_yaml)
    local = "environment" not in overrides and trial_environment() == "local"
    if local:
        overrides["environment"] = local_trial()
    # The agent runs in this process and reads these; the task container reads FRONTIERCS_*
    # (a local trial shares this host's network, so it reaches a loopback judge as it is).
    os.environ["GUIDANCE_TTT_SERVE_YAML"] = str(serve_yaml)
    os.environ.setdefault("GUIDANCE_TTT_TASK_DIR", str(task_dir))
    os.environ.setdefault("GUIDANCE_TTT_JUDGE_URL", settings.judge_url)
    judge_in_trial = settings.judge_url if local else container_judge_url(settings.judge_url)
    os.environ.setdefault("FRONTIERCS_JUDGE_URL", judge_in_trial)
    os.environ.setdefault("FRONTIERCS_PROBLEM_ID", problem_id(settings.judge_problem_id, task_dir))
    lab = reef_eval.Lab(settings.state_dir / "lab")
    agent = {"name": AGENT, "model_name": settings.model}
    attempt = 1
    while (row := lab.store.get(_key(task_dir, settings.steps, attempt))) is not None:
        if not row.tags.get("error") and row.rewards:
            break  # this run already finished: report it again
        attempt += 1
    else:
        key = _key(task_dir, settings.steps, attempt)
        row = await lab.run(str(task_dir), agent, key=key, **overrides)
    error = row.tags.get("error")
    if error or not row.rewards:
        print(
            f"run.py: episode failed: {error or 'the verifier produced no reward'}", file=sys.stderr
        )
        print(f"run.py: {RESUME_HINT} (trial: {row.uri})", file=sys.stderr)
        return 1
    if os.environ.get("GUIDANCE_TTT_COMMAND"):  # under guidance-ttt run: for a person
        print(f"episode reward: {readable_rewards(row.rewards)}")
    else:
        print(f"episode reward: {row.rewards}")  # the reference's line: the verifier's rewards
    return 0


def readable_rewards(rewards: Any) -> str:
    """The verifier's rewards mapping as `16.6667` (one `reward`) or `reward 16.6667, cases 2`."""
    if not isinstance(rewards, dict):
        return str(rewards)

    def shown(value: Any) -> str:
        return f"{value:.4f}" if isinstance(value, float) else str(value)

    if set(rewards) == {"reward"}:
        return shown(rewards["reward"])
    return ", ".join(f"{key} {shown(value)}" for key, value in rewards.items())


def container_judge_url(host_url: str) -> str:
    """The judge as the task container reaches it: a loopback host becomes Docker's
    `host.docker.internal` (the task's compose file maps it to the host gateway)."""
    parts = urlsplit(host_url)
    if parts.hostname in ("127.0.0.1", "localhost", "0.0.0.0"):
        netloc = "host.docker.internal" + (f":{parts.port}" if parts.port else "")
        return urlunsplit(parts._replace(netloc=netloc))
    return host_url


def _key(task_dir: Path, steps: int, attempt: int) -> str:
    return f"{task_dir.name}:guidance-ttt:steps{steps}:attempt{attempt}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--serve-yaml",
        type=Path,
        default=Path(os.environ.get("GUIDANCE_TTT_SERVE_YAML") or REPO / "serve.yaml"),
        help="the run's settings (default: $GUIDANCE_TTT_SERVE_YAML, else serve.yaml)",
    )
    parser.add_argument("--task-dir", type=Path, help="default: harbor/<training.config.task>")
    parser.add_argument("--describe", action="store_true", help="print settings as KEY=value")
    args = parser.parse_args(argv)
    serve_yaml = args.serve_yaml.resolve()
    try:
        settings = _settings(serve_yaml)
        check_executor_key(settings)  # before the stack starts: run.sh runs --describe first
    except (ValueError, RuntimeError) as exc:  # the message names the setting and the fix
        print(f"run.py: {exc}", file=sys.stderr)
        return 2
    from harness.settings.task_dirs import task_dir_of

    try:
        task_dir = (args.task_dir or task_dir_of(settings)).resolve()
    except FileNotFoundError as exc:
        print(f"run.py: {exc}", file=sys.stderr)
        return 2
    if args.describe:
        try:
            print(describe(serve_yaml, task_dir))
        except (ValueError, OSError) as exc:  # the task's files: the message names the file
            print(f"run.py: {exc}", file=sys.stderr)
            return 2
        return 0
    return asyncio.run(run_episode(serve_yaml, task_dir))


if __name__ == "__main__":
    sys.exit(main())
