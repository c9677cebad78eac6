"""The GPU boundary against the real Slime, Megatron-LM and Reef 0.1.3 code (CPU part).

Each test runs ``python -m tttd.gpu_check`` (what ``scripts/gpu-check.sh`` runs) as a
subprocess and reads its JSON rows. They need Slime at the pinned commit and its Megatron-LM:
installed, or as source trees named by ``GUIDANCE_TTT_SLIME_SRC`` and
``GUIDANCE_TTT_MEGATRON_SRC`` (``GUIDANCE_TTT_UPSTREAM_SITE`` may add a directory of SGLang
and transformers); without them every test skips with one line. docs/training.md ("Checking
the GPU boundary") says how to prepare them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tttd.gpu_check import upstream_missing

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
MISSING = upstream_missing()
requires_upstream = pytest.mark.skipif(MISSING is not None, reason=f"upstream absent: {MISSING}")


def gpu_check(tmp_path: Path, *options: str) -> tuple[int, dict[str, dict], str]:
    out = tmp_path / "rows.json"
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *_pythonpath()])}
    result = subprocess.run(
        [sys.executable, "-m", "tttd.gpu_check", "--device", "cpu", "--json", str(out), *options],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=900,
    )
    rows = {row["name"]: row for row in json.loads(out.read_text())} if out.exists() else {}
    return result.returncode, rows, result.stdout + result.stderr


def _pythonpath() -> list[str]:
    value = os.environ.get("PYTHONPATH", "")
    return [part for part in value.split(os.pathsep) if part]


def failed(rows: dict[str, dict]) -> list[str]:
    return [f"{name}: {row['detail']}" for name, row in rows.items() if not row["ok"]]


@requires_upstream
def test_slime_parses_reefs_command_line_for_serve_yaml_with_the_intended_values(tmp_path):
    code, rows, output = gpu_check(tmp_path, "--only", "arguments")
    assert code == 0, "\n".join(failed(rows)) or output[-3000:]
    for grid, batch in (("2x4", 8), ("8x16", 128)):
        assert rows[f"arguments[{grid}] every option accepted"]["ok"]
        assert rows[f"arguments[{grid}] global_batch_size"]["figures"]["value"] == batch
        # Megatron trains with TP 2; SGLang serves one engine per GPU (TP 1), which Reef's
        # colocated LoRA sync requires.
        assert rows[f"arguments[{grid}] tensor_model_parallel_size"]["figures"]["value"] == 2
        assert rows[f"arguments[{grid}] rollout_num_gpus_per_engine"]["figures"]["value"] == 1
        assert rows[f"arguments[{grid}] loss_type"]["figures"]["value"] == "custom_loss"
        assert rows[f"arguments[{grid}] custom_loss_function_path importable"]["ok"]
        argv = rows[f"arguments[{grid}] slime parses the command line"]["figures"]["argv"]
        assert "--use-rollout-logprobs" in argv and "--kl-coef=0.1" in argv


@requires_upstream
def test_serving_with_tensor_parallel_2_is_refused_by_reefs_lora_sync_check(tmp_path):
    document = yaml.safe_load((REPO / "serve.yaml").read_text())
    document["inference"]["tensor-parallel-size"] = 2
    edited = tmp_path / "serve-tp2.yaml"
    edited.write_text(yaml.safe_dump(document, sort_keys=False))
    code, rows, _ = gpu_check(tmp_path, "--only", "arguments", "--serve-yaml", str(edited))
    assert code == 1
    refusal = rows["arguments[2x4] slime parses the command line"]
    assert not refusal["ok"]
    assert "--rollout-num-gpus-per-engine=1" in refusal["detail"]


@requires_upstream
def test_a_misspelt_slime_option_is_named_although_slimes_parser_skips_it(tmp_path):
    document = yaml.safe_load((REPO / "serve.yaml").read_text())
    document["training"]["options"]["kl-coeff"] = 0.1  # Slime's option is kl-coef
    edited = tmp_path / "serve-typo.yaml"
    edited.write_text(yaml.safe_dump(document, sort_keys=False))
    code, rows, _ = gpu_check(tmp_path, "--only", "arguments", "--serve-yaml", str(edited))
    assert code == 1
    assert rows["arguments[2x4] slime parses the command line"]["ok"]
    unaccepted = rows["arguments[2x4] every option accepted"]
    assert not unaccepted["ok"] and "--kl-coeff" in unaccepted["detail"]


@requires_upstream
def test_tttd_hooks_in_slimes_loss_path_give_the_token_sum_and_reach_the_logits(tmp_path):
    code, rows, output = gpu_check(tmp_path, "--only", "loss")
    assert code == 0, "\n".join(failed(rows)) or output[-3000:]
    for case in ("full batch", "constant group dropped"):
        total = rows[f"loss[{case}] loss after Slime's rescaling = token sum"]["figures"]
        assert total["propagated"] == pytest.approx(total["token_sum"], rel=1e-5)
        assert rows[f"loss[{case}] gradient reaches the logits"]["figures"]["grad_norm"] > 0
        metrics = rows[f"loss[{case}] loss metrics named"]["figures"]["metrics"]
        assert {"train/loss", "train/importance_ratio", "train/ppo_kl"} <= set(metrics)
        assert metrics["train/importance_ratio"] == pytest.approx(1.0, abs=0.05)
    # Without Reef's wrapper, a step with a dropped group would train at 8/4 = 2× the sum.
    unwrapped = rows["loss[without Reef's wrapper] dropped-group step mis-scaled"]
    assert unwrapped["figures"]["factor"] == pytest.approx(2.0, rel=1e-4)


def test_without_upstream_sources_the_check_exits_2_naming_what_is_missing(tmp_path):
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("GUIDANCE_TTT_") and key != "PYTHONPATH"
    }
    environment["PYTHONPATH"] = str(REPO)
    result = subprocess.run(
        [sys.executable, "-m", "tttd.gpu_check"],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if upstream_missing({}) is None:
        pytest.skip("Slime and Megatron-LM are installed here; nothing is missing")
    assert result.returncode == 2
    assert "GUIDANCE_TTT_SLIME_SRC" in result.stderr and "slime" in result.stderr


def _missing_model_stack() -> str | None:
    """transformers and peft, importable here or in the upstream directories (not imported)."""
    from tttd.gpu_check import _importable, _in_paths, upstream_paths

    for name in ("transformers", "peft"):
        if not _importable(name) and not _in_paths(name, upstream_paths()):
            return f"{name} not importable"
    return None


@requires_upstream
def test_one_optimizer_step_moves_only_lora_b_and_the_gate_accepts_its_metrics(tmp_path):
    if (reason := _missing_model_stack()) is not None:
        pytest.skip(f"model stack absent: {reason}")
    code, rows, output = gpu_check(tmp_path, "--only", "step")
    assert code == 0, "\n".join(failed(rows)) or output[-3000:]
    assert rows["step[cpu] LoRA-B changed"]["ok"]
    assert rows["step[cpu] base weights unchanged"]["ok"]
    assert rows["step[cpu] train/grad_norm finite > 0"]["figures"]["grad_norm"] > 0
    metrics = rows["step[cpu] qualification gate accepts the step's metrics"]["figures"]["metrics"]
    assert metrics["train/lora_base_trainable_parameters"] == 0
    assert metrics["train/lora_trainable_parameters"] > 0
    assert metrics["train/global_batch_size"] == 8
