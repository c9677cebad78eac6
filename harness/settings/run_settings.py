"""Run settings: ``serve.yaml`` read once into the frozen ``RunSettings`` record.

``serve.yaml`` is the single source of truth for the grid (G, R), STEPS, the token limits, the LoRA
rank, the TP sizes, where Reef listens and where state lives. Reef reads the file with ``reef serve
-c serve.yaml``; the harness reads the same file (``harness.settings.document``: the same
interpolation as Reef 0.1.3) and validates it with the section models of ``harness.settings.serve``
(the same models the tttd recipe package applies under ``reef serve``), then keeps what the run
needs here, checked once and passed down.

To add a setting: declare it on its section model in ``harness.settings.serve``, add the field to
``RunSettings`` and set it in ``_record``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from harness import arms
from harness.adapters.executor.backends import ExecutionBackend, configured_backend
from harness.contract import DEFAULT_TASK_TEXT
from harness.request_shapes import RequestShape
from harness.settings.document import (
    FROZEN_SECTION,
    HARNESS_SECTION,
    RunSettingsError,
    ServeDocument,
)
from harness.settings.frozen import FrozenServeSettings
from harness.settings.observability import WandbSection
from harness.settings.paths import DEFAULT_SERVE_YAML, SETTINGS_BASE
from harness.settings.serve import (
    DEFAULT_RAY_ACTOR_NAME,
    DEFAULT_RAY_NAMESPACE,
    DEFAULT_SEED_FILE,
    EXECUTOR_BACKENDS,
    GRID_OPTIONS,
    HarnessConfig,
    InferenceSection,
    RecipeConfig,
    ReefSection,
    ServeSettings,
    TrainingConfig,
    TrainingOptions,
    executor_arguments,
    grid_layout_errors,
    section_errors,
    validate_document,
)
from harness.settings.tinker import TinkerServeSettings, is_tinker_backend
from harness.validation import MISSING

__all__ = [
    "DEFAULT_RAY_ACTOR_NAME",
    "DEFAULT_RAY_NAMESPACE",
    "DEFAULT_SEED_FILE",
    "DEFAULT_SERVE_YAML",
    "EXECUTOR_BACKENDS",
    "GRID_OPTIONS",
    "HARNESS_SECTION",
    "MISSING",
    "HarnessConfig",
    "InferenceSection",
    "RecipeConfig",
    "ReefSection",
    "RunSettings",
    "RunSettingsError",
    "ServeDocument",
    "ServeSettings",
    "TrainingConfig",
    "TrainingOptions",
    "grid_layout_errors",
    "section_errors",
]


@dataclass(frozen=True)
class RunSettings:
    """Every run setting the harness needs, read from ``serve.yaml`` and checked once.

    Paths are absolute (relative ones in the file are taken from the directory ``reef serve``
    runs in, as Reef does). ``reef_token`` is a credential: it is left out of ``repr`` and of
    :meth:`safe_dict`.
    """

    config_path: Path
    task: str
    model: str
    model_path: Path | None  # None in frozen mode (no local weights)
    groups_per_step: int
    rollouts_per_group: int
    steps: int
    checkpoint_every_n_versions: int
    guidance_max_tokens: int
    sequence_length: int
    lora_rank: int
    inference_tensor_parallel_size: int
    megatron_tensor_parallel_size: int
    reef_host: str
    reef_port: int
    run_dir: Path
    state_dir: Path
    checkpoint_dir: Path | None  # the checkpoint and Ray settings are None in frozen mode
    megatron_checkpoint_dir: Path | None
    hf_checkpoint_template: str | None
    ray_actor_name: str | None
    ray_namespace: str | None
    executor_backend: str
    gpt_oss_reasoning_effort: str
    judge_url: str
    judge_problem_id: str
    max_rollout_workers: int
    executor_max_in_flight: int
    startup_deadline_s: int
    seed_file: str = DEFAULT_SEED_FILE
    #: What both models read (`harness.task_text`): `reference` or a variant of the task.
    task_text: str = DEFAULT_TASK_TEXT
    reef_token: str | None = field(default=None, repr=False)
    #: `trained` (serve.yaml: Reef trains the guidance LoRA) or `frozen` (serve-frozen.yaml:
    #: any OpenAI-compatible endpoint behind Reef's record-only service; harness.settings.frozen).
    mode: str = "trained"
    #: Frozen mode: the endpoint Reef proxies guidance calls to (without ``/v1``).
    guidance_upstream_url: str | None = None
    #: The executor's keyword arguments for `configured_backend` (harness.executor's keys that
    #: are set, the preset's effort, the in-flight bound); `executor()` builds it.
    executor_config: Mapping[str, Any] = field(default_factory=dict, hash=False)
    #: Free disk the preflight asks for, in GB (harness.min_free_gb, else by mode).
    min_free_gb: float = 100.0
    #: GPUs a trained run needs (inference.num-gpus; 0 in frozen mode and on Tinker).
    num_gpus: int = 0
    #: Which Reef backend trains the LoRA: ``slime`` (serve.yaml) or ``tinker``
    #: (serve-tinker.yaml: hosted Tinker, no local model or GPU; harness.settings.tinker).
    training_backend: str = "slime"
    #: A Tinker run's Tinker settings as plain values (None otherwise): ``api_key_env`` (the
    #: variable's NAME, never the key), ``kl_coef``, ``learning_rate`` and
    #: ``price_per_million_tokens`` (prefill, sample, train; None where not set).
    tinker: Mapping[str, Any] | None = field(default=None, hash=False)

    def executor(self, base_url: str | None = None) -> ExecutionBackend:
        """The configured executor (`base_url` replaces its URL: a run-time override)."""
        arguments = {**self.executor_config}
        if base_url:
            arguments["base_url"] = base_url
        arguments.setdefault("concurrency", self.executor_max_in_flight)
        return configured_backend(self.executor_backend, **arguments)

    def settings_key(self, key: str) -> str:
        """The dotted path of a run-level key in this run's file: ``training.config.<key>`` in
        serve.yaml, ``recipe.config.guidance-ttt.<key>`` in serve-frozen.yaml."""
        prefix = ".".join(FROZEN_SECTION) if self.frozen else "training.config"
        return f"{prefix}.{key}"

    #: ``observability.wandb`` (harness.settings.observability), as plain values: Reef's W&B
    #: block, which the harness's search metrics follow into the same project and group.
    wandb: Mapping[str, Any] = field(default_factory=lambda: WandbSection().as_mapping())
    #: The experiment arm, its parent selection and run seed (``harness.arms``; identity).
    arm: str = arms.DEFAULT_ARM
    parent_selection: str = arms.DEFAULT_SELECTION
    run_seed: int = arms.DEFAULT_RUN_SEED
    #: The spend limit checked at step boundaries (None: none).
    max_cost_usd: float | None = None
    max_tokens: int | None = None
    #: ``harness.pricing``: per-model prices over the packaged table (``harness.observe.cost``).
    pricing: Mapping[str, Mapping[str, float | None]] | None = None
    #: How guidance requests are shaped (harness.guidance.request; `RequestShape.safe_dict()`).
    guidance_request: Mapping[str, Any] = field(
        default_factory=lambda: RequestShape().safe_dict(), hash=False
    )
    #: The experiment this run is part of (harness.experiment.name), None for a plain run.
    experiment_name: str | None = None

    @property
    def guidance_shape(self) -> RequestShape:
        """The guidance endpoint's request shape (`harness.request_shapes`)."""
        return RequestShape.from_dict(self.guidance_request)

    @property
    def arm_spec(self) -> arms.Arm:
        """The run's arm as ``harness.arms.Arm`` (what the rollout loop applies)."""
        return arms.Arm(self.arm, self.parent_selection, self.run_seed)

    @property
    def frozen(self) -> bool:
        """True for a frozen-guidance run: nothing is trained, no training barrier."""
        return self.mode == "frozen"

    @property
    def task_name(self) -> str:
        """The task's name: ``task`` itself, or the last part of a task given as a path."""
        return Path(self.task).name

    @property
    def scenario(self) -> str:
        """The Reef scenario of this task: ``guidance-ttt-<task-with-dashes>``."""
        return scenario_name(self.task)

    @property
    def reef_url(self) -> str:
        """Where the harness reaches Reef: ``http://host:port``, loopback for a wildcard bind."""
        host = "127.0.0.1" if self.reef_host in ("", "0.0.0.0") else self.reef_host
        return f"http://{host}:{self.reef_port}"

    @property
    def rollouts_per_step(self) -> int:
        """G·R: the reports of one step, and the optimizer step's batch size."""
        return self.groups_per_step * self.rollouts_per_group

    def identity(self) -> dict[str, Any]:
        """The run-identity fields a resume must match (docs/run-controller.md), without the
        executor record."""
        return {
            "mode": self.mode,
            "model": self.model,
            "executor": self.executor_backend,
            "gpt_oss_reasoning_effort": self.gpt_oss_reasoning_effort,
            "groups_per_step": self.groups_per_step,
            "rollouts_per_group": self.rollouts_per_group,
            "guidance_max_tokens": self.guidance_max_tokens,
            "sequence_length": self.sequence_length,
            "lora_rank": self.lora_rank,
            "inference_tensor_parallel_size": self.inference_tensor_parallel_size,
            "megatron_tensor_parallel_size": self.megatron_tensor_parallel_size,
            "task_text": self.task_text,
            "arm": self.arm,
            "parent_selection": self.parent_selection,
            "run_seed": self.run_seed,
            "guidance_request": self.guidance_shape.describe(),
            # Only a Tinker run names its backend, so a Slime run's identity reads as before.
            **({"training_backend": self.training_backend} if self.tinker else {}),
        }

    def safe_dict(self) -> dict[str, Any]:
        """Every setting except the token, JSON-ready (paths as strings): safe to log or persist."""
        values: dict[str, Any] = {}
        for item in fields(self):
            if item.name == "reef_token":
                continue
            value = getattr(self, item.name)
            values[item.name] = str(value) if isinstance(value, Path) else value
        values["scenario"] = self.scenario
        values["reef_url"] = self.reef_url
        return values

    @classmethod
    def load(
        cls,
        path: str | Path = DEFAULT_SERVE_YAML,
        *,
        environ: Mapping[str, str] | None = None,
        base_dir: str | Path | None = None,
    ) -> RunSettings:
        """Read, interpolate and validate ``serve.yaml``; raise ``RunSettingsError`` naming every
        wrong key and its value.

        ``environ`` defaults to ``os.environ`` and ``base_dir`` (for relative paths) to
        ``SETTINGS_BASE``, the repository root, where run.sh runs ``reef serve`` too.
        """
        config_path = Path(path).expanduser().resolve()
        document = ServeDocument.read(config_path, os.environ if environ is None else environ)
        base = SETTINGS_BASE if base_dir is None else Path(base_dir)
        if document.raw(*FROZEN_SECTION) is not None:
            frozen = validate_document(document, config_path, FrozenServeSettings)
            return _frozen_record(frozen, config_path, base)
        if is_tinker_backend(document.get("training", "backend")):
            tinker = validate_document(document, config_path, TinkerServeSettings)
            return _tinker_record(tinker, config_path, base)
        return _record(validate_document(document, config_path, ServeSettings), config_path, base)


def scenario_name(task: str) -> str:
    """The Reef scenario of a task (a name or a path): ``guidance-ttt-<task-with-dashes>``."""
    return "guidance-ttt-" + Path(task).name.replace("_", "-")


def _absolute(value: str, base: Path) -> Path:
    """A path setting made absolute: ``~`` expanded, a relative one taken from ``base``."""
    path = Path(os.path.expanduser(value))
    return path if path.is_absolute() else (base / path).resolve()


def _token(value: object) -> str | None:
    """The Reef token, stripped; None when unset or blank."""
    return (str(value).strip() or None) if value is not None else None


def _wandb(section: WandbSection, base: Path) -> dict[str, Any]:
    """``observability.wandb`` as plain values, its ``directory`` made absolute."""
    values = section.as_mapping()
    if values["directory"]:
        values["directory"] = str(_absolute(values["directory"], base))
    return values


#: Free disk a run needs by default, in GB: a trained run keeps Megatron checkpoints of an 8B
#: model (≈ 16 GB each with optimizer state, several kept); a frozen run keeps its archive,
#: journal and Reef's records (tens of MB per step).
#: A Tinker run keeps only checkpoint manifests here (the weights stay on Tinker).
MIN_FREE_GB = {"trained": 100.0, "frozen": 5.0, "tinker": 5.0}


def _harness_fields(harness: HarnessConfig, mode: str = "trained") -> dict[str, Any]:
    """The ``harness`` section's settings, the same in every mode (``mode`` picks the free-disk
    default: ``MIN_FREE_GB``)."""
    return {
        "executor_config": executor_arguments(harness.gpt_oss_reasoning_effort, harness),
        "min_free_gb": MIN_FREE_GB[mode] if harness.min_free_gb is None else harness.min_free_gb,
        "executor_backend": harness.executor_backend,
        "gpt_oss_reasoning_effort": harness.gpt_oss_reasoning_effort,
        "judge_url": harness.judge_url,
        "judge_problem_id": harness.judge_problem_id,
        "seed_file": harness.seed,
        "task_text": harness.task_text,
        "max_rollout_workers": harness.max_rollout_workers,
        "executor_max_in_flight": harness.executor_max_in_flight,
        "startup_deadline_s": harness.startup_deadline_s,
        "arm": harness.experiment.arm,
        "parent_selection": harness.experiment.parent_selection,
        "run_seed": harness.experiment.run_seed,
        "max_cost_usd": harness.spend_limit.max_cost_usd,
        "max_tokens": harness.spend_limit.max_tokens,
        "pricing": None
        if harness.pricing is None
        else {model: price.model_dump() for model, price in harness.pricing.items()},
        "guidance_request": harness.guidance.request.shape().safe_dict(),
        "experiment_name": harness.experiment.name,
    }


def _record(serve: ServeSettings, config_path: Path, base: Path) -> RunSettings:
    """The ``RunSettings`` of a trained run's ``serve.yaml``."""
    config = serve.training.config
    hf_template = serve.training.options.save_hf
    if not Path(hf_template).is_absolute():
        hf_template = str(base / hf_template)
    return RunSettings(
        config_path=config_path,
        task=config.task,
        model=config.model,
        model_path=_absolute(serve.inference.model_path, base),
        num_gpus=serve.inference.num_gpus,
        groups_per_step=serve.recipe.config.groups_per_step,
        rollouts_per_group=serve.recipe.config.rollouts_per_group,
        steps=config.steps,
        checkpoint_every_n_versions=serve.recipe.config.checkpoint_every_n_versions,
        guidance_max_tokens=config.max_response_len,
        sequence_length=config.context_length,
        lora_rank=config.lora_rank,
        inference_tensor_parallel_size=serve.inference.tensor_parallel_size,
        megatron_tensor_parallel_size=serve.training.options.tensor_model_parallel_size,
        reef_host=serve.reef.host,
        reef_port=serve.reef.port,
        reef_token=_token(serve.reef.token),
        run_dir=_absolute(serve.reef.run_dir, base),
        state_dir=_absolute(config.state_dir, base),
        checkpoint_dir=_absolute(config.checkpoint_dir, base),
        megatron_checkpoint_dir=_absolute(serve.training.options.save, base),
        hf_checkpoint_template=hf_template,
        ray_actor_name=serve.training.ray_actor_name,
        ray_namespace=serve.training.ray_namespace,
        wandb=_wandb(serve.observability.wandb, base),
        **_harness_fields(config.harness),
    )


def _frozen_record(serve: FrozenServeSettings, config_path: Path, base: Path) -> RunSettings:
    """The ``RunSettings`` of a frozen run's settings file: the training-only settings (LoRA
    rank, TP sizes, checkpoints, Ray) are None or 0, since a frozen run trains nothing."""
    grid, run = serve.recipe.config, serve.recipe.config.guidance_ttt
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
        reef_token=_token(serve.reef.token),
        run_dir=_absolute(serve.reef.run_dir, base),
        state_dir=_absolute(run.state_dir, base),
        checkpoint_dir=None,
        megatron_checkpoint_dir=None,
        hf_checkpoint_template=None,
        ray_actor_name=None,
        ray_namespace=None,
        mode="frozen",
        guidance_upstream_url=serve.inference.upstream_url,
        wandb=_wandb(serve.observability.wandb, base),
        **_harness_fields(run.harness, "frozen"),
    )


def _tinker_record(serve: TinkerServeSettings, config_path: Path, base: Path) -> RunSettings:
    """The ``RunSettings`` of a trained run on Tinker (serve-tinker.yaml): no local weights, GPUs,
    TP sizes or Ray; the checkpoint directory holds Reef's Tinker manifests."""
    config, options = serve.training.config, serve.training.options
    return RunSettings(
        config_path=config_path,
        task=config.task,
        model=config.model,
        model_path=None,
        groups_per_step=serve.recipe.config.groups_per_step,
        rollouts_per_group=serve.recipe.config.rollouts_per_group,
        steps=config.steps,
        checkpoint_every_n_versions=serve.recipe.config.checkpoint_every_n_versions,
        guidance_max_tokens=config.max_response_len,
        sequence_length=config.context_length,
        lora_rank=config.lora_rank,
        inference_tensor_parallel_size=0,
        megatron_tensor_parallel_size=0,
        reef_host=serve.reef.host,
        reef_port=serve.reef.port,
        reef_token=_token(serve.reef.token),
        run_dir=_absolute(serve.reef.run_dir, base),
        state_dir=_absolute(config.state_dir, base),
        checkpoint_dir=_absolute(options.state_dir, base),
        megatron_checkpoint_dir=None,
        hf_checkpoint_template=None,
        ray_actor_name=None,
        ray_namespace=None,
        training_backend="tinker",
        tinker={
            "api_key_env": options.api_key_env,
            "kl_coef": options.kl_coef,
            "learning_rate": options.learning_rate,
            "price_per_million_tokens": config.tinker.price_per_million_tokens.model_dump(),
        },
        wandb=_wandb(serve.observability.wandb, base),
        **_harness_fields(config.harness, "tinker"),
    )
