"""serve-tinker.yaml: the trained run on Reef's Tinker backend, loaded as `guidance-ttt run
--config` loads it, and the settings Reef's Tinker backend cannot honour refused at start by
name, value and fix (harness/settings/tinker.py) — by the harness and by `reef serve` itself."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from reef.train.tinker_backend.config import TinkerConfig

from harness.preflight.tinker import check_tinker_cost, nearest_models, step_tokens
from harness.settings.run_copy import write_run_copy
from harness.settings.run_settings import RunSettings, RunSettingsError
from harness.settings.tinker import (
    MANAGED_OPTIONS,
    SLIME_OPTIONS,
    TINKER_MODELS,
    TinkerOptions,
)

REPO = Path(__file__).resolve().parents[2]
SERVE_TINKER = REPO / "serve-tinker.yaml"


def edited(tmp_path: Path, edit) -> Path:
    """A copy of serve-tinker.yaml with `edit(document)` applied."""
    document = yaml.safe_load(SERVE_TINKER.read_text(encoding="utf-8"))
    edit(document)
    path = tmp_path / "serve-tinker.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def refusal(path: Path) -> str:
    with pytest.raises(RunSettingsError) as refused:
        RunSettings.load(path, environ={})
    return str(refused.value)


def options(document: dict[str, Any]) -> dict[str, Any]:
    return document["training"]["options"]


def test_serve_tinker_yaml_loads_as_guidance_ttt_run_loads_it(tmp_path):
    copy = write_run_copy(SERVE_TINKER, tmp_path / "state", environ={})
    settings = RunSettings.load(copy, environ={})

    assert settings.training_backend == "tinker"
    assert settings.model == "Qwen/Qwen3-8B" and settings.model in TINKER_MODELS
    assert (settings.groups_per_step, settings.rollouts_per_group, settings.lora_rank) == (2, 4, 32)
    assert settings.tinker is not None
    assert settings.tinker["learning_rate"] == pytest.approx(4e-5)
    assert settings.tinker["kl_coef"] == pytest.approx(0.1)
    assert settings.tinker["api_key_env"] == "TINKER_API_KEY"
    assert settings.model_path is None and settings.num_gpus == 0
    assert settings.checkpoint_dir == settings.state_dir / "checkpoints" / "tinker"
    assert settings.identity()["training_backend"] == "tinker"


def test_a_slime_run_s_identity_does_not_change():
    assert "training_backend" not in RunSettings.load(REPO / "serve.yaml").identity()


def test_the_options_are_reef_s_tinker_config_by_its_own_names():
    ours = {info.alias or name for name, info in TinkerOptions.model_fields.items()}
    reefs = {item.name.replace("_", "-") for item in dataclasses.fields(TinkerConfig)}
    # The rest are the fields Reef's in-process deployment manages and refuses here itself.
    assert ours | set(MANAGED_OPTIONS) == reefs
    assert not ours & set(MANAGED_OPTIONS)


def test_serve_yaml_s_slime_options_pasted_in_are_each_refused_by_name(tmp_path):
    written = yaml.safe_load((REPO / "serve.yaml").read_text(encoding="utf-8"))
    # The values as serve.yaml resolves them: its references point at keys this file lacks.
    slime = {
        key: "x" if isinstance(value, str) and "${" in value else value
        for key, value in written["training"]["options"].items()
    }
    message = refusal(edited(tmp_path, lambda document: options(document).update(slime)))

    tinker_keys = {alias for alias in TinkerOptions.model_json_schema()["properties"]}
    for key in set(slime) - tinker_keys:  # kl-coef is a Tinker option too, 0.1 on both
        assert f"training.options.{key}: " in message
    assert "training.options.lr: the learning rate is training.options.learning-rate" in message
    assert "training.options.megatron-lora-alpha: Tinker's LoRA has no alpha" in message
    assert "remove it, got 32" in message
    assert "training.options.padded-vocab-size: unknown key" in message  # not a Tinker option
    assert set(SLIME_OPTIONS) <= set(slime)  # every refusal with a reason is one serve.yaml has


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            lambda d: options(d).update({"kl-coef": 0}),
            "training.options.kl-coef: must be > 0, got 0",
        ),
        (
            lambda d: options(d).update({"batch-size": 4}),
            "training.options.batch-size: tttd trains one optimizer step on the whole G×R step",
        ),
        (
            lambda d: options(d).update({"inference-timeout-s": 100}),
            "training.options.inference-timeout-s: Reef's in-process Tinker deployment sets it "
            "itself and refuses it here; set inference.timeout-s instead, got 100",
        ),
        (
            lambda d: options(d).update({"lora-rank": 16}),
            "training.options.lora-rank is 16 but training.config.lora_rank is 32",
        ),
        (
            lambda d: d["training"].update({"colocate": True}),
            "training.colocate: Tinker trains on its own machines",
        ),
        (
            lambda d: d["inference"].update({"num-gpus": 2}),
            "inference.num-gpus: Tinker trains on its own machines",
        ),
        (
            lambda d: d["inference"].update({"model-path": "Qwen/Qwen3-4B"}),
            "inference.model-path is 'Qwen/Qwen3-4B' but training.config.model is",
        ),
    ],
    ids=["kl-0", "batch-size", "managed", "rank", "colocate", "gpus", "two-models"],
)
def test_a_setting_tinker_cannot_honour_is_refused_with_its_value_and_fix(tmp_path, edit, expected):
    message = refusal(edited(tmp_path, edit))
    assert expected in message
    assert any(fix in message for fix in ("remove it", "set ", "rename it"))


def test_a_key_pasted_where_the_key_s_name_belongs_is_never_echoed(tmp_path):
    secret = "tml-0123456789abcdef"
    message = refusal(edited(tmp_path, lambda d: options(d).update({"api-key-env": secret})))
    assert "training.options.api-key-env: must be the NAME" in message
    assert secret not in message


@pytest.mark.slow
def test_reef_serve_accepts_serve_tinker_yaml_and_refuses_a_wrong_copy_by_name(tmp_path):
    reef = Path(sys.executable).parent / "reef"

    def print_config(path: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(reef), "serve", "-c", str(path), "--print-config"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )

    good = print_config(SERVE_TINKER)
    assert good.returncode == 0, good.stderr
    assert "training.backend = tttd.deployment:TTTDTinkerDeployment" in good.stdout + good.stderr

    wrong = edited(tmp_path, lambda d: options(d).update({"kl-coef": 0, "adam-eps": 1e-8}))
    bad = print_config(wrong)
    assert bad.returncode != 0
    assert "training.options.kl-coef: must be > 0" in bad.stderr
    assert "training.options.adam-eps: Reef's Tinker backend sends only the learning rate" in (
        bad.stderr
    )


def _settings(**tinker: Any) -> RunSettings:
    settings = RunSettings.load(SERVE_TINKER, environ={})
    return dataclasses.replace(settings, tinker={**(settings.tinker or {}), **tinker})


def test_the_cost_row_estimates_a_step_at_full_token_limits_from_the_prices_set():
    prices = {"prefill": 0.5, "sample": 2.0, "train": 1.0}
    settings = _settings(price_per_million_tokens=prices)
    tokens = step_tokens(settings)
    # 2×4 rollouts of 12288 tokens, 8192 of them sampled; the base's log-probs are prefill.
    assert tokens == {"prefill": 8 * 4096 + 8 * 12288, "sample": 8 * 8192, "train": 8 * 12288}
    want = sum(tokens[kind] * price / 1e6 for kind, price in prices.items())

    row = check_tinker_cost(settings)

    assert row.ready
    assert f"at most ${want:,.2f} per step" in row.detail


def test_the_cost_row_without_prices_says_which_setting_to_fill():
    unset = {"prefill": None, "sample": None, "train": None}
    row = check_tinker_cost(_settings(price_per_million_tokens=unset))
    assert row.ready
    assert "set training.config.tinker.price_per_million_tokens" in row.detail


def test_nearest_models_are_the_names_tinker_serves():
    assert nearest_models("qwen/qwen3-8b")[0] == "Qwen/Qwen3-8B"
    assert all(name in TINKER_MODELS for name in nearest_models("Qwen/Qwen3-7B"))
