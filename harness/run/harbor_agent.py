"""`harness:HarborAgent`: one Harbor trial owns one whole Guidance-TTT run (docs/design.md §8).

The only module that imports `harbor`. The search runs on the host, not in the task container:
`run()` reads the run settings from `serve.yaml`, starts the run through the one run assembly
(`harness.run.assembly`: the real adapters — Reef, the configured executor backend, the judge,
Reef's training bridge — and the run's sinks), runs or resumes the steps up to STEPS in a
worker thread, writes the best archived candidate to the task's `solution_path` (task.toml;
default `/workspace/solution.<ext>`) in the task environment (one `exec` of a here-document, as
the reference), and fills
`context.metadata["reef"]`. The task's verifier then re-scores that file (evaluation only;
never reported to training).

Configuration (agent kwargs win over environment variables, which win over the defaults):

| kwarg             | environment variable            | default                              |
|-------------------|---------------------------------|--------------------------------------|
| `serve_yaml`      | `GUIDANCE_TTT_SERVE_YAML`       | `serve.yaml` at the repository root  |
| `task_dir`        | `GUIDANCE_TTT_TASK_DIR`         | the settings' task (name or path)    |
| `executor_url`    | `GUIDANCE_TTT_EXECUTOR_URL`     | the backend's own URL                |
| `judge_url`       | `GUIDANCE_TTT_JUDGE_URL`        | serve.yaml's judge_url               |
| `training_bridge` | `GUIDANCE_TTT_TRAINING_BRIDGE`  | Reef's Ray bridge (runtime.yaml)     |
| `poll_interval_s` | -                               | 2.0 (training barrier poll)          |

How many rollouts run at once and how many executor requests may be in flight are run settings,
read from serve.yaml like every other (`max_rollout_workers`, `executor_max_in_flight`).

Relative paths inside serve.yaml are taken from the repository root, wherever the file lies
(where `run.sh` starts `reef serve`; docs/running.md). `judge_url` exists because the host
and the task container reach the same judge by different addresses (`127.0.0.1` vs
`host.docker.internal`): `run.py` pins the host's view here and gives the container its own
through `FRONTIERCS_JUDGE_URL`. `training_bridge` is a `module:callable` import path; the
callable takes the `RunSettings` and returns a `TrainingBridge` (the CPU rehearsal plugs its
fake in here).
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import importlib.metadata
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harbor.agents.base import BaseAgent
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext

from harness.adapters.executor.client import require_api_key
from harness.adapters.reef.training_bridge import TrainingBridge
from harness.contract import load_harbor_task
from harness.run.assembly import AssemblyOptions, assemble_and_run
from harness.run.candidate_file import write_candidate
from harness.run.services import executor_backend
from harness.run.step_loop import RunResult
from harness.settings.run_settings import DEFAULT_SERVE_YAML, RunSettings
from harness.settings.task_dirs import task_dir_of

__all__ = [
    "AGENT_NAME",
    "AgentOptions",
    "HarborAgent",
    "load_bridge_factory",
]

AGENT_NAME = "reef-guidance-ttt"


@dataclass(frozen=True)
class AgentOptions:
    """The agent's resolved configuration (see the module docstring for the sources)."""

    serve_yaml: Path
    task_dir: Path | None
    executor_url: str | None
    judge_url: str | None
    training_bridge: str | None
    poll_interval_s: float | None

    @classmethod
    def resolve(cls, kwargs: Mapping[str, Any], environ: Mapping[str, str]) -> AgentOptions:
        """Kwargs first, then `GUIDANCE_TTT_*` environment variables, then defaults."""

        def pick(key: str) -> Any:
            value = kwargs.get(key)
            return (
                value
                if value not in (None, "")
                else environ.get(f"GUIDANCE_TTT_{key.upper()}") or None
            )

        task_dir = pick("task_dir")
        poll = kwargs.get("poll_interval_s")
        return cls(
            serve_yaml=Path(pick("serve_yaml") or DEFAULT_SERVE_YAML).expanduser().resolve(),
            task_dir=Path(task_dir).expanduser().resolve() if task_dir else None,
            executor_url=pick("executor_url"),
            judge_url=pick("judge_url"),
            training_bridge=pick("training_bridge"),
            poll_interval_s=float(poll) if poll is not None else None,
        )


def load_bridge_factory(reference: str) -> Any:
    """Import a `module:callable` training-bridge factory; errors name the reference."""
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"training_bridge {reference!r} must be 'module:callable'")
    factory = getattr(importlib.import_module(module_name), attribute, None)
    if not callable(factory):
        raise ValueError(f"training_bridge {reference!r} does not name a callable")
    return factory


class HarborAgent(BaseAgent):
    """A Harbor agent whose `run()` is a whole Guidance-TTT run on the host (see module doc)."""

    def __init__(
        self,
        logs_dir: Path,
        model_name: str | None = None,
        logger: Any = None,
        *args: Any,
        serve_yaml: str | None = None,
        task_dir: str | None = None,
        executor_url: str | None = None,
        judge_url: str | None = None,
        training_bridge: str | None = None,
        poll_interval_s: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(logs_dir, model_name, logger, *args, **kwargs)
        self.options = AgentOptions.resolve(
            {
                "serve_yaml": serve_yaml,
                "task_dir": task_dir,
                "executor_url": executor_url,
                "judge_url": judge_url,
                "training_bridge": training_bridge,
                "poll_interval_s": poll_interval_s,
            },
            os.environ,
        )

    @staticmethod
    def name() -> str:
        return AGENT_NAME

    def version(self) -> str | None:
        try:
            return importlib.metadata.version("guidance-ttt")
        except importlib.metadata.PackageNotFoundError:
            return None

    async def setup(self, environment: BaseEnvironment) -> None:
        """Nothing to install: the search runs on the host, not in the task container."""
        return None

    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        """Run (or resume) the steps up to STEPS, then put the best candidate into the task
        environment and the run's Reef facts into `context.metadata["reef"]`."""
        settings = RunSettings.load(self.options.serve_yaml)
        if self.options.judge_url:
            settings = dataclasses.replace(settings, judge_url=self.options.judge_url)
        if self.model_name and self.model_name != settings.model:
            raise ValueError(
                f"agent model_name {self.model_name!r} differs from serve.yaml "
                f"training.config.model {settings.model!r}; serve.yaml is the source of truth"
            )
        # A missing executor key stops the trial here, before any step (one line naming it).
        require_api_key(executor_backend(settings, self.options.executor_url))
        task_dir = self.options.task_dir or task_dir_of(settings)
        result = await asyncio.to_thread(self._run_steps, settings, task_dir, instruction)
        context.metadata = {**(context.metadata or {}), "reef": result.reef_metadata()}
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        (self.logs_dir / "reef.json").write_text(json.dumps(result.reef_metadata(), indent=2))
        await self._write_best(environment, result, task_dir)

    def _run_steps(self, settings: RunSettings, task_dir: Path, problem: str) -> RunResult:
        bridge: TrainingBridge | None = None
        if self.options.training_bridge:
            bridge = load_bridge_factory(self.options.training_bridge)(settings)
        overrides = {}
        if self.options.poll_interval_s is not None:
            overrides["poll_interval_s"] = self.options.poll_interval_s
        how = AssemblyOptions(
            executor_url=self.options.executor_url, bridge=bridge, controller_overrides=overrides
        )
        return assemble_and_run(settings, task_dir, problem, how)

    async def _write_best(
        self, environment: BaseEnvironment, result: RunResult, task_dir: Path
    ) -> None:
        """Write the best archived candidate to the task's `solution_path` (task.toml's
        `[metadata]`, default `/workspace/solution.<ext>`) through `environment.exec`, as the
        reference does (`harness.run.candidate_file`)."""
        if result.best is None or not result.best.solution.strip():
            raise RuntimeError("the archive holds no candidate to write out")
        target = load_harbor_task(task_dir).solution_path
        await write_candidate(environment, target, result.best.solution)
        self.logger.info(
            "best candidate (raw score %s) written to %s", result.best.verifier_raw_score, target
        )
