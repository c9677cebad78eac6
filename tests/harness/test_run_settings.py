"""``RunSettings``: serve.yaml read once, interpolated like Reef, checked, and secret-safe."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.settings.run_settings import (
    DEFAULT_SERVE_YAML,
    RunSettings,
    RunSettingsError,
    ServeDocument,
)
from harness.storage.resume_state import RunIdentity

SERVE = yaml.safe_load(DEFAULT_SERVE_YAML.read_text())


def write(tmp_path: Path, document: dict[str, Any]) -> Path:
    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def variant(tmp_path: Path, edit) -> Path:
    document = copy.deepcopy(SERVE)
    edit(document)
    return write(tmp_path, document)


def test_repository_serve_yaml_gives_the_qualification_settings(tmp_path):
    settings = RunSettings.load(DEFAULT_SERVE_YAML, environ={}, base_dir=tmp_path)
    assert (settings.groups_per_step, settings.rollouts_per_group, settings.steps) == (2, 4, 1)
    assert settings.rollouts_per_step == 8
    assert (settings.guidance_max_tokens, settings.sequence_length) == (8192, 12288)
    assert settings.lora_rank == 32
    # The reference's topology: SGLang TP 1 (one engine per GPU), Megatron TP 2.
    assert (settings.inference_tensor_parallel_size, settings.megatron_tensor_parallel_size) == (
        1,
        2,
    )
    # The reference's concurrency and start-up deadline.
    assert (settings.max_rollout_workers, settings.executor_max_in_flight) == (8, 8)
    assert settings.startup_deadline_s == 3600
    assert settings.checkpoint_every_n_versions == 2
    assert settings.model == "Qwen/Qwen3-8B"
    assert settings.model_path == tmp_path / "work/model"
    assert settings.reef_url == "http://127.0.0.1:8900"
    assert settings.reef_token == "reef-local"
    assert settings.scenario == "guidance-ttt-polyomino-packing"
    assert (settings.ray_actor_name, settings.ray_namespace) == ("reef-train-bridge", "reef")
    assert settings.state_dir == tmp_path / "work/polyomino_packing"
    assert settings.run_dir == settings.state_dir / "stack"
    assert settings.megatron_checkpoint_dir == settings.state_dir / "checkpoints/megatron"
    assert settings.hf_checkpoint_template == str(
        settings.state_dir / "checkpoints/hf/{rollout_id}"
    )
    assert (settings.executor_backend, settings.gpt_oss_reasoning_effort) == (
        "gpt_oss_120b",
        "high",
    )
    # No override: the problem id is the task's own (its contract.json).
    assert (settings.judge_url, settings.judge_problem_id) == ("http://127.0.0.1:8081", "")


def test_harness_section_takes_environment_overrides_and_falls_back_on_empty(tmp_path):
    environ = {
        "GUIDANCE_TTT_EXECUTOR": "openrouter_glm_5_2",
        "GUIDANCE_TTT_REASONING_EFFORT": "",
        "FRONTIERCS_JUDGE_URL": "http://judge.internal:8081",
        "FRONTIERCS_PROBLEM_ID": "0",
    }
    settings = RunSettings.load(DEFAULT_SERVE_YAML, environ=environ, base_dir=tmp_path)
    assert settings.executor_backend == "openrouter_glm_5_2"
    assert settings.gpt_oss_reasoning_effort == "high"
    assert settings.judge_url == "http://judge.internal:8081"


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        (
            "GUIDANCE_TTT_EXECUTOR",
            "gpt4",
            "training.config.harness.executor_backend: must be one of gpt_oss_120b, "
            "openrouter_glm_5_2, openai_compatible, got 'gpt4'",
        ),
        (
            "GUIDANCE_TTT_REASONING_EFFORT",
            "max",
            "training.config.harness.gpt_oss_reasoning_effort: unknown reasoning effort 'max'",
        ),
    ],
)
def test_unknown_executor_choices_are_refused(tmp_path, variable, value, message):
    with pytest.raises(RunSettingsError, match=message):
        RunSettings.load(DEFAULT_SERVE_YAML, environ={variable: value}, base_dir=tmp_path)


def test_token_never_appears_in_repr_or_safe_dict(tmp_path):
    path = variant(tmp_path, lambda d: d["reef"].update(token="${REEF_TOKEN:?}"))
    secret = "s3cr3t-token-value"
    settings = RunSettings.load(path, environ={"REEF_TOKEN": secret}, base_dir=tmp_path)
    assert settings.reef_token == secret
    assert secret not in repr(settings)
    assert secret not in str(settings.safe_dict())
    assert "reef_token" not in settings.safe_dict()
    assert settings.safe_dict()["scenario"] == settings.scenario


def test_required_token_variable_missing_is_refused_naming_it(tmp_path):
    path = variant(tmp_path, lambda d: d["reef"].update(token="${REEF_TOKEN:?}"))
    with pytest.raises(RunSettingsError, match=r"REEF_TOKEN \(at reef.token\)"):
        RunSettings.load(path, environ={"REEF_TOKEN": "  "}, base_dir=tmp_path)


def test_unset_plain_variable_is_empty_so_an_unset_token_means_no_token(tmp_path):
    path = variant(tmp_path, lambda d: d["reef"].update(token="${REEF_TOKEN}"))
    assert RunSettings.load(path, environ={}, base_dir=tmp_path).reef_token is None


def test_default_form_outside_the_harness_section_is_refused(tmp_path):
    path = variant(tmp_path, lambda d: d["reef"].update(token="${REEF_TOKEN:-reef-local}"))
    with pytest.raises(
        RunSettingsError, match=r"reef.token uses \$\{VAR:-default\}, which Reef 0.1.3"
    ):
        RunSettings.load(path, environ={}, base_dir=tmp_path)


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        (
            "global-batch-size",
            16,
            "global-batch-size is 16 but groups-per-step × rollouts-per-group = 2 × 4 = 8",
        ),
        (
            "rollout-batch-size",
            4,
            "rollout-batch-size is 4 but groups-per-step = 2; "
            "set training.options.rollout-batch-size: 2",
        ),
        ("n-samples-per-prompt", 8, "n-samples-per-prompt is 8 but rollouts-per-group = 4"),
        ("num-rollout", 5, "num-rollout is 5 but training.config.steps (STEPS) = 1"),
        (
            "global-batch-size",
            "eight",
            "training.options.global-batch-size: must be a whole number, got 'eight'",
        ),
    ],
)
def test_slime_batch_layout_must_match_the_grid(tmp_path, option, value, message):
    path = variant(tmp_path, lambda d: d["training"]["options"].update({option: value}))
    with pytest.raises(RunSettingsError, match=message.replace("(", r"\(").replace(")", r"\)")):
        RunSettings.load(path, environ={}, base_dir=tmp_path)


def test_missing_global_batch_size_is_refused_with_the_value_to_set(tmp_path):
    path = variant(tmp_path, lambda d: d["training"]["options"].pop("global-batch-size"))
    with pytest.raises(RunSettingsError, match="global-batch-size is not set; set it to 8"):
        RunSettings.load(path, environ={}, base_dir=tmp_path)


def test_steps_edit_flows_through_the_reference_to_num_rollout(tmp_path):
    path = variant(tmp_path, lambda d: d["training"]["config"].update(steps=50))
    assert RunSettings.load(path, environ={}, base_dir=tmp_path).steps == 50


def test_reference_to_an_unset_setting_is_refused(tmp_path):
    path = variant(
        tmp_path,
        lambda d: d["training"]["options"].update({"num-rollout": "${training.config.total}"}),
    )
    with pytest.raises(
        RunSettingsError, match=r"refers to \$\{training.config.total\}, which is not set"
    ):
        RunSettings.load(path, environ={}, base_dir=tmp_path)


def test_identity_holds_the_resume_fields():
    settings = RunSettings.load(DEFAULT_SERVE_YAML, environ={})
    assert settings.identity() == {
        "mode": "trained",
        "model": "Qwen/Qwen3-8B",
        "executor": "gpt_oss_120b",
        "gpt_oss_reasoning_effort": "high",
        "groups_per_step": 2,
        "rollouts_per_group": 4,
        "guidance_max_tokens": 8192,
        "sequence_length": 12288,
        "lora_rank": 32,
        "inference_tensor_parallel_size": 1,
        "megatron_tensor_parallel_size": 2,
        "task_text": "reference",
        "arm": "guidance-ttt",
        "parent_selection": "puct",
        "run_seed": 0,
        "guidance_request": "sglang",
    }


@pytest.mark.parametrize(
    ("edit", "key", "stored", "requested"),
    [
        (
            lambda d: d["inference"].update({"tensor-parallel-size": 2}),
            "inference_tensor_parallel_size",
            1,
            2,
        ),
        (
            lambda d: d["training"]["options"].update({"tensor-model-parallel-size": 1}),
            "megatron_tensor_parallel_size",
            2,
            1,
        ),
    ],
)
def test_a_resume_with_either_tp_size_changed_refuses_naming_the_key(
    tmp_path, edit, key, stored, requested
):
    original = RunIdentity.from_dict(RunSettings.load(DEFAULT_SERVE_YAML, environ={}).identity())
    changed = RunSettings.load(variant(tmp_path, edit), environ={}, base_dir=tmp_path)
    resumed = RunIdentity.from_dict(changed.identity())
    # The controller refuses a resume on exactly this difference, naming the key
    # (tests/harness/test_run_controller_resume.py runs that refusal for every identity key).
    assert original.first_difference(resumed) == (key, stored, requested)


def test_executor_limit_above_the_rollout_workers_is_refused(tmp_path):
    path = variant(
        tmp_path,
        lambda d: d["training"]["config"]["harness"].update(
            {"max_rollout_workers": 4, "executor_max_in_flight": 6}
        ),
    )
    with pytest.raises(RunSettingsError) as refused:
        RunSettings.load(path, environ={}, base_dir=tmp_path)
    assert "training.config.harness.executor_max_in_flight" in str(refused.value)
    assert "must not exceed max_rollout_workers (4)" in str(refused.value)


def test_startup_deadline_comes_from_the_environment_or_serve_yaml(tmp_path):
    environ = {"GUIDANCE_TTT_STARTUP_DEADLINE_S": "120"}
    assert RunSettings.load(DEFAULT_SERVE_YAML, environ=environ).startup_deadline_s == 120
    path = variant(
        tmp_path,
        lambda d: d["training"]["config"]["harness"].update({"startup_deadline_s": 0}),
    )
    with pytest.raises(RunSettingsError, match="startup_deadline_s"):
        RunSettings.load(path, environ={}, base_dir=tmp_path)


def test_environment_interpolation_matches_reefs_own_loader(tmp_path, monkeypatch):
    config_utils = pytest.importorskip("reef.service.deploy.config_utils")
    document = {
        "reef": {"token": "${TTTD_TEST_TOKEN}", "run-dir": "${TTTD_TEST_DIR:?}/stack"},
        "storage": {"agent-record-dir": "${TTTD_TEST_UNSET}/records", "x": ["${TTTD_TEST_DIR}", 3]},
        "training": {
            "options": {"save": "${training.config.checkpoint_dir}/m", "python": "${REEF_PYTHON}"}
        },
    }
    path = write(tmp_path, document)
    monkeypatch.setenv("TTTD_TEST_TOKEN", "abc")
    monkeypatch.setenv("TTTD_TEST_DIR", "/state")
    monkeypatch.delenv("TTTD_TEST_UNSET", raising=False)
    monkeypatch.delenv("REEF_PYTHON", raising=False)
    ours = ServeDocument.read(path, os.environ).data
    theirs = config_utils.load_config(path)
    assert ours == theirs
    monkeypatch.delenv("TTTD_TEST_DIR")
    with pytest.raises(config_utils.DeployConfigError, match="TTTD_TEST_DIR"):
        config_utils.load_config(path)
    with pytest.raises(RunSettingsError, match="TTTD_TEST_DIR"):
        ServeDocument.read(path, os.environ)


def test_options_the_harness_does_not_read_may_hold_references_only_reef_resolves(tmp_path):
    path = variant(
        tmp_path,
        lambda d: d["training"]["options"].update({"distill-teacher-url": "${endpoints.teacher}"}),
    )
    assert RunSettings.load(path, environ={}, base_dir=tmp_path).groups_per_step == 2


def test_seed_setting_selects_a_seed_record_of_the_task(tmp_path):
    default = RunSettings.load(DEFAULT_SERVE_YAML, environ={}, base_dir=tmp_path)
    assert default.seed_file == "solution/seed.json"
    shelf = RunSettings.load(
        DEFAULT_SERVE_YAML,
        environ={"GUIDANCE_TTT_SEED": "solution/shelf/seed.json"},
        base_dir=tmp_path,
    )
    assert shelf.seed_file == "solution/shelf/seed.json"


@pytest.mark.parametrize("value", ["/etc/seed.json", "../other_task/solution/seed.json"])
def test_seed_outside_the_task_directory_is_refused_naming_the_key(tmp_path, value):
    with pytest.raises(RunSettingsError, match=r"harness\.seed: must name .*, got"):
        RunSettings.load(
            DEFAULT_SERVE_YAML, environ={"GUIDANCE_TTT_SEED": value}, base_dir=tmp_path
        )


def test_a_boolean_where_a_count_belongs_is_refused(tmp_path):
    path = variant(tmp_path, lambda d: d["recipe"]["config"].update({"groups-per-step": True}))
    message = r"recipe\.config\.groups-per-step: .*boolean, got True"
    with pytest.raises(RunSettingsError, match=message):
        RunSettings.load(path, environ={}, base_dir=tmp_path)


def test_a_key_written_with_both_spellings_is_refused(tmp_path):
    path = variant(tmp_path, lambda d: d["training"]["config"].update({"lora-rank": 16}))
    message = r"training\.config\.lora_rank: written twice \(with - and with _\)"
    with pytest.raises(RunSettingsError, match=message):
        RunSettings.load(path, environ={}, base_dir=tmp_path)


def test_every_problem_of_a_file_is_reported_at_once(tmp_path):
    def edit(document):
        document["training"]["config"].update({"lora_rank": 0, "steps": 0})
        document["reef"]["port"] = 99999

    with pytest.raises(RunSettingsError) as refused:
        RunSettings.load(variant(tmp_path, edit), environ={}, base_dir=tmp_path)
    message = str(refused.value)
    assert "reef.port: must be ≤ 65535, got 99999" in message
    assert "training.config.steps: must be ≥ 1, got 0" in message
    assert "training.config.lora_rank: must be ≥ 1, got 0" in message


def test_a_numeric_problem_id_in_serve_yaml_is_read_as_its_text(tmp_path):
    path = variant(
        tmp_path, lambda d: d["training"]["config"]["harness"].update({"judge_problem_id": 5})
    )
    assert RunSettings.load(path, environ={}, base_dir=tmp_path).judge_problem_id == "5"
