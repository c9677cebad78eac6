"""The tttd recipe wiring, built through Reef's own recipe registry."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from reef.recipe.base import WeightTrainingSpec
from reef.recipe.errors import RecipeConfigError
from reef.recipe.registry import build_recipe, recipe_class_for

from tttd.batches import StepBatches
from tttd.grouping import StepRecords
from tttd.recipe import TTTDRecipe, TTTDReportsRecipe
from tttd.report import grid_report_type
from tttd.samples import RolloutSamples

REPO = Path(__file__).resolve().parents[2]


def build_reports_recipe(**grid: object) -> TTTDReportsRecipe:
    recipe = build_recipe(
        "tttd.recipe:TTTDReportsRecipe",
        environ={},
        config={"implementation": "tttd.recipe:TTTDReportsRecipe", "data": dict(grid)},
    )
    assert isinstance(recipe, TTTDReportsRecipe)
    return recipe


def test_record_only_recipe_binds_the_configured_grid_into_its_report_contract():
    recipe = build_reports_recipe(**{"groups-per-step": 8, "rollouts-per-group": 16})
    assert recipe.report_type is grid_report_type(8, 16)


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        ({"groups-per-step": 2}, "rollouts_per_group is required"),
        ({"rollouts-per-group": 4}, "groups_per_step is required"),
        (
            {"groups-per-step": 2, "rollouts-per-group": 1},
            "recipe.config.rollouts-per-group: must be ≥ 2, got 1",
        ),
        (
            {"groups-per-step": 0, "rollouts-per-group": 4},
            "recipe.config.groups-per-step: must be ≥ 1, got 0",
        ),
        ({"groups-per-step": 2, "rollouts-per-group": 4, "batch-size": 3}, "batch_size"),
    ],
)
def test_recipe_refuses_a_missing_or_impossible_grid(grid, message):
    with pytest.raises(RecipeConfigError, match=message):
        build_reports_recipe(**grid)


def test_weight_training_recipe_declares_the_tttd_pipeline_objective_and_schedule():
    assert recipe_class_for("tttd.recipe:TTTDRecipe") is TTTDRecipe
    spec = TTTDRecipe.training_spec()
    assert isinstance(spec, WeightTrainingSpec)
    assert spec.loss_family == "tttd"
    # One optimizer step over every sample of the step's batch, one pass.
    assert (spec.scheduling.unit, spec.scheduling.batch_size, spec.scheduling.epochs) == (
        "sample",
        "actual",
        1,
    )
    stages = TTTDRecipe.pipeline_spec()
    assert (stages.record2record, stages.record2task, stages.task2batch) == (
        StepRecords,
        RolloutSamples,
        StepBatches,
    )


def flat_settings(**changes: object) -> dict[str, object]:
    """The flat ``reef`` section Reef hands the recipe hook, references not yet expanded."""
    settings: dict[str, object] = {
        "recipe": "tttd.recipe:TTTDRecipe",
        "groups_per_step": 2,
        "rollouts_per_group": 4,
        "training_backend_options": {
            "global-batch-size": 8,
            "rollout-batch-size": "${reef.groups_per_step}",
            "n-samples-per-prompt": "${reef.rollouts_per_group}",
        },
    }
    settings.update(changes)
    return settings


def test_consistent_layout_selects_the_recipe_for_weight_training():
    selected = TTTDRecipe.select_weight_training(flat_settings())
    assert selected is not None and selected[0] is TTTDRecipe


def test_edited_grid_without_global_batch_size_is_refused_with_both_values_and_the_fix():
    with pytest.raises(RecipeConfigError) as refused:
        TTTDRecipe.select_weight_training(flat_settings(groups_per_step=8, rollouts_per_group=16))
    message = str(refused.value)
    assert "global-batch-size is 8" in message
    assert "8 × 16 = 128" in message
    assert "set training.options.global-batch-size: 128" in message


def test_a_literal_rollout_batch_size_that_disagrees_is_refused():
    options = {**flat_settings()["training_backend_options"], "rollout-batch-size": 4}  # type: ignore[dict-item]
    with pytest.raises(RecipeConfigError, match="rollout-batch-size is 4 but groups-per-step = 2"):
        TTTDRecipe.select_weight_training(flat_settings(training_backend_options=options))


def test_importing_the_recipe_and_building_the_service_side_never_imports_torch():
    code = (
        "import sys\n"
        "from reef.recipe.registry import build_recipe, recipe_class_for\n"
        "recipe_class_for('tttd.recipe:TTTDRecipe').training_spec().loss_family\n"
        "build_recipe('tttd.recipe:TTTDReportsRecipe', environ={}, config={'implementation': 'x',"
        " 'data': {'groups-per-step': 2, 'rollouts-per-group': 4}})\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr


def test_serve_yaml_trains_with_reefs_slime_deployment_unchanged_but_for_the_check():
    from reef.service.deploy.training import training_deployment_for
    from reef.train.slime_backend.launch import SlimeDeployment

    from tttd.deployment import TTTDSlimeDeployment

    backend = yaml.safe_load((REPO / "serve.yaml").read_text())["training"]["backend"]
    deployment = training_deployment_for(backend)
    assert type(deployment) is TTTDSlimeDeployment and isinstance(deployment, SlimeDeployment)
    # Only prepare() is ours; what the driver and the service call is Reef's own.
    for name in ("create_training_plan", "runtime_config"):
        assert getattr(TTTDSlimeDeployment, name) is getattr(SlimeDeployment, name)
    assert deployment.requires_local_model and deployment.supports_teacher_engine
