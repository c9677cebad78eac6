"""Slime and Tinker, with the run's own settings checked before the stack is assembled.

``serve.yaml`` selects ``training.backend: tttd.deployment:TTTDSlimeDeployment`` and
``serve-tinker.yaml`` ``tttd.deployment:TTTDTinkerDeployment``. Each is Reef 0.1.3's deployment
unchanged, except that ``prepare`` — which Reef calls while it resolves the file, also under
``reef serve --print-config`` — first validates ``training.config`` (and its ``harness`` section)
with the harness's own model of it; the Tinker one also refuses ``training.options`` that Reef's
Tinker backend cannot honour (``harness.settings.tinker``), naming each with the fix.

Why here: Reef keeps ``training.config`` as an opaque mapping (the experiment's training config)
and hands a recipe only the flat ``reef`` settings, so neither Reef nor the recipe's hook ever
sees a misspelt key, a LoRA rank of 0 or a judge URL that is not http(s) there. A training
deployment is the one plugin Reef gives the whole resolved file before anything starts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel
from reef.core.config import interpolate_config
from reef.train.slime_backend.launch import SlimeDeployment
from reef.train.tinker_backend.launch import TinkerDeployment

from harness.settings.document import expand_defaults
from harness.settings.serve import TrainingConfig, grid_layout_errors, section_errors
from harness.settings.tinker import TinkerOptions, TinkerTrainingConfig
from harness.validation import join


class TTTDSlimeDeployment(SlimeDeployment):
    """Reef's Slime deployment, refusing a ``training.config`` the harness would refuse."""

    def prepare(
        self, config: dict[str, Any], settings: Mapping[str, Any]
    ) -> tuple[dict[str, Any], ...]:
        """Validate the run-level settings, then prepare Slime exactly as Reef does."""
        errors = training_config_errors(config, settings.get("training_backend_options") or {})
        if errors:
            # A ValueError, so Reef names the file in front of it as for its own checks.
            raise ValueError("training.config is not valid:\n  " + join(errors))
        return super().prepare(config, settings)


class TTTDTinkerDeployment(TinkerDeployment):
    """Reef's Tinker deployment, refusing a ``training.config`` or ``training.options`` the
    harness would refuse (a Slime option, a KL coefficient of 0, ...)."""

    def prepare(
        self, config: dict[str, Any], settings: Mapping[str, Any]
    ) -> tuple[dict[str, Any], ...]:
        """Validate the run-level settings and the Tinker options, then prepare as Reef does."""
        options = _expanded(config, dict(settings.get("training_backend_options") or {}))
        errors = training_config_errors(config, {}, TinkerTrainingConfig)
        errors += section_errors(TinkerOptions, options, "training.options")
        if errors:
            raise ValueError("serve-tinker settings are not valid:\n  " + join(errors))
        return super().prepare(config, settings)


def training_config_errors(
    config: Mapping[str, Any],
    options: Mapping[str, Any],
    model: type[BaseModel] = TrainingConfig,
) -> list[str]:
    """What is wrong with ``training.config`` in Reef's resolved layout (empty when nothing is).

    Reef keeps the section at ``config["training"]`` with its ``${...}`` references in resolved
    form; they are expanded against the config, and the harness section's ``${VAR:-default}``
    (which Reef leaves as text) against the environment, as the harness reads them. Once the
    section is valid, ``num-rollout`` must equal its ``steps``.
    """
    section = _expanded(config, config.get("training", {}))
    if isinstance(section, Mapping) and isinstance(section.get("harness"), Mapping):
        section = {**section, "harness": expand_defaults(section["harness"], os.environ)}
    errors = section_errors(model, section, "training.config")
    if errors or model is not TrainingConfig:
        return errors
    steps = TrainingConfig.model_validate(section).steps
    reef = config.get("reef", {})
    grid = [reef.get(name) for name in ("groups_per_step", "rollouts_per_group")]
    if all(isinstance(value, int) for value in grid):
        return [
            error
            for error in grid_layout_errors(grid[0], grid[1], options, steps)
            if error.startswith("training.options.num-rollout")
        ]
    return []


def _expanded(config: Mapping[str, Any], value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _expanded(config, item) for key, item in value.items()}
    if isinstance(value, list):
        return [_expanded(config, item) for item in value]
    return interpolate_config(config, value) if isinstance(value, str) else value
