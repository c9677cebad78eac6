"""A missing executor key stops the run at start, from every entry point, in one line naming the
variable, before any step, state file, judge call or Reef stack. The reference's client refuses
at construction in the same way; without this a run would turn every rollout into reward 0."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from judge_fakes import closed_port_url
from rehearsal_support import run_cpu_steps, write_serve_yaml

from harness.adapters.executor.backends import backend_from_name
from harness.adapters.executor.client import MissingAPIKeyError, require_api_key
from harness.run.harbor_agent import HarborAgent

REPO = Path(__file__).resolve().parents[2]
TASK = REPO / "harbor" / "polyomino_packing"
LINE = (
    "executor openrouter_glm_5_2 needs an API key: set the environment variable OPENROUTER_API_KEY"
)


def keyless_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "OPENROUTER_API_KEY"}
    env.update(
        GUIDANCE_TTT_EXECUTOR="openrouter_glm_5_2",
        PYTHON=sys.executable,
        GUIDANCE_TTT_SKIP_SETUP="1",
        **extra,
    )
    return env


def nothing_written(state_dir: Path) -> bool:
    return not state_dir.exists() or not any(state_dir.rglob("*"))


def test_require_api_key_names_the_variable_and_never_keeps_the_key() -> None:
    backend = backend_from_name("openrouter_glm_5_2")
    with pytest.raises(MissingAPIKeyError, match="OPENROUTER_API_KEY"):
        require_api_key(backend, {})
    with pytest.raises(MissingAPIKeyError) as blank:
        require_api_key(backend, {"OPENROUTER_API_KEY": "  "})
    assert str(blank.value) == LINE
    assert require_api_key(backend, {"OPENROUTER_API_KEY": "sk-x"}) == "sk-x"
    assert "sk-x" not in repr(backend) and "sk-x" not in str(backend.safe_dict())
    assert require_api_key(backend_from_name("gpt_oss_120b"), {}) is None


@pytest.mark.parametrize("args", [["--describe"], []], ids=["describe", "episode"])
def test_run_py_refuses_in_one_line_naming_the_variable(args: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "run.py"), *args],
        cwd=REPO,
        env=keyless_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"run.py: {LINE}"]
    assert done.stdout == ""


def test_run_sh_stops_before_the_preflight_and_the_stack() -> None:
    done = subprocess.run(
        ["bash", str(REPO / "run.sh")],
        cwd=REPO,
        env=keyless_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [f"run.py: {LINE}"]
    assert "preflight" not in done.stdout and "reef serve" not in done.stdout


def test_harbor_agent_refuses_before_any_step(tmp_path: Path, monkeypatch) -> None:
    state = tmp_path / "state"
    serve_yaml = tmp_path / "serve.yaml"
    write_serve_yaml(
        serve_yaml,
        state_dir=state,
        reef_port=1,
        judge_url=closed_port_url(),
        groups=1,
        rollouts=2,
        steps=1,
        executor_backend="openrouter_glm_5_2",
    )
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    agent = HarborAgent(logs_dir=tmp_path / "logs", serve_yaml=str(serve_yaml), task_dir=str(TASK))
    context = SimpleNamespace(metadata=None)
    with pytest.raises(MissingAPIKeyError, match="OPENROUTER_API_KEY"):
        asyncio.run(agent.run("problem", environment=None, context=context))  # type: ignore[arg-type]
    assert context.metadata is None and nothing_written(state)


def test_the_runner_used_by_the_rehearsal_refuses_before_the_judge(
    tmp_path: Path, monkeypatch
) -> None:
    """`run_steps`, which the rehearsal, the Harbor agent and the tests all run through, checks
    the key first: the judge (a closed port here) is never called and no archive is created."""
    state = tmp_path / "state"
    settings = write_serve_yaml(
        tmp_path / "serve.yaml",
        state_dir=state,
        reef_port=1,
        judge_url=closed_port_url(),
        groups=1,
        rollouts=2,
        steps=1,
        executor_backend="openrouter_glm_5_2",
    )
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    with pytest.raises(MissingAPIKeyError, match="OPENROUTER_API_KEY"):
        run_cpu_steps(settings, closed_port_url() + "/v1", TASK)
    assert not (state / "guidance-run" / "archive").exists()
