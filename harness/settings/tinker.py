"""``serve-tinker.yaml``: a trained run on Reef's Tinker backend, and the settings it refuses.

The file is ``serve.yaml``'s trained run with the guidance LoRA trained on hosted Tinker
(reef-infra 0.1.3's ``reef.train.tinker_backend``, in-process topology: Tinker trains and Tinker
samples, no local GPU). It selects ``training.backend: tttd.deployment:TTTDTinkerDeployment``
(Reef's ``TinkerDeployment``, which first checks the file with these models) or Reef's own
``tinker``. Reef parses ``training.options`` into its ``TinkerConfig``; the keys below are that
dataclass's fields, hyphenated as Reef folds them.

What the same run setting becomes on each backend (docs/training.md, "The same settings on
Tinker"): G, R and the checkpoint cadence stay ``recipe.config``; the LoRA rank is
``training.options.lora-rank`` (Reef passes it to ``create_lora_training_client``); Adam's lr is
``learning-rate`` (Reef sends it as ``AdamParams(learning_rate=…)`` and nothing else, so Tinker's
own β1 0.9, β2 0.95, ε 1e-12, no weight decay and no clipping apply); the KL coefficient is
``kl-coef`` (read by ``tttd.tinker_loss``); the β search is ``tttd.objective`` on the Reef host,
the same code on both backends.

A setting Reef's Tinker backend cannot honour is refused by name with its value and the fix:
every Slime/Megatron option of ``serve.yaml`` (``REFUSED_KEYS`` says why each one cannot be
honoured), the local-engine and colocation keys (Reef's in-process deployment refuses them), a
``kl-coef`` of 0 (``TTTDTinkerLoss`` needs the frozen-base KL), a ``batch-size`` (read only under
configured sizing, which tttd does not use), the keys Reef's in-process deployment manages
itself (``inference-timeout-s``, ``train-timeout-s``, ``max-staleness``) and a LoRA rank that
differs from ``training.config.lora_rank``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, ConfigDict, Field, field_validator, model_validator

from harness.settings.observability import ObservabilitySection
from harness.settings.serve import (
    RecipeSection,
    ReefOwned,
    ReefSection,
    Text,
    TrainingConfig,
)
from harness.validation import WITHHELD, HyphenSection, Integer, Section

#: Reef's built-in name of the backend, and this project's deployment that checks the file first.
TINKER_BACKEND = "tinker"
TINKER_DEPLOYMENT = "tttd.deployment:TTTDTinkerDeployment"
TINKER_BACKENDS = (TINKER_BACKEND, TINKER_DEPLOYMENT)
#: Reef's default for ``training.options.api-key-env`` (``TinkerConfig.api_key_env``).
DEFAULT_API_KEY_ENV = "TINKER_API_KEY"

#: The base models Tinker serves, as tinker-cookbook's ``model_info.py`` lists them (the copy in
#: TTT-Discover's checkout, test-time-training/discover at 96df74ffa7c4de04fb0be1c2ac332c7455fb4010:
#: get_llama_info, get_qwen_info, get_deepseek_info, get_gpt_oss_info, get_moonshot_info). The
#: live list is ``ServiceClient.get_server_capabilities()``, which needs the network and a key.
TINKER_MODELS = (
    "meta-llama/Llama-3.2-1B-Instruct",
    "meta-llama/Llama-3.2-3B-Instruct",
    "meta-llama/Llama-3.1-8B-Instruct",
    "meta-llama/Llama-3.2-1B",
    "meta-llama/Llama-3.2-3B",
    "meta-llama/Llama-3.1-8B",
    "meta-llama/Llama-3.1-70B",
    "meta-llama/Llama-3.3-70B-Instruct",
    "Qwen/Qwen3-VL-30B-A3B-Instruct",
    "Qwen/Qwen3-VL-235B-A22B-Instruct",
    "Qwen/Qwen3-4B-Base",
    "Qwen/Qwen3-8B-Base",
    "Qwen/Qwen3-14B-Base",
    "Qwen/Qwen3-30B-A3B-Base",
    "Qwen/Qwen3-0.6B",
    "Qwen/Qwen3-1.7B",
    "Qwen/Qwen3-4B",
    "Qwen/Qwen3-8B",
    "Qwen/Qwen3-14B",
    "Qwen/Qwen3-32B",
    "Qwen/Qwen3-30B-A3B",
    "Qwen/Qwen3-4B-Instruct-2507",
    "Qwen/Qwen3-30B-A3B-Instruct-2507",
    "Qwen/Qwen3-235B-A22B-Instruct-2507",
    "deepseek-ai/DeepSeek-V3.1",
    "deepseek-ai/DeepSeek-V3.1-Base",
    "openai/gpt-oss-20b",
    "openai/gpt-oss-120b",
    "moonshotai/Kimi-K2-Thinking",
)

_HOSTED = "Tinker trains on its own machines (Reef's in-process Tinker deployment)"
_ONE_STEP = (
    "tttd trains one optimizer step on the whole G×R step (the recipe's actual batch sizing), "
    "so Reef's Tinker backend lays out the batch itself"
)
_ADAM = (
    "Reef's Tinker backend sends only the learning rate (AdamParams(learning_rate=…)), so "
    "Tinker's own β1 0.9, β2 0.95, ε 1e-12, weight decay 0 and no clipping apply"
)
_ALWAYS = "the tttd loss family on Tinker does this always (tttd.tinker_loss)"


def _remove(reason: str) -> str:
    return f"{reason}; remove it"


#: serve.yaml's Slime/Megatron options, each with why Reef's Tinker backend cannot take it and
#: what to write instead. Any other key Reef's ``TinkerConfig`` lacks is refused as unknown.
SLIME_OPTIONS: dict[str, str] = {
    "lr": "the learning rate is training.options.learning-rate on Tinker; rename it",
    "megatron-lora-rank": "the LoRA rank is training.options.lora-rank on Tinker; rename it",
    "megatron-lora-alpha": _remove(
        "Tinker's LoRA has no alpha (tinker.types.LoraConfig: rank, seed and the trained parts)"
    ),
    "megatron-lora-dropout": _remove("Tinker's LoRA has no dropout (tinker.types.LoraConfig)"),
    "megatron-lora-target-modules": _remove(
        "Reef creates the adapter with Tinker's default parts (attention, MLP and the "
        "unembedding: create_lora_training_client(base_model, rank, seed)) and has no setting "
        "for them"
    ),
    **{
        name: _remove(_ADAM)
        for name in (
            "optimizer",
            "adam-beta1",
            "adam-beta2",
            "adam-eps",
            "weight-decay",
            "clip-grad",
            "lr-decay-style",
            "override-opt-param-scheduler",
        )
    },
    **{
        name: _remove(f"{_HOSTED}: there is no parallelism to set")
        for name in (
            "tensor-model-parallel-size",
            "pipeline-model-parallel-size",
            "context-parallel-size",
            "expert-model-parallel-size",
            "expert-tensor-parallel-size",
            "actor-num-nodes",
            "actor-num-gpus-per-node",
            "num-gpus-per-node",
        )
    },
    **{
        name: _remove(_ONE_STEP)
        for name in ("global-batch-size", "rollout-batch-size", "n-samples-per-prompt")
    },
    "num-rollout": _remove("STEPS is training.config.steps; the harness counts the steps"),
    **{
        name: _remove(_ALWAYS + ": the captured rollout log-probs are its reference")
        for name in ("use-rollout-logprobs", "loss-type", "custom-loss-function-path")
    },
    **{
        name: _remove(_ALWAYS + ": tttd.objective computes the advantages on the Reef host")
        for name in ("advantage-estimator", "custom-advantage-function-path")
    },
    **{
        name: _remove(
            f"{_HOSTED}: its checkpoints are tinker:// paths whose manifests live in "
            "training.options.state-dir"
        )
        for name in ("load", "ref-load", "save", "save-hf", "save-interval")
    },
}


_MANAGED = "Reef's in-process Tinker deployment sets it itself and refuses it here"

#: Keys of Reef's ``TinkerConfig`` that its in-process deployment manages (``runtime_config``
#: refuses them in ``training.options``), each with where to set it instead.
MANAGED_OPTIONS: dict[str, str] = {
    "inference-timeout-s": f"{_MANAGED}; set inference.timeout-s instead",
    "train-timeout-s": f"{_MANAGED}; set training.timeout-s instead",
    "max-staleness": _remove(f"{_MANAGED} (0: on-policy, the only value Tinker takes)"),
}


def _positive_finite(value: float) -> float:
    if not math.isfinite(value) or value <= 0:
        raise ValueError("must be a finite number > 0 (Reef's TinkerConfig refuses others)")
    return value


def _absent(reason: str) -> Any:
    """A key Reef knows elsewhere but the Tinker topology refuses: unset, or refused with why."""

    def refuse(value: Any) -> Any:
        if value is not None:
            raise ValueError(_remove(reason))
        return value

    return Annotated[Any, AfterValidator(refuse)]


class TinkerOptions(HyphenSection):
    """``training.options``: Reef 0.1.3's ``TinkerConfig``, with the values tttd needs."""

    REFUSED_KEYS: ClassVar[Mapping[str, str]] = {**SLIME_OPTIONS, **MANAGED_OPTIONS}

    #: Where Reef keeps the Tinker checkpoint manifests (``tinker-checkpoint.json``).
    state_dir: Text
    #: The LoRA rank Tinker creates the adapter with (= training.config.lora_rank).
    lora_rank: Integer = Field(ge=1)
    #: Adam's learning rate, sent with every optimizer step (the reference's 4e-5).
    learning_rate: Annotated[float, AfterValidator(_positive_finite)]
    #: The frozen-base KL coefficient (Reef's default 0 would train without it).
    kl_coef: float
    #: Comparison sets per optimizer step, read only under configured sizing.
    batch_size: Integer = 1
    #: The seed of the adapter's initial weights.
    seed: Integer = 0
    #: The NAME of the environment variable that holds the Tinker key.
    api_key_env: Text = DEFAULT_API_KEY_ENV
    #: Adapter slots a local engine keeps (Reef's; a local-engine topology only).
    max_loaded_adapters: Integer = Field(1, ge=1)
    #: The Tinker project the runs are billed to (none: the key's default).
    project_id: str | None = None

    @field_validator("kl_coef")
    @classmethod
    def _kl_folded_in(cls, value: float) -> float:
        if not math.isfinite(value) or value <= 0:
            raise ValueError(
                f"must be > 0, got {value!r}: tttd folds the frozen-base KL into its "
                "advantages and its Tinker loss refuses 0 (tttd.tinker_loss); the reference's "
                "is 0.1: set kl-coef: 0.1"
            )
        return value

    @field_validator("batch_size")
    @classmethod
    def _one_step_per_batch(cls, value: int) -> int:
        if value != 1:
            raise ValueError(_remove(f"{_ONE_STEP} and never reads batch-size {value}"))
        return value

    @field_validator("api_key_env")
    @classmethod
    def _a_name_not_a_key(cls, value: str) -> str:
        if not value.isidentifier():
            raise ValueError(
                "must be the NAME of the environment variable that holds the Tinker key (e.g. "
                f"{DEFAULT_API_KEY_ENV}), never the key itself {WITHHELD}"
            )
        return value


#: Dollars per million tokens, or null where the price is not set.
PerMillion = Annotated[float, Field(ge=0, allow_inf_nan=False)] | None


class TinkerPrices(Section):
    """``training.config.tinker.price_per_million_tokens``: Tinker's published prices for the
    base model, by what Tinker bills (its billing types: prefill, sample, train). No defaults:
    a price is a fact of your Tinker account's rate card, not of this repository."""

    #: Dollars per million prompt tokens (and the frozen base's log-probs).
    prefill: PerMillion = None
    #: Dollars per million sampled tokens.
    sample: PerMillion = None
    #: Dollars per million trained tokens.
    train: PerMillion = None


class TinkerRunConfig(Section):
    """``training.config.tinker``: what only the harness reads about Tinker (the prices)."""

    price_per_million_tokens: TinkerPrices = TinkerPrices()


class TinkerTrainingConfig(TrainingConfig):
    """``training.config`` of a Tinker run: ``serve.yaml``'s, with the Tinker prices."""

    tinker: TinkerRunConfig = TinkerRunConfig()


class TinkerTraining(ReefOwned):
    """``training``: the Tinker backend, the run-level config and Reef's ``TinkerConfig``."""

    #: tttd.deployment:TTTDTinkerDeployment (Reef's, checked first by the harness's models)
    #: or Reef's own tinker.
    backend: Literal[TINKER_BACKENDS]  # type: ignore[valid-type]
    config: TinkerTrainingConfig
    options: TinkerOptions
    colocate: _absent(f"{_HOSTED}: there are no local training GPUs to colocate on") = None
    ray_namespace: _absent(f"{_HOSTED}: no Ray bridge actor") = None
    ray_actor_name: _absent(f"{_HOSTED}: no Ray bridge actor") = None
    ray_address: _absent(f"{_HOSTED}: no Ray cluster") = None


class TinkerInference(ReefOwned):
    """``inference``: the base model by Tinker's name; Tinker samples it, no local engine."""

    model_config = ConfigDict(extra="ignore")

    model_path: Text
    num_gpus: _absent(f"{_HOSTED}; Tinker samples the model too, no local engine") = None
    tensor_parallel_size: _absent(f"{_HOSTED}; no local engine to split") = None
    backend: _absent(
        f"{_HOSTED}; this file samples on Tinker (a local SGLang engine is another topology)"
    ) = None
    options: _absent(f"{_HOSTED}; no local engine takes options") = None


class TinkerServeSettings(Section):
    """Every section of ``serve-tinker.yaml`` the harness reads, and the rules across them."""

    model_config = Section.model_config | {"extra": "ignore"}

    reef: ReefSection = ReefSection()
    inference: TinkerInference
    recipe: RecipeSection
    training: TinkerTraining
    observability: ObservabilitySection = ObservabilitySection()

    @model_validator(mode="after")
    def _one_model_one_rank(self) -> TinkerServeSettings:
        config, options = self.training.config, self.training.options
        if self.inference.model_path != config.model:
            raise ValueError(
                f"inference.model-path is {self.inference.model_path!r} but training.config.model "
                f"is {config.model!r}: Tinker trains and samples one base model; set "
                "inference.model-path: ${training.config.model}"
            )
        if options.lora_rank != config.lora_rank:
            raise ValueError(
                f"training.options.lora-rank is {options.lora_rank} but training.config.lora_rank "
                f"is {config.lora_rank}; set training.options.lora-rank: "
                "${training.config.lora_rank}"
            )
        return self


def is_tinker_backend(backend: object) -> bool:
    """Whether ``training.backend`` selects Reef's Tinker backend (this project's or Reef's)."""
    return isinstance(backend, str) and backend.strip() in TINKER_BACKENDS
