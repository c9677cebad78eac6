"""``serve.yaml`` is accepted by the real reef-infra 0.1.3 and agrees with the harness's reading.

Each test runs reef-infra's own CLI, ``reef serve -c <file> --print-config``, as a subprocess:
it resolves every setting (recipe class, layout, references, the recipe's batch-layout check)
and exits without starting anything.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.settings.run_settings import RunSettings, RunSettingsError

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SERVE_YAML = REPO / "serve.yaml"
#: The top-level sections reef-infra 0.1.3 accepts (docs/training.md, 'What serve.yaml holds').
ACCEPTED_SECTIONS = {
    "reef",
    "inference",
    "teacher",
    "recipe",
    "training",
    "storage",
    "execution",
    "executors",
    "evaluation",
    "pipeline",
    "generator",
    "observability",
}


def print_config(config: Path, *extra: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    reef = Path(sys.executable).parent / "reef"
    return subprocess.run(
        [str(reef), "serve", "-c", str(config), "--print-config", *extra],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def edited_copy(tmp_path: Path, **recipe_config: int) -> Path:
    """serve.yaml with some ``recipe.config`` values changed, written beside nothing else."""
    document = yaml.safe_load(SERVE_YAML.read_text())
    document["recipe"]["config"].update(recipe_config)
    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def resolved_setting(output: str, name: str) -> str:
    match = re.search(rf"^\s*{re.escape(name)} = (.*?)  \(\w[\w ]*\)$", output, re.MULTILINE)
    assert match, f"{name} missing from --print-config output:\n{output}"
    return match.group(1)


def test_reef_accepts_serve_yaml_and_resolves_the_recipe_to_this_package(tmp_path):
    result = print_config(SERVE_YAML, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert resolved_setting(result.stdout, "recipe.implementation") == "tttd.recipe:TTTDRecipe"
    assert f"recipe package resolves from {REPO}" in result.stderr
    assert resolved_setting(result.stdout, "recipe.config.groups-per-step") == "2"
    assert resolved_setting(result.stdout, "recipe.config.rollouts-per-group") == "4"
    assert resolved_setting(result.stdout, "training.colocate") == "true"
    # Nothing was started: no state appeared where reef ran.
    assert list(tmp_path.iterdir()) == []


def test_serve_yaml_uses_only_sections_reef_0_1_3_accepts():
    document = yaml.safe_load(SERVE_YAML.read_text())
    assert set(document) <= ACCEPTED_SECTIONS
    assert "schema-version" not in document
    assert "backend-factory" not in document["inference"]
    assert "colocate" not in document["training"]["options"]


def test_reef_and_the_harness_resolve_the_same_grid_limits_and_sizes(tmp_path):
    result = print_config(SERVE_YAML, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    options = json.loads(resolved_setting(result.stdout, "training.options"))
    settings = RunSettings.load(SERVE_YAML, environ={}, base_dir=tmp_path)
    assert int(options["rollout-batch-size"]) == settings.groups_per_step == 2
    assert int(options["n-samples-per-prompt"]) == settings.rollouts_per_group == 4
    assert int(options["global-batch-size"]) == settings.rollouts_per_step == 8
    assert int(options["num-rollout"]) == settings.steps
    assert int(options["rollout-max-response-len"]) == settings.guidance_max_tokens == 8192
    assert int(options["rollout-max-context-len"]) == settings.sequence_length == 12288
    assert int(options["seq-length"]) == settings.sequence_length
    assert int(options["megatron-lora-rank"]) == settings.lora_rank == 32
    assert int(options["tensor-model-parallel-size"]) == settings.megatron_tensor_parallel_size == 2
    assert (
        resolved_setting(result.stdout, "inference.tensor-parallel-size")
        == str(settings.inference_tensor_parallel_size)
        == "1"
    )
    assert tmp_path / options["save"] == settings.megatron_checkpoint_dir
    assert resolved_setting(result.stdout, "reef.port") == str(settings.reef_port) == "8900"
    assert resolved_setting(result.stdout, "training.ray-actor-name") == settings.ray_actor_name
    assert resolved_setting(result.stdout, "training.ray-namespace") == settings.ray_namespace
    assert tmp_path / resolved_setting(result.stdout, "reef.run-dir") == settings.run_dir


def test_editing_g_without_global_batch_size_is_refused_before_anything_starts(tmp_path):
    edited = edited_copy(tmp_path, **{"groups-per-step": 8})
    result = print_config(edited, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert (
        "global-batch-size is 8 but groups-per-step × rollouts-per-group = 8 × 4 = 32"
        in result.stderr
    )
    assert "set training.options.global-batch-size: 32" in result.stderr
    assert "resolved settings" not in result.stdout
    # The harness refuses the same file with the same words.
    with pytest.raises(
        RunSettingsError, match=r"8 × 4 = 32; set training.options.global-batch-size: 32"
    ):
        RunSettings.load(edited, environ={}, base_dir=tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["serve.yaml"]


def test_the_same_refusal_applies_to_a_command_line_override(tmp_path):
    result = print_config(SERVE_YAML, "--recipe.config.rollouts-per-group", "16", cwd=tmp_path)
    assert result.returncode == 2
    assert "2 × 16 = 32" in result.stderr


def test_the_documented_8x16_experiment_edit_is_accepted(tmp_path):
    document = yaml.safe_load(SERVE_YAML.read_text())
    document["recipe"]["config"].update({"groups-per-step": 8, "rollouts-per-group": 16})
    document["training"]["options"]["global-batch-size"] = 128
    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    result = print_config(path, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    options = json.loads(resolved_setting(result.stdout, "training.options"))
    assert (options["rollout-batch-size"], options["n-samples-per-prompt"]) == ("8", "16")
    settings = RunSettings.load(path, environ={}, base_dir=tmp_path)
    assert settings.rollouts_per_step == 128
