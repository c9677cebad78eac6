"""A frozen `./run.sh` on this machine, as a user runs it: both models are OpenAI-compatible
servers on loopback under names of our choosing, the executor is configured by endpoint and
model (`openai_compatible`), the judge is the local one, and the Harbor trial runs in the local
non-Docker environment when no Docker daemon answers. What stands in: the two models
(`harness.rehearsal.stand_ins`: scripted answers, real C++ edits judged for real)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from judge_fakes import LocalJudge

from harness.observe.cost import PriceTable, total_usage
from harness.observe.events import read_events
from harness.rehearsal.reef_process import free_port
from harness.rehearsal.stand_ins import GuidanceScript, executor_reply
from harness.results import load_run, run_cost, run_usage
from harness.storage.store import read_committed
from tests.harness.test_run_sh import table_row
from tests.openai_fixture import OpenAIFixture

REPO = Path(__file__).resolve().parents[2]
GUIDANCE_MODEL = "my-guidance-model"
EXECUTOR_MODEL = "my-executor-model"


def frozen_copy(path: Path, state_dir: Path, reef_port: int) -> Path:
    """serve-frozen.yaml copied outside the repository: one step of 2×2, its own state and port."""
    document = yaml.safe_load((REPO / "serve-frozen.yaml").read_text())
    document["reef"]["port"] = reef_port
    document["recipe"]["config"].update({"groups-per-step": 2, "rollouts-per-group": 2})
    document["recipe"]["config"]["guidance-ttt"].update(steps=1, state_dir=str(state_dir))
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_frozen_run_sh_with_loopback_models_commits_a_step(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with (
        LocalJudge(tmp_path / "judge", "--generated-cases", "2", "--seed", "3") as judge,
        # Both endpoints hold requests to OpenAI's own request types (unknown fields refused).
        OpenAIFixture(GuidanceScript(), model=GUIDANCE_MODEL, mode="strict") as guidance,
        OpenAIFixture(executor_reply, model=EXECUTOR_MODEL, mode="strict") as executor,
    ):
        (tmp_path / "elsewhere").mkdir()
        settings = frozen_copy(tmp_path / "elsewhere" / "frozen.yaml", state, free_port())
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("GUIDANCE_TTT_", "FRONTIERCS_"))
        }
        env.update(
            PYTHON=sys.executable,
            GUIDANCE_TTT_SKIP_SETUP="1",
            GUIDANCE_TTT_SERVE_YAML=str(settings),
            GUIDANCE_TTT_GUIDANCE_URL=guidance.base_url,
            GUIDANCE_TTT_GUIDANCE_MODEL=GUIDANCE_MODEL,
            GUIDANCE_TTT_GUIDANCE_DIALECT="openai",
            GUIDANCE_TTT_EXECUTOR="openai_compatible",
            GUIDANCE_TTT_EXECUTOR_URL=executor.v1_url,
            GUIDANCE_TTT_EXECUTOR_MODEL=EXECUTOR_MODEL,
            GUIDANCE_TTT_SEED="solution/shelf/seed.json",  # the program the stand-in edits
            FRONTIERCS_JUDGE_URL=judge.url,
        )
        done = subprocess.run(
            ["bash", str(REPO / "run.sh")],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=840,
        )
        executor_models = {r.body.get("model") for r in executor.completion_requests()}
        refused = guidance.refused + executor.refused
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert refused == []
    assert "ready" in table_row(done.stdout, "guidance")  # it answered a request of the run's shape
    # The preflight passed on this machine's free disk, naming what a frozen run needs.
    assert "ready" in table_row(done.stdout, "disk") and "need 5 GB" in table_row(
        done.stdout, "disk"
    )
    assert "ready" in table_row(done.stdout, "executor")
    assert EXECUTOR_MODEL in table_row(done.stdout, "executor")
    assert "ready" in table_row(done.stdout, "trial")
    assert "reward:" in done.stdout
    archive, _ = read_committed(state / "guidance-run" / "archive")
    assert {e.timestep for e in archive.entries.values()} == {0, 1}
    assert len([e for e in archive.entries.values() if e.timestep == 1]) == 4
    assert executor_models == {EXECUTOR_MODEL}
    resume = json.loads((state / "guidance-run" / "resume-state.json").read_text())
    assert resume["next_step"] == 1
    assert resume["executor_backend"]["model"] == EXECUTOR_MODEL
    # The preflight's two real calls are logged once and are part of the run's cost.
    logged = read_events(state / "guidance-run" / "events.jsonl")
    calls = [e for e in logged if e["event"] == "preflight_usage"]
    assert [(e["guidance"]["calls"], e["executor"]["calls"]) for e in calls] == [(1, 1)]
    assert not (state / "guidance-run" / "preflight-usage.json").exists()
    view = load_run(state)
    total, _cost = run_cost(view, PriceTable())
    rollouts = total_usage(run_usage(view).values())
    preflight = calls[0]["guidance"]["prompt_tokens"] + calls[0]["guidance"]["completion_tokens"]
    assert preflight > 0
    assert total.guidance.total_tokens == rollouts.guidance.total_tokens + preflight
