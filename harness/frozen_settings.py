"""Frozen-guidance mode's settings file (``serve-frozen.yaml``) read into ``RunSettings``.

A frozen run is the same loop as a trained one without training: the guidance model is any
OpenAI-compatible endpoint (an API model or a local server) that Reef proxies in record-only
mode (``tttd.recipe:TTTDReportsRecipe``: real receipts, tttd report validation, stored records,
no training). ``reef serve -c serve-frozen.yaml`` starts that service; Reef 0.1.3 refuses a
``training`` section without a weight-training recipe, so the run settings live in
``recipe.config.guidance-ttt``, a setting of the record-only recipe that only the harness reads:

    recipe:
      implementation: tttd.recipe:TTTDReportsRecipe
      config:
        groups-per-step: 2
        rollouts-per-group: 4
        guidance-ttt:
        mode: frozen                 # required, and only `frozen` is accepted here
        task: <task>                 # a directory under harbor/
        model: ${inference.upstream-model}
        steps: 3
        max_response_len: 8192       # guidance tokens per call
        context_length: 12288
        state_dir: work/<task>-frozen
        harness: {executor_backend, gpt_oss_reasoning_effort, judge_url, judge_problem_id}

(the keys under ``guidance-ttt`` are indented two more levels in the real file). The grid is
``recipe.config`` as in ``serve.yaml``. The rules are pydantic models, as for ``serve.yaml``
(``harness.serve_settings``; the ``harness`` section is the same model). The training-only
settings (LoRA rank, TP size, checkpoints, Ray) are None or 0: a frozen run trains nothing, and
its identity records ``mode: frozen`` so it never resumes a trained run's state or the other way
round.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from harness.run_settings import RunSettings
from harness.serve_document import FROZEN_SECTION, ServeDocument
from harness.serve_settings import (
    ReefOwned,
    ReefSection,
    RunConfig,
    Text,
    Url,
    validate_document,
)
from harness.validation import Integer, Section

#: The record-only recipe a frozen file must select (Reef trains nothing with it).
FROZEN_RECIPE = "tttd.recipe:TTTDReportsRecipe"


class FrozenRun(RunConfig):
    """``recipe.config.guidance-ttt``: the frozen run's own settings (read by the harness only)."""

    mode: Literal["frozen"]


class FrozenRecipeConfig(ReefOwned):
    """``recipe.config``: the step grid and the run's settings."""

    groups_per_step: Integer = Field(ge=1)
    rollouts_per_group: Integer = Field(ge=2)
    guidance_ttt: FrozenRun


class FrozenRecipe(ReefOwned):
    """``recipe``: the record-only recipe and its settings."""

    implementation: Text
    config: FrozenRecipeConfig

    @field_validator("implementation")
    @classmethod
    def _record_only(cls, value: str) -> str:
        if value != FROZEN_RECIPE:
            raise ValueError(f"a frozen run needs Reef's record-only recipe: {FROZEN_RECIPE}")
        return value


class FrozenInference(ReefOwned):
    """``inference``: the OpenAI-compatible guidance endpoint Reef proxies."""

    upstream_url: Url
    upstream_model: Text

    @field_validator("upstream_url")
    @classmethod
    def _without_v1(cls, value: str) -> str:
        if value.rstrip("/").endswith("/v1"):
            raise ValueError("must not end in /v1: Reef adds it (give http://host:port)")
        return value.rstrip("/")


class FrozenServeSettings(Section):
    """Every section of a frozen settings file the harness reads."""

    model_config = Section.model_config | {"extra": "ignore"}

    reef: ReefSection = ReefSection()
    inference: FrozenInference
    recipe: FrozenRecipe
    training: dict | None = None

    @model_validator(mode="after")
    def _nothing_to_train(self) -> FrozenServeSettings:
        if self.training is not None:
            raise ValueError(
                "training: a frozen run trains nothing, so it has no training section (Reef "
                "refuses one without a weight-training recipe); its settings live under "
                + ".".join(FROZEN_SECTION)
            )
        return self


def frozen_settings(document: ServeDocument, config_path: Path, base: Path) -> RunSettings:
    """The ``RunSettings`` of a frozen settings file; errors name every wrong key."""
    serve = validate_document(document, config_path, FrozenServeSettings)

    def absolute(value: str) -> Path:
        path = Path(os.path.expanduser(value))
        return path if path.is_absolute() else (base / path).resolve()

    grid, run = serve.recipe.config, serve.recipe.config.guidance_ttt
    token = serve.reef.token
    return RunSettings(
        config_path=config_path,
        task=run.task,
        model=run.model,
        model_path=None,
        groups_per_step=grid.groups_per_step,
        rollouts_per_group=grid.rollouts_per_group,
        steps=run.steps,
        checkpoint_every_n_versions=0,
        guidance_max_tokens=run.max_response_len,
        sequence_length=run.context_length,
        lora_rank=0,
        inference_tensor_parallel_size=0,
        megatron_tensor_parallel_size=0,
        reef_host=serve.reef.host,
        reef_port=serve.reef.port,
        reef_token=(str(token).strip() or None) if token is not None else None,
        run_dir=absolute(serve.reef.run_dir),
        state_dir=absolute(run.state_dir),
        checkpoint_dir=None,
        megatron_checkpoint_dir=None,
        hf_checkpoint_template=None,
        ray_actor_name=None,
        ray_namespace=None,
        executor_backend=run.harness.executor_backend,
        gpt_oss_reasoning_effort=run.harness.gpt_oss_reasoning_effort,
        judge_url=run.harness.judge_url,
        judge_problem_id=run.harness.judge_problem_id,
        seed_file=run.harness.seed,
        max_rollout_workers=run.harness.max_rollout_workers,
        executor_max_in_flight=run.harness.executor_max_in_flight,
        startup_deadline_s=run.harness.startup_deadline_s,
        mode="frozen",
        guidance_upstream_url=serve.inference.upstream_url,
    )
