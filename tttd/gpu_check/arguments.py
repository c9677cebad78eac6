"""Check 1: Slime's real argument parser accepts the command line Reef builds from serve.yaml.

``slime_command_line`` runs Reef 0.1.3's own launch code on a copy of ``serve.yaml`` (the
orchestrator's ``resolve_deployment_config``, the model-path resolution, the driver's recipe
resolution and ``driver_arguments``), so the arguments are exactly the ones ``reef serve``
hands Slime. ``parse_slime_arguments`` then runs the steps of Reef's
``create_training_plan`` up to the point where it starts Ray: the loss family's driver
options, Slime's ``parse_args`` with Reef's added arguments (``_parse_slime_args``), Reef's
executor, tracking and resume adjustments, and the loss family's validation.

The model directory is a stand-in holding only Qwen3-8B's ``config.json`` (Reef derives
Megatron's architecture flags from it), so nothing is downloaded. On a machine without a GPU,
Megatron's ``validate_args`` asks ``torch.cuda`` for the device's architecture; the check
then answers 9 (Hopper, the H200's) and says so in its detail.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from tttd.gpu_check import CheckResult

#: Qwen3-8B's architecture (its Hugging Face config.json), for the stand-in model directory.
QWEN3_8B_CONFIG: dict[str, Any] = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000,
    "max_position_embeddings": 40960,
    "tie_word_embeddings": False,
    "hidden_act": "silu",
    "torch_dtype": "bfloat16",
}

#: The grids the run uses: the qualification grid as written, and the documented 8×16 edit.
GRIDS: dict[str, dict[str, int] | None] = {
    "2x4": None,
    "8x16": {"groups": 8, "rollouts": 16, "steps": 30},
}

TTTD_LOSS_PATH = "tttd.slime.objective.tttd_loss"
TTTD_ADVANTAGE_PATH = "tttd.slime.objective.tttd_advantages"


def serve_document(serve_yaml: Path, grid: str) -> dict[str, Any]:
    """``serve.yaml`` as a document, with the grid edit docs/training.md describes applied."""
    document = yaml.safe_load(serve_yaml.read_text())
    edit = GRIDS[grid]
    if edit is not None:
        document["recipe"]["config"]["groups-per-step"] = edit["groups"]
        document["recipe"]["config"]["rollouts-per-group"] = edit["rollouts"]
        document["training"]["config"]["steps"] = edit["steps"]
        document["training"]["options"]["global-batch-size"] = edit["groups"] * edit["rollouts"]
    return document


@contextlib.contextmanager
def _working_directory(path: Path) -> Iterator[None]:
    previous = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


def slime_command_line(
    serve_yaml: Path, work_dir: Path, grid: str = "2x4"
) -> tuple[list[str], dict[str, Any], str, str]:
    """The Slime arguments Reef 0.1.3 launches for ``serve.yaml`` at ``grid``.

    Writes the (edited) file and a stand-in model directory under ``work_dir`` and resolves
    it there, as ``reef serve`` does in the repository root. Returns the arguments, the
    resolved configuration, the loss family and the recipe reference.
    """
    from reef.service.deploy.config_utils import load_config
    from reef.service.deploy.inference import resolve_model_paths
    from reef.service.deploy.orchestrator import resolve_deployment_config
    from reef.service.training_driver import _resolve_training_recipe
    from reef.train.slime_backend.launch import driver_arguments

    document = serve_document(serve_yaml, grid)
    work_dir.mkdir(parents=True, exist_ok=True)
    config_path = work_dir / "serve.yaml"
    config_path.write_text(yaml.safe_dump(document, sort_keys=False))
    model_dir = work_dir / document["inference"]["model-path"]
    model_dir.mkdir(parents=True, exist_ok=True)
    if not (model_dir / "config.json").exists():
        (model_dir / "config.json").write_text(json.dumps(QWEN3_8B_CONFIG))
    with _working_directory(work_dir):
        raw = load_config(config_path, interpolate_env=False)
        config, _ = resolve_deployment_config(raw, {}, config_path)
        resolve_model_paths(config)
        loss_family, recipe = _resolve_training_recipe(config)
        arguments = driver_arguments(config, loss_family=loss_family)
    return arguments, config, loss_family, recipe


@contextlib.contextmanager
def _recorded_parsers(parsers: list[argparse.ArgumentParser]) -> Iterator[None]:
    """Record every parser that parses the command line (Slime's parsers ignore unknowns)."""
    original = argparse.ArgumentParser.parse_known_args

    def parse_known_args(self, *args, **kwargs):
        parsers.append(self)
        return original(self, *args, **kwargs)

    argparse.ArgumentParser.parse_known_args = parse_known_args  # type: ignore[method-assign]
    try:
        yield
    finally:
        argparse.ArgumentParser.parse_known_args = original  # type: ignore[method-assign]


def parse_slime_arguments(
    arguments: list[str], config: Mapping[str, Any], loss_family: str, recipe: str, work_dir: Path
) -> tuple[Any, list[str], bool]:
    """Parse ``arguments`` as Reef's driver does before Ray; returns (args, unaccepted, stubbed).

    ``unaccepted`` lists the options no parser registered (Slime's parsers skip unknown
    options silently); ``stubbed`` says whether the GPU architecture was answered as Hopper.
    """
    import torch
    from reef.train.slime_backend import driver
    from reef.train.slime_backend.launch import driver_environment
    from reef.train.slime_backend.loss_families import resolve_loss_family
    from reef.train.slime_backend.reef_adapters.slime_arguments import configure_reef_loss_args

    stubbed = not torch.cuda.is_available()
    if stubbed:
        import megatron.training.arguments as megatron_arguments

        megatron_arguments.get_device_arch_version = lambda: 9
    os.environ.update(driver_environment(os.environ))
    spec = resolve_loss_family(loss_family)
    parsers: list[argparse.ArgumentParser] = []
    # Megatron prints every argument to stdout; keep the table readable.
    with (
        _working_directory(work_dir),
        _recorded_parsers(parsers),
        contextlib.redirect_stdout(io.StringIO()),
    ):
        _, remaining = driver._retention_options(arguments)
        family_config, slime_arguments = spec.parse_driver_options(remaining)
        args = driver._parse_slime_args(slime_arguments)
        driver._configure_executors(args, config, slime_arguments)
        driver._validate_tracking_args(args)
        driver._apply_bridge_resume_fallback(args)
        driver._apply_unsaved_optimizer_resume(args)
        spec.apply_driver_options(args, family_config)
        driver._stamp_loss_family_reference(args, loss_family)
        configure_reef_loss_args(args)
        spec.validate_backend_args(args, recipe=recipe)
    known = {option for parser in parsers for option in parser._option_string_actions}
    unaccepted = [
        token.split("=", 1)[0]
        for token in arguments
        if token.startswith("--") and token.split("=", 1)[0] not in known
    ]
    return args, unaccepted, stubbed


def intended_values(document: Mapping[str, Any]) -> dict[str, Any]:
    """What the parsed namespace must hold, read from the serve.yaml document itself."""
    recipe = document["recipe"]["config"]
    options = document["training"]["options"]
    groups, rollouts = recipe["groups-per-step"], recipe["rollouts-per-group"]
    return {
        "tensor_model_parallel_size": int(options["tensor-model-parallel-size"]),
        "rollout_num_gpus_per_engine": int(document["inference"]["tensor-parallel-size"]),
        "rollout_num_gpus": int(document["inference"]["num-gpus"]),
        "megatron_lora_rank": int(document["training"]["config"]["lora_rank"]),
        "megatron_lora_alpha": int(options["megatron-lora-alpha"]),
        "megatron_lora_dropout": float(options["megatron-lora-dropout"]),
        "megatron_lora_target_modules": ["linear_qkv", "linear_proj", "linear_fc1", "linear_fc2"],
        "loss_type": "custom_loss",
        "custom_loss_function_path": TTTD_LOSS_PATH,
        "custom_advantage_function_path": TTTD_ADVANTAGE_PATH,
        "global_batch_size": groups * rollouts,
        "rollout_batch_size": groups,
        "n_samples_per_prompt": rollouts,
        "num_rollout": int(document["training"]["config"]["steps"]),
        "kl_coef": 0.1,
        "use_kl_loss": False,
        "use_rollout_logprobs": True,
        "calculate_per_token_loss": False,
        "entropy_coef": 0.0,
        "optimizer": "adam",
        "lr": 4e-5,
        "lr_decay_style": "constant",
        "adam_beta1": 0.9,
        "adam_beta2": 0.95,
        "adam_eps": 1e-8,
        "weight_decay": 0.0,
        "clip_grad": 0.0,
        "colocate": bool(document["training"].get("colocate", False)),
        "loss_family": "tttd",
    }


def check_arguments(serve_yaml: Path, work_dir: Path, grid: str = "2x4") -> list[CheckResult]:
    """Rows: the command line parses, every option is accepted, every intended value holds."""
    prefix = f"arguments[{grid}]"
    try:
        arguments, config, family, recipe = slime_command_line(serve_yaml, work_dir, grid)
    except Exception as error:  # a refusal is the finding; name it
        return [CheckResult(f"{prefix} reef builds the command line", False, _short(error))]
    try:
        args, unaccepted, stubbed = parse_slime_arguments(
            arguments, config, family, recipe, work_dir
        )
    except BaseException as error:  # argparse exits with SystemExit
        return [CheckResult(f"{prefix} slime parses the command line", False, _short(error))]
    note = " (GPU architecture answered as Hopper: no GPU here)" if stubbed else ""
    rows = [
        CheckResult(
            f"{prefix} slime parses the command line",
            True,
            f"{len(arguments)} tokens{note}",
            {"argv": arguments},
        ),
        CheckResult(
            f"{prefix} every option accepted",
            not unaccepted,
            "unknown to Slime, Megatron and Reef: " + ", ".join(unaccepted) if unaccepted else "",
        ),
    ]
    for name, expected in intended_values(serve_document(serve_yaml, grid)).items():
        actual = getattr(args, name, None)
        if isinstance(actual, tuple):
            actual = list(actual)
        same = actual == expected or (
            isinstance(expected, float) and isinstance(actual, int | float) and actual == expected
        )
        rows.append(
            CheckResult(
                f"{prefix} {name}",
                same,
                "" if same else f"parsed {actual!r}, intended {expected!r}",
                {"value": actual},
            )
        )
    rows.extend(_importable_hooks(prefix, args))
    return rows


def _importable_hooks(prefix: str, args: Any) -> list[CheckResult]:
    from slime.utils.misc import load_function

    rows = []
    for name in ("custom_loss_function_path", "custom_advantage_function_path"):
        path = getattr(args, name, None)
        try:
            function = load_function(path)
            ok = callable(function) and function.__module__ == "tttd.slime.objective"
            detail = "" if ok else f"{path} resolves to {function!r}"
        except Exception as error:
            ok, detail = False, f"{path}: {_short(error)}"
        rows.append(CheckResult(f"{prefix} {name} importable", ok, detail))
    return rows


def _short(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}".strip()
    return text if len(text) <= 300 else text[:297] + "..."
