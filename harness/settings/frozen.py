"""Frozen-guidance mode's settings file (``serve-frozen.yaml``): its schema.

``harness.settings.run_settings`` builds the run's ``RunSettings`` from it, beside the trained-mode
builder.

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
(``harness.settings.serve``; the ``harness`` section is the same model). The training-only
settings (LoRA rank, TP size, checkpoints, Ray) are None or 0: a frozen run trains nothing, and
its identity records ``mode: frozen`` so it never resumes a trained run's state or the other way
round.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from harness.settings.document import FROZEN_SECTION
from harness.settings.observability import ObservabilitySection
from harness.settings.serve import (
    ReefOwned,
    ReefSection,
    RunConfig,
    Text,
    Url,
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
    observability: ObservabilitySection = ObservabilitySection()

    @model_validator(mode="after")
    def _nothing_to_train(self) -> FrozenServeSettings:
        if self.training is not None:
            raise ValueError(
                "training: a frozen run trains nothing, so it has no training section (Reef "
                "refuses one without a weight-training recipe); its settings live under "
                + ".".join(FROZEN_SECTION)
            )
        return self
