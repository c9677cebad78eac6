"""A real Harbor 0.20 trial of the Polyomino task with `harness:HarborAgent`, without Docker.

`LocalEnvironment` (harness.run.local_environment, what run.sh uses without Docker) is a Harbor
environment whose container is a host directory, its commands run under bubblewrap; it shares
the host network and does not enforce the task's allowlist, so it stands in for the task
container, which needs Docker. Everything else is real: Harbor's Trial (agent phase, verifier
phase), the agent, `reef serve`, the local judge and the task's own verifier.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from harbor.models.trial.config import TrialConfig
from harbor.trial.trial import Trial
from judge_fakes import LocalJudge

from harness import HarborAgent
from harness.adapters.judge.frontiercs import FrontierCSScorer
from harness.archive.best import run_best
from harness.run.harbor_agent import AGENT_NAME, AgentOptions
from harness.run.local_environment import LocalEnvironment
from harness.settings.run_settings import RunSettings
from harness.storage.store import read_committed
from run import RESUME_HINT, run_episode
from tests.openai_fixture import OpenAIFixture
from tests.reef_fixtures import ReefService, running_reef
from tests.rehearsal_support import (
    GuidanceScript,
    ReefReports,
    executor_reply,
    task_dir,
    write_serve_yaml,
)


@dataclass
class Stack:
    judge: LocalJudge
    executor: OpenAIFixture
    reef: ReefService


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("harbor-stack")
    if not (task_dir() / "solution" / "seed.json").is_file():
        pytest.skip(f"{task_dir()}/solution/seed.json (the task's seed archive) is missing")
    grid = {"groups-per-step": 2, "rollouts-per-group": 2}
    every_fourth = range(3, 10_000, 4)  # exactly one malformed answer in any 4 calls in a row
    with (
        LocalJudge(root / "judge", "--generated-cases", "2", "--seed", "3") as judge,
        OpenAIFixture(GuidanceScript(malformed=every_fourth)) as guidance,
        OpenAIFixture(executor_reply) as executor,
        running_reef(root / "reef", upstream=guidance, recipe_config=grid) as reef,
    ):
        yield Stack(judge, executor, reef)


def environment_config() -> dict:
    """The trial environment: LocalEnvironment, kept after the trial for inspection."""
    return {
        "import_path": f"{LocalEnvironment.__module__}:LocalEnvironment",
        "delete": False,
        "env": {"PYTHON": sys.executable, "VERIFIER_POLL_INTERVAL_S": "0.2"},
    }


def serve_yaml(stack: Stack, root: Path, task: str = "polyomino_packing") -> RunSettings:
    return write_serve_yaml(
        root / "serve.yaml",
        state_dir=root / "state",
        reef_port=stack.reef.port,
        judge_url=stack.judge.url,
        groups=2,
        rollouts=2,
        steps=1,
        task=task,
    )


@pytest.fixture(scope="module")
def trial(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    root = tmp_path_factory.mktemp("harbor-trial")
    task = task_dir()
    settings = serve_yaml(stack, root)
    config = TrialConfig.model_validate(
        {
            "task": {"path": str(task)},
            "trials_dir": str(root / "trials"),
            "agent": {
                "name": "harness:HarborAgent",
                "model_name": "Qwen/Qwen3-8B",
                "kwargs": {
                    "serve_yaml": str(root / "serve.yaml"),
                    "task_dir": str(task),
                    "executor_url": stack.executor.v1_url,
                    "training_bridge": "tests.rehearsal_support:fake_bridge",
                    "poll_interval_s": 0.05,
                },
            },
            "environment": environment_config(),
        }
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FRONTIERCS_JUDGE_URL", stack.judge.url)  # the task verifier's judge
        result = asyncio.run(asyncio.wait_for(_run(config), 300))
    archive, _ = read_committed(settings.state_dir / "guidance-run" / "archive")
    yield {
        "result": result,
        "archive": archive,
        "container": next((root / "trials").glob("*/container")),
        "judge_url": stack.judge.url,
        "reports": ReefReports(stack.reef.url, settings.scenario).reports(),
    }


async def _run(config: TrialConfig):
    return await (await Trial.create(config)).run()


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_trial_writes_best_candidate_into_the_workspace(trial: dict) -> None:
    result = trial["result"]
    assert result.exception_info is None, result.exception_info
    # The run's best (`harness.archive.best`, one definition: ties to the earliest, the seed
    # first), which is what the agent writes out and what every report names.
    best = run_best(trial["archive"])
    assert best is not None
    written = (trial["container"] / "workspace" / "solution.cpp").read_text()
    assert written.strip() == best.solution.strip()
    # The task's verifier re-scored that file with the judge: the client's score of the file.
    rescored = FrontierCSScorer.for_task(task_dir(), trial["judge_url"], "0")(written)
    assert rescored.valid
    assert result.verifier_result.rewards["reward"] == pytest.approx(rescored.raw_score)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_trial_context_carries_the_documented_reef_fields(trial: dict) -> None:
    reef = trial["result"].agent_result.metadata["reef"]
    assert set(reef) == {
        "agent_record_ids",
        "all_agent_record_ids",
        "start_step",
        "next_step",
        "runtime_load_id",
        "step_summaries",
    }
    assert (reef["start_step"], reef["next_step"]) == (0, 1)
    assert [s["step"] for s in reef["step_summaries"]] == [0]
    receipts = [r.references[0] for r in trial["reports"]]
    well_formed = [
        e.metadata["agent_record_id"]
        for e in trial["archive"].entries.values()
        if e.timestep == 1 and e.metadata["guidance_format_ok"]
    ]
    assert sorted(reef["agent_record_ids"]) == sorted(well_formed)
    assert set(reef["agent_record_ids"]) <= set(receipts) and len(receipts) == 4
    assert len(reef["agent_record_ids"]) == 3  # guidance call 3 was malformed
    assert trial["result"].agent_info.name == AGENT_NAME
    json.dumps(trial["result"].agent_result.metadata)  # plain JSON, as Harbor stores it


def test_agent_name_and_setup_do_nothing_on_the_environment(tmp_path: Path) -> None:
    agent = HarborAgent(logs_dir=tmp_path)
    assert HarborAgent.name() == "reef-guidance-ttt"
    assert asyncio.run(agent.setup(environment=None)) is None  # type: ignore[arg-type]


def test_options_come_from_kwargs_then_environment(tmp_path: Path) -> None:
    environ = {
        "GUIDANCE_TTT_SERVE_YAML": str(tmp_path / "env.yaml"),
        "GUIDANCE_TTT_EXECUTOR_URL": "http://127.0.0.1:9/v1",
        "GUIDANCE_TTT_TRAINING_BRIDGE": "tests.rehearsal_support:fake_bridge",
    }
    options = AgentOptions.resolve({"executor_url": "http://127.0.0.1:7/v1"}, environ)
    assert options.serve_yaml == tmp_path / "env.yaml"
    assert options.executor_url == "http://127.0.0.1:7/v1"
    assert options.training_bridge == "tests.rehearsal_support:fake_bridge"
    default = AgentOptions.resolve({}, {})
    assert default.serve_yaml.name == "serve.yaml" and default.task_dir is None


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_run_py_episode_reports_a_failed_attempt_then_resumes_and_never_reruns(
    stack: Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    settings = serve_yaml(stack, tmp_path, task="episode")
    reef = ReefReports(stack.reef.url, settings.scenario)
    for name in ("GUIDANCE_TTT_SERVE_YAML", "GUIDANCE_TTT_TASK_DIR", "GUIDANCE_TTT_JUDGE_URL"):
        monkeypatch.delenv(name, raising=False)  # run.py sets them: one process per invocation
    monkeypatch.setenv("FRONTIERCS_JUDGE_URL", stack.judge.url)
    monkeypatch.setenv("GUIDANCE_TTT_EXECUTOR_URL", stack.executor.v1_url)
    serve, env = tmp_path / "serve.yaml", environment_config()

    # Attempt 1: Reef's training of step 0 fails after all four rollouts were reported.
    monkeypatch.setenv("GUIDANCE_TTT_TRAINING_BRIDGE", "tests.rehearsal_support:failing_bridge")
    assert asyncio.run(run_episode(serve, task_dir(), environment=env)) == 1
    err = capsys.readouterr().err
    assert "Reef training of step 0 failed" in err and RESUME_HINT in err
    assert len(reef.reports()) == 4 and len(reef.inferences()) == 4

    # Attempt 2, the same command once training works: resumes, runs no rollout again.
    monkeypatch.setenv("GUIDANCE_TTT_TRAINING_BRIDGE", "tests.rehearsal_support:fake_bridge")
    assert asyncio.run(run_episode(serve, task_dir(), environment=env)) == 0
    # The reference's run.py prints `episode reward: {row.rewards}` (the rewards mapping).
    assert capsys.readouterr().out.startswith("episode reward: {'reward': ")
    assert len(reef.reports()) == 4 and len(reef.inferences()) == 4
    trials = tmp_path / "state" / "lab" / "trials"
    assert len(list(trials.iterdir())) == 2

    # A finished episode is reported again, not run again.
    assert asyncio.run(run_episode(serve, task_dir(), environment=env)) == 0
    assert len(list(trials.iterdir())) == 2
