"""The tttd recipe: wiring and settings.

``TTTDRecipe`` is the weight-training recipe ``serve.yaml`` selects. Its settings are the step
grid (``groups-per-step`` G, ``rollouts-per-group`` R) and Reef's own
``checkpoint-every-n-versions``. The grid is bound into the report contract, so Reef's ingress
refuses a report for another grid, and the pipeline stages read their grid from that contract.

``TTTDReportsRecipe`` is the same contract without training: Reef records and validates tttd
reports against an OpenAI-compatible upstream. It is what runs on a machine without GPUs (the
loopback tests and the CPU rehearsal).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reef.core.config import interpolate_config
from reef.core.reports import ReportBase
from reef.recipe.base import Recipe, WeightTrainingRecipe, WeightTrainingSpec
from reef.recipe.config_fields import config_field
from reef.recipe.errors import RecipeConfigError
from reef.train.algos import StepScheduling
from reef.train.pipeline import PipelineSpec

from harness.settings.document import expand_defaults
from harness.settings.serve import (
    InferenceSection,
    RecipeConfig,
    ReefSection,
    grid_layout_errors,
    section_errors,
)
from harness.settings.tinker import is_tinker_backend
from harness.validation import MISSING
from tttd.batches import StepBatches
from tttd.grouping import StepRecords
from tttd.objective import TTTDObjective
from tttd.report import grid_report_type
from tttd.samples import RolloutSamples

#: Where Reef's flat ``reef`` settings come from in ``serve.yaml``: each public section, its
#: model in ``harness.settings.serve``, and the flat keys Reef keeps it under.
GRID_KEYS = ("groups_per_step", "rollouts_per_group")
SERVE_SECTIONS = (
    (
        "recipe.config",
        RecipeConfig,
        ("groups_per_step", "rollouts_per_group", "checkpoint_every_n_versions"),
    ),
    ("reef", ReefSection, ("host", "port", "token")),
    ("inference", InferenceSection, ("model_path", "tensor_parallel_size")),
)

#: The objective by dotted reference, so any process (the service, the driver, the training
#: bridge) resolves it by importing ``tttd.objective``, which registers it as ``tttd``.
OBJECTIVE_REFERENCE = f"{TTTDObjective.__module__}:{TTTDObjective.__name__}"


@dataclass(frozen=True, kw_only=True)
class StepGrid:
    """The G×R grid of one training step, as recipe settings, and the contract bound to it."""

    groups_per_step: int = config_field(
        help="G: comparison groups (parents) per step; each is one relative-reward set."
    )
    rollouts_per_group: int = config_field(
        help="R: rollouts per group (at least 2); one optimizer step trains the G·R grid."
    )

    def __post_init__(self) -> None:
        # Refuses a grid no report could fill before any stage is built, in run.py's words.
        grid = {key: getattr(self, key) for key in GRID_KEYS}
        errors = section_errors(RecipeConfig, grid, "recipe.config")
        refuse_if_any(type(self), errors)
        super().__post_init__()  # type: ignore[misc]

    @property
    def report_type(self) -> type[ReportBase]:
        """The tttd report contract bound to this grid."""
        return grid_report_type(self.groups_per_step, self.rollouts_per_group)


def refuse_if_any(owner: type, errors: list[str]) -> None:
    """Refuse the settings with every error on its own line, after the refusing class's name."""
    if errors:
        raise RecipeConfigError(f"{owner.__name__}: " + "\n  ".join(errors))


def _setting(config: Mapping[str, Any], value: Any) -> Any:
    """A flat-section value with its ``${reef.*}`` references expanded against that section."""
    return interpolate_config({"reef": config}, value) if isinstance(value, str) else value


@dataclass(frozen=True, kw_only=True)
class TTTDRecipe(StepGrid, WeightTrainingRecipe):
    """Adaptive-β leave-one-out entropic advantages, one optimizer step per G×R step."""

    name: str = "tttd"

    @classmethod
    def training_spec(cls) -> WeightTrainingSpec:
        """The tttd objective, one optimizer step over every sample of the batch."""
        return WeightTrainingSpec(
            objective=OBJECTIVE_REFERENCE,
            scheduling=StepScheduling(unit="sample", batch_size="actual"),
        )

    @classmethod
    def pipeline_spec(cls) -> PipelineSpec:
        """Records → step sets → samples → one batch per step."""
        return PipelineSpec(
            record2record=StepRecords, record2task=RolloutSamples, task2batch=StepBatches
        )

    @classmethod
    def select_weight_training(
        cls, config: Mapping[str, Any]
    ) -> tuple[type[WeightTrainingRecipe], Mapping[str, Any]] | None:
        """Refuse settings the run would refuse, then train with this class.

        Reef calls this hook with the flat ``reef`` settings (the recipe's fields, the service's
        host and port, the inference sizes and the backend's native
        ``training_backend_options``) before it starts anything, including under
        ``reef serve --print-config``. They are checked with the harness's own models of those
        sections, and Slime's batch layout against the grid, so a wrong value stops the
        deployment here with the key, the value and the fix — the words ``run.py`` uses.
        """
        errors = settings_errors(config)
        refuse_if_any(cls, errors)
        return super().select_weight_training(config)


def settings_errors(config: Mapping[str, Any]) -> list[str]:
    """What is wrong with Reef's flat ``reef`` settings for a tttd run (empty when nothing is).

    Each section is validated with its model from ``harness.settings.serve``; the batch layout is
    compared with the grid only once the grid itself is valid.
    """
    errors: list[str] = []
    for where, model, keys in SERVE_SECTIONS:
        section = {
            key: _setting(config, config[key]) for key in keys if config.get(key) is not None
        }
        found = section_errors(model, section, where)
        if where != "recipe.config":  # Reef fills its own sections' unset keys with its defaults
            found = [line for line in found if not line.endswith(MISSING)]
        errors += found
    options = config.get("training_backend_options")
    # Slime's batch layout only: Tinker lays out one optimizer batch per step itself, and its
    # options are checked by tttd.deployment.TTTDTinkerDeployment.
    slime = not is_tinker_backend(config.get("training_backend"))
    if not errors and slime and isinstance(options, Mapping):
        expanded = {name: _setting(config, value) for name, value in options.items()}
        groups = int(_setting(config, config["groups_per_step"]))
        rollouts = int(_setting(config, config["rollouts_per_group"]))
        errors += grid_layout_errors(groups, rollouts, expanded)
    return errors


@dataclass(frozen=True, kw_only=True)
class TTTDReportsRecipe(StepGrid, Recipe):
    """The tttd report contract on a record-only service: validates and stores, trains nothing.

    ``guidance-ttt`` holds a frozen-guidance run's settings (``serve-frozen.yaml``); Reef keeps
    them with the recipe's settings and only the harness reads them
    (``harness/settings/frozen.py``)."""

    name: str = "tttd-reports"
    guidance_ttt: dict[str, Any] = config_field(  # noqa: RUF009 (a dataclass field, as above)
        default_factory=dict,
        help="Frozen-guidance run settings, read by the harness only (serve-frozen.yaml).",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        errors = frozen_run_errors(self.guidance_ttt)
        refuse_if_any(type(self), errors)

    @classmethod
    def select_weight_training(
        cls, config: Mapping[str, Any]
    ) -> tuple[type[WeightTrainingRecipe], Mapping[str, Any]] | None:
        """Refuse a frozen run's settings the harness would refuse; train nothing.

        Reef calls this hook for every recipe while it resolves the file, before anything
        starts, including under ``reef serve --print-config``: a wrong ``guidance-ttt`` value is
        refused there with the key and the value, as ``run.py`` and the harness refuse it.
        """
        data = config.get("data")  # a record-only recipe's settings, as Reef passes them
        data = data if isinstance(data, Mapping) else {}
        grid = {key: _setting(config, data[key]) for key in GRID_KEYS if key in data}
        errors = section_errors(RecipeConfig, grid, "recipe.config")
        section = data.get("guidance_ttt")
        if isinstance(section, Mapping):
            expanded = {key: _setting(config, value) for key, value in section.items()}
            errors += frozen_run_errors(expanded)
        refuse_if_any(cls, errors)
        return super().select_weight_training(config)


def frozen_run_errors(section: Mapping[str, Any] | None) -> list[str]:
    """What is wrong with a frozen run's ``recipe.config.guidance-ttt`` (empty when nothing is,
    or when there is no such section: a record-only service without a harness run)."""
    if not section:
        return []
    from harness.settings.frozen import FrozenRun  # the harness's model, loaded only when used

    settings = expand_defaults(dict(section), os.environ)
    return section_errors(FrozenRun, settings, "recipe.config.guidance-ttt")
