"""A real Harbor 0.20 trial of the Polyomino task with `harness:HarborAgent`, without Docker.

`LocalEnvironment` (below) is a Harbor environment whose container is a host directory: files
are copied in and out, and `exec` runs `bash -c` under bubblewrap with the directory's top-level
entries (`/workspace`, `/logs`, `/tests`, ...) bound over a read-only view of the host system.
It shares the host network (the verifier must reach the local judge) and declares Harbor's
allowlist capabilities without enforcing them: it is a test stand-in for the task container,
which needs Docker. Everything else is real: Harbor's Trial (agent phase, verifier phase), the
agent, `reef serve`, the local judge and the task's own verifier.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePath

import pytest
from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import EnvironmentCapabilities
from harbor.models.trial.config import TrialConfig
from harbor.trial.trial import Trial
from judge_fakes import LocalJudge

from harness import HarborAgent
from harness.adapters.judge.frontiercs import FrontierCSScorer
from harness.run.harbor_agent import AGENT_NAME, AgentOptions
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

SYSTEM_SKIP = {"proc", "dev", "sys", "tmp"}


class LocalEnvironment(BaseEnvironment):
    """A Harbor environment on the host: the container's files live in `<trial>/container`, and
    commands run under bubblewrap (see the module docstring for what is and is not isolated)."""

    @staticmethod
    def type() -> str:
        return "local-bubblewrap-test"

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        return EnvironmentCapabilities(network_allowlist=True, network_allowlist_hostnames=True)

    def _validate_definition(self) -> None:
        if shutil.which("bwrap") is None:
            raise FileNotFoundError("LocalEnvironment needs bubblewrap (bwrap) on PATH")

    @property
    def root(self) -> Path:
        return self.trial_paths.trial_dir / "container"

    def host_path(self, path: str | PurePath) -> Path:
        """Where a container path lives on the host."""
        return self.root / str(path).lstrip("/")

    async def start(self, force_build: bool) -> None:
        for directory in ("workspace", "logs/agent", "logs/verifier", "logs/artifacts", "tmp"):
            (self.root / directory).mkdir(parents=True, exist_ok=True)

    async def stop(self, delete: bool) -> None:
        if delete:
            shutil.rmtree(self.root, ignore_errors=True)

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        target = self.host_path(target_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source_path, target)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        shutil.copytree(source_dir, self.host_path(target_dir), dirs_exist_ok=True)

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.host_path(source_path), target_path)

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        shutil.copytree(self.host_path(source_dir), target_dir, dirs_exist_ok=True)

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        mine = {p.name for p in self.root.iterdir()}
        args = ["bwrap", "--die-with-parent", "--proc", "/proc", "--dev", "/dev"]
        for entry in Path("/").iterdir():
            if entry.name in SYSTEM_SKIP or entry.name in mine:
                continue
            if entry.is_symlink():
                args += ["--symlink", os.readlink(entry), str(entry)]
            else:
                args += ["--ro-bind", str(entry), str(entry)]
        for name in sorted(mine):
            args += ["--bind", str(self.root / name), f"/{name}"]
        # The test's interpreter (the verifier's PYTHON) stays reachable wherever the checkout
        # lives, also under a top-level folder the container shadows or skips (e.g. /tmp).
        for prefix in sorted({sys.prefix, sys.base_prefix}):
            args += ["--ro-bind", prefix, prefix]
        for key, value in (self._merge_env(env) or {}).items():
            args += ["--setenv", key, value]
        args += ["--chdir", cwd or "/", "bash", "-c", command]
        process = await asyncio.create_subprocess_exec(
            *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        try:
            out, err = await asyncio.wait_for(process.communicate(), timeout_sec)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise
        return ExecResult(
            stdout=out.decode(errors="replace"),
            stderr=err.decode(errors="replace"),
            return_code=process.returncode or 0,
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
        "import_path": f"{__name__}:LocalEnvironment",
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
    best = trial["archive"].best_entry()
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
    assert capsys.readouterr().out.startswith("reward: ")
    assert len(reef.reports()) == 4 and len(reef.inferences()) == 4
    trials = tmp_path / "state" / "lab" / "trials"
    assert len(list(trials.iterdir())) == 2

    # A finished episode is reported again, not run again.
    assert asyncio.run(run_episode(serve, task_dir(), environment=env)) == 0
    assert len(list(trials.iterdir())) == 2
