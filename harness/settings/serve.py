"""The rules of ``serve.yaml``, declared once as pydantic models, one per section.

``harness.settings.run_settings`` validates a whole file with :class:`ServeSettings` before it
builds the run's record; the tttd recipe package validates the same sections with the same models
while Reef resolves the file (``tttd.recipe``: ``recipe.config``, ``reef``, ``inference``;
``tttd.deployment``: ``training.config``), so ``run.py --describe``, ``reef serve --print-config``
and ``guidance-ttt doctor`` refuse the same mistakes with the same words, e.g.
``recipe.config.groups-per-step: must be ≥ 1, got 0``.

Sections Reef owns (``reef``, ``inference``, ``recipe.config``, ``training``, ``training.options``)
declare only the keys the harness reads; Reef refuses unknown keys there itself. Sections only this
project reads (``training.config`` and its ``harness``) refuse unknown keys, so a misspelt key stops
the run instead of being ignored. A new setting is a new field on its model (type, bounds, default;
a rule across keys as a validator), never a check written elsewhere.

Longer than the project's ~400 lines on purpose: every section model of the file, and the rules
across them, in one place, so that a rule is declared once and the readers (the harness, the
recipe under `reef serve`, the preflight) cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from harness import arms
from harness.adapters.executor.backends import (
    BUILTIN_BACKENDS,
    EXECUTOR_CHOICES,
    backend_from_name,
    configured_backend,
)
from harness.contract import DEFAULT_TASK_TEXT
from harness.settings.document import RunSettingsError, ServeDocument
from harness.settings.observability import ObservabilitySection
from harness.settings.requests import GuidanceSettings, RequestSettings
from harness.validation import (
    WITHHELD,
    HyphenSection,
    Integer,
    Section,
    error_lines,
    fold_keys,
    http_url,
    join,
    non_empty,
)

EXECUTOR_BACKENDS = tuple(EXECUTOR_CHOICES)
DEFAULT_RAY_NAMESPACE = "reef"
DEFAULT_RAY_ACTOR_NAME = "reef-train-bridge"
#: The Slime options that must agree with the grid and STEPS.
GRID_OPTIONS = ("global-batch-size", "rollout-batch-size", "n-samples-per-prompt", "num-rollout")
#: The seed record a run starts from, relative to the task directory (``harness.seed``).
DEFAULT_SEED_FILE = "solution/seed.json"


def _text_of_number(value: Any) -> Any:
    # A problem id written as a bare YAML number is still an id.
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


Text = Annotated[str, AfterValidator(non_empty)]
Url = Annotated[str, AfterValidator(http_url)]
Identifier = Annotated[str, BeforeValidator(_text_of_number), AfterValidator(non_empty)]


class ReefOwned(HyphenSection):
    """A section Reef owns and checks itself: only the keys the harness reads are declared."""

    model_config = ConfigDict(extra="ignore")


# --------------------------------------------------------------------------- Reef's sections


class ReefSection(ReefOwned):
    """``reef``: where the service listens, its token, where its services log."""

    host: str = "127.0.0.1"
    port: Integer = Field(8900, ge=1, le=65535)
    token: str | None = None
    run_dir: Text = ".reef/run"


class InferenceSection(ReefOwned):
    """``inference``: the served model and the tensor-parallel size of each SGLang engine (Reef
    starts ``num-gpus / tensor-parallel-size`` engines)."""

    model_path: Text
    tensor_parallel_size: Integer = Field(ge=1)
    #: GPUs Reef's Slime and SGLang use (run.sh makes them CUDA_VISIBLE_DEVICES 0,1).
    num_gpus: Integer = Field(1, ge=1)


class RecipeConfig(ReefOwned):
    """``recipe.config``: the tttd recipe's step grid and Reef's checkpoint cadence."""

    groups_per_step: Integer = Field(ge=1)
    #: A group of one has no relative reward.
    rollouts_per_group: Integer = Field(ge=2)
    checkpoint_every_n_versions: Integer = Field(1, ge=1)


class RecipeSection(ReefOwned):
    """``recipe``: only its ``config`` is read here."""

    config: RecipeConfig


class TrainingOptions(ReefOwned):
    """``training.options`` (Slime's native options): the batch layout and the checkpoint paths."""

    global_batch_size: Integer | None = None
    rollout_batch_size: Integer | None = None
    n_samples_per_prompt: Integer | None = None
    num_rollout: Integer | None = None
    #: Megatron's tensor-parallel size for training (Slime's default is 1).
    tensor_model_parallel_size: Integer = Field(1, ge=1)
    save: Text
    save_hf: Text


# ------------------------------------------------------------------- this project's sections


class ExperimentConfig(Section):
    """``harness.experiment``: which arm of an experiment this run is, its parent selection and
    its run seed (``harness.arms``). All three are part of the run's identity: a resume with
    another value is refused naming the key."""

    arm: Literal["guidance-ttt", "unguided", "best-of-n"] = arms.DEFAULT_ARM
    parent_selection: Literal["puct", "greedy", "uniform"] = arms.DEFAULT_SELECTION
    #: PUCT tie-breaks (ids derive from it), uniform draws, the executor's sampling seeds.
    run_seed: Integer = Field(arms.DEFAULT_RUN_SEED, ge=0)
    #: The experiment this run belongs to (`guidance-ttt experiment` writes it; not identity):
    #: its runs share one W&B group and are named by arm and seed.
    name: str | None = None


class SpendLimit(Section):
    """``harness.spend_limit``: stop at a step boundary once the run has spent this much (the
    step in progress completes; raising the limit resumes). Unset: no limit."""

    max_cost_usd: float | None = Field(None, gt=0)
    max_tokens: Integer | None = Field(None, ge=1)


#: Dollars per million tokens: a number ≥ 0, or null where the price is unknown.
DollarsPerMtok = Annotated[float, Field(ge=0, allow_inf_nan=False, strict=True)] | None


class ModelPrice(Section):
    """One model's entry of ``harness.pricing`` (as in harness/observe/pricing.yaml)."""

    input_per_mtok: DollarsPerMtok
    output_per_mtok: DollarsPerMtok


def _blank_is_unset(value: Any) -> Any:
    # `${VAR:-}` expands to "" when the variable is unset: the preset's value then applies.
    return None if isinstance(value, str) and not value.strip() else value


def _unset(kind: Any) -> Any:
    return Annotated[kind | None, BeforeValidator(_blank_is_unset)]


class ExecutorSettings(Section):
    """``harness.executor``: the executor by endpoint and model. Every key is optional for a
    preset (``executor_backend: gpt_oss_120b | openrouter_glm_5_2``, whose values are the
    reference's) and replaces the preset's value; ``executor_backend: openai_compatible`` needs
    ``base_url`` and ``model``. Empty means unset (``${VAR:-}``)."""

    #: The OpenAI-compatible base URL, with ``/v1`` (requests go to ``<base_url>/chat/...``).
    base_url: _unset(Url) = None
    #: The model id the endpoint serves (``GET <base_url>/models`` lists it).
    model: _unset(str) = None
    #: The *name* of the environment variable that holds the key (none: no key is sent).
    api_key_env: _unset(str) = None
    temperature: _unset(Annotated[float, Field(ge=0)]) = None
    #: GPT-OSS's effort for that preset; ``reasoning_effort`` in the body of a generic endpoint.
    reasoning_effort: _unset(str) = None
    #: Fields merged into every request body (e.g. ``{reasoning: {effort: high}}``).
    extra_body: dict[str, Any] | None = None
    max_tokens: _unset(Annotated[Integer, Field(ge=1)]) = None
    timeout_s: _unset(Annotated[float, Field(gt=0)]) = None
    max_retries: _unset(Annotated[Integer, Field(ge=0)]) = None
    #: How the bodies are shaped (harness.settings.requests): dialect, drop, extra_body.
    request: RequestSettings | None = None

    @field_validator("api_key_env")
    @classmethod
    def _a_name_not_a_key(cls, value: str | None) -> str | None:
        if value is not None and not value.isidentifier():
            raise ValueError(
                "must be the NAME of the environment variable that holds the key (e.g. "
                f"MY_API_KEY), never the key itself {WITHHELD}"
            )
        return value

    def overrides(self) -> dict[str, Any]:
        """The keys that are set, as `configured_backend` takes them (``request`` becomes
        ``dialect`` and ``drop``; its ``extra_body`` is merged over ``extra_body``)."""
        values = {key: value for key, value in self.model_dump().items() if value is not None}
        request = values.pop("request", None)
        if request is not None:
            values["dialect"] = request["dialect"]
            if request["drop"]:
                values["drop"] = list(request["drop"])
            if request["extra_body"]:
                values["extra_body"] = {**(values.get("extra_body") or {}), **request["extra_body"]}
        return values


class HarnessConfig(Section):
    """``training.config.harness`` (read by the harness only): the frozen executor, the judge, the
    seed, the rollout and executor concurrency, and ``run.sh``'s start-up deadline."""

    executor_backend: str
    gpt_oss_reasoning_effort: str
    judge_url: Url
    # Empty: the task's own `judge_problem_id` (contract.json); set it only to override.
    judge_problem_id: Annotated[str, BeforeValidator(_text_of_number)] = ""
    seed: Text = DEFAULT_SEED_FILE
    #: What both models read: `reference` (the task's instruction.md and contract.json, the
    #: reference's facts only) or a variant under the task's `variants/` (e.g. `full`).
    task_text: Text = DEFAULT_TASK_TEXT
    #: Rollouts that run at once (the reference runs at most 8).
    max_rollout_workers: Integer = Field(8, ge=1)
    #: Executor requests in flight (the reference's cap is 8); at most ``max_rollout_workers``.
    executor_max_in_flight: Integer = Field(8, ge=1)
    #: How long ``run.sh`` waits for the Reef stack to become healthy (the reference: 3600 s).
    startup_deadline_s: Integer = Field(3600, ge=1)
    experiment: ExperimentConfig = ExperimentConfig()
    spend_limit: SpendLimit = SpendLimit()
    #: The executor by endpoint and model (presets' values replaced key by key).
    executor: ExecutorSettings = Field(default_factory=ExecutorSettings, validate_default=True)
    #: The guidance endpoint's request options (frozen mode; harness.settings.requests).
    guidance: GuidanceSettings = Field(default_factory=GuidanceSettings)
    #: Free disk the preflight asks for at the state directory, in GB (unset: 100 for a trained
    #: run, which keeps Megatron checkpoints; 5 for a frozen one, which keeps none, and for one
    #: on Tinker, which keeps only checkpoint manifests).
    min_free_gb: _unset(Annotated[float, Field(ge=0)]) = None
    #: Per-model prices over harness/observe/pricing.yaml (docs/observability.md), checked here;
    #: `RunSettings.pricing` hands them to harness.observe.cost.
    pricing: dict[str, ModelPrice] | None = None

    @field_validator("seed")
    @classmethod
    def _inside_the_task(cls, value: str) -> str:
        if Path(value).is_absolute() or ".." in Path(value).parts:
            raise ValueError(
                f"must name a seed record inside the task directory, e.g. {DEFAULT_SEED_FILE}"
            )
        return value

    @field_validator("task_text")
    @classmethod
    def _a_folder_name(cls, value: str) -> str:
        if not value.replace("-", "_").isidentifier():
            raise ValueError(
                f"must be {DEFAULT_TASK_TEXT!r} or the name of a folder under the task's "
                "variants/, e.g. full"
            )
        return value

    @field_validator("executor_max_in_flight")
    @classmethod
    def _no_more_in_flight_than_rollouts(cls, value: int, info: ValidationInfo) -> int:
        workers = info.data.get("max_rollout_workers")
        if workers is not None and value > workers:
            raise ValueError(
                f"must not exceed max_rollout_workers ({workers}): each executor request "
                f"belongs to a running rollout; set executor_max_in_flight ≤ {workers} or raise "
                "max_rollout_workers"
            )
        return value

    @field_validator("executor_backend")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        if value not in EXECUTOR_CHOICES:
            raise ValueError(f"must be one of {', '.join(EXECUTOR_CHOICES)}")
        return value

    @field_validator("gpt_oss_reasoning_effort")
    @classmethod
    def _effort_the_backend_takes(cls, value: str, info: ValidationInfo) -> str:
        backend = info.data.get("executor_backend")
        if backend is not None and backend not in BUILTIN_BACKENDS:
            return value  # a generic endpoint takes executor.reasoning_effort
        try:  # the backend table owns which efforts each backend takes
            backend_from_name(backend or EXECUTOR_BACKENDS[0], reasoning_effort=value)
        except ValueError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("executor")
    @classmethod
    def _executor_is_complete(
        cls, value: ExecutorSettings, info: ValidationInfo
    ) -> ExecutorSettings:
        preset, effort = (
            info.data.get("executor_backend"),
            info.data.get("gpt_oss_reasoning_effort"),
        )
        workers = info.data.get("executor_max_in_flight") or 8
        if preset is None or effort is None:
            return value  # already refused by name
        arguments = _executor_arguments(preset, effort, value, workers)
        try:  # the same builder the run uses: a file it would refuse is refused here
            configured_backend(preset, **arguments)
        except ValueError as exc:
            raise ValueError(f"{exc} {WITHHELD}") from None
        return value


def executor_arguments(gpt_oss_effort: str, harness: HarnessConfig) -> dict[str, Any]:
    """`configured_backend`'s keyword arguments from the harness section: the executor keys that
    are set, GPT-OSS's effort from ``gpt_oss_reasoning_effort`` for that preset (a generic
    endpoint sends ``executor.reasoning_effort`` only), and the in-flight bound."""
    return _executor_arguments(
        harness.executor_backend, gpt_oss_effort, harness.executor, harness.executor_max_in_flight
    )


def _executor_arguments(
    preset: str, effort: str, executor: ExecutorSettings, in_flight: int
) -> dict[str, Any]:
    arguments = executor.overrides()
    if preset == "gpt_oss_120b":
        arguments.setdefault("reasoning_effort", effort)
    elif preset in BUILTIN_BACKENDS:
        arguments.pop("reasoning_effort", None)
    arguments["concurrency"] = in_flight
    return arguments


class RunConfig(Section):
    """The run-level settings every run has, trained (``training.config``) or frozen
    (``recipe.config.guidance-ttt``): model, task, steps, token limits, state, harness."""

    model: Text
    task: Text
    steps: Integer = Field(ge=1)
    context_length: Integer = Field(ge=1)
    max_response_len: Integer = Field(ge=1)
    state_dir: Text
    harness: HarnessConfig

    @field_validator("max_response_len")
    @classmethod
    def _response_fits_the_context(cls, value: int, info: ValidationInfo) -> int:
        context = info.data.get("context_length")
        if context is not None and value >= context:
            raise ValueError(
                f"must be less than context_length ({context}): the prompt needs room in the "
                "context too"
            )
        return value


class TrainingConfig(RunConfig):
    """``training.config``: the run-level settings Reef keeps as the experiment's training
    config, with what only training has (the LoRA rank, the checkpoint directory)."""

    lora_rank: Integer = Field(ge=1)
    checkpoint_dir: Text

    @model_validator(mode="after")
    def _the_arm_trains(self) -> TrainingConfig:
        request = self.harness.guidance.request
        if request.shape() != RequestSettings().shape():
            raise ValueError(
                "harness.guidance.request: a trained run's guidance model is Reef's SGLang, "
                "which takes the reference's body; request options are for frozen mode "
                "(serve-frozen.yaml)"
            )
        arm = self.harness.experiment.arm
        if arm != arms.DEFAULT_ARM:
            raise ValueError(
                f"harness.experiment.arm: {arm} calls no guidance model, so a trained run has "
                "nothing to train; run it from a frozen settings file (serve-frozen.yaml)"
            )
        return self


class TrainingSection(ReefOwned):
    """``training``: the bridge actor's address, the run-level config and Slime's options."""

    ray_namespace: Text = DEFAULT_RAY_NAMESPACE
    ray_actor_name: Text = DEFAULT_RAY_ACTOR_NAME
    config: TrainingConfig
    options: TrainingOptions


class ServeSettings(Section):
    """Every section of ``serve.yaml`` the harness reads, and the rules across sections."""

    model_config = ConfigDict(extra="ignore")

    reef: ReefSection = ReefSection()
    inference: InferenceSection
    recipe: RecipeSection
    training: TrainingSection
    observability: ObservabilitySection = ObservabilitySection()

    @model_validator(mode="after")
    def _batch_layout_matches_the_grid(self) -> ServeSettings:
        grid = self.recipe.config
        options = self.training.options.model_dump(by_alias=True)
        errors = grid_layout_errors(
            grid.groups_per_step, grid.rollouts_per_group, options, self.training.config.steps
        )
        if errors:
            raise ValueError("; ".join(errors))
        return self


def grid_layout_errors(
    groups_per_step: int,
    rollouts_per_group: int,
    options: Mapping[str, Any],
    steps: int | None = None,
) -> list[str]:
    """The ways Slime's native options disagree with the G×R grid (empty when they agree).

    One optimizer step covers the whole grid (``global-batch-size`` = G·R), a rollout batch is
    one step's G prompts with R samples each, and ``num-rollout`` is STEPS when ``steps`` is
    given. Each message names the option, both values and the fix. Reef's recipe hook and the
    harness both call this, so the two refuse the same files with the same words.
    """
    expected = {
        "global-batch-size": (
            groups_per_step * rollouts_per_group,
            f"groups-per-step × rollouts-per-group = {groups_per_step} × {rollouts_per_group}",
        ),
        "rollout-batch-size": (groups_per_step, "groups-per-step"),
        "n-samples-per-prompt": (rollouts_per_group, "rollouts-per-group"),
    }
    if steps is not None:
        expected["num-rollout"] = (steps, "training.config.steps (STEPS)")
    errors = []
    for name, (want, meaning) in expected.items():
        value = _option(options, name)
        if value is None:
            errors.append(f"training.options.{name} is not set; set it to {want} ({meaning})")
            continue
        if isinstance(value, bool) or not str(value).strip().lstrip("+-").isdigit():
            errors.append(f"training.options.{name} must be an integer, got {value!r}")
            continue
        if int(value) != want:
            errors.append(
                f"training.options.{name} is {int(value)} but {meaning} = {want}; "
                f"set training.options.{name}: {want}"
            )
    return errors


def _option(options: Mapping[str, Any], name: str) -> Any:
    for spelling in (name, name.replace("-", "_")):
        if options.get(spelling) is not None:
            return options[spelling]
    return None


def section_errors(model: type[BaseModel], data: Any, where: str) -> list[str]:
    """Validate ``data`` (one section, already resolved) with ``model``; one line per problem.

    ``where`` is the section's path in ``serve.yaml``. Keys are folded to the model's spelling
    first, as Reef folds them. The recipe package calls this on Reef's view of the file.
    """
    spelling = "-" if issubclass(model, HyphenSection) else "_"
    try:
        model.model_validate(fold_keys(data, spelling, where))
    except ValidationError as exc:
        return error_lines(exc, where, model)
    except ValueError as exc:
        return [str(exc)]
    return []


def model_input(document: ServeDocument, path: tuple[str, ...], model: type[BaseModel]) -> Any:
    """The part of ``document`` at ``path`` that ``model`` reads, with its references resolved.

    A section Reef owns contributes only the keys the model declares (Reef leaves references it
    cannot resolve as text, and a key the harness never reads must not stop the run); a section
    of this project's contributes every key, so an unknown one is refused by name.
    """
    raw = document.data if not path else document.raw(*path)
    where = ".".join(path)
    if not isinstance(raw, Mapping):
        return document.resolve_all(raw, where)
    spelling = "-" if issubclass(model, HyphenSection) else "_"
    folded = fold_keys(raw, spelling, where or "serve.yaml")
    declared = {info.alias or name: info for name, info in model.model_fields.items()}
    keep_unknown = model.model_config.get("extra") == "forbid"
    values: dict[str, Any] = {}
    for key, value in folded.items():
        info = declared.get(key)
        if info is None and not keep_unknown:
            continue
        annotation = getattr(info, "annotation", None)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            values[key] = model_input(document, (*path, key), annotation)
        else:
            values[key] = document.resolve_all(value, f"{where}.{key}" if where else str(key))
    return values


def validate_document[M: BaseModel](
    document: ServeDocument, config_path: Path, model: type[M]
) -> M:
    """``model`` validated from the whole settings file; RunSettingsError naming the file and
    every wrong key (one line each) when it breaks a rule."""
    try:
        return model.model_validate(model_input(document, (), model))
    except ValidationError as exc:
        raise RunSettingsError(f"{config_path}: " + join(error_lines(exc, "", model))) from None
    except ValueError as exc:
        raise RunSettingsError(f"{config_path}: {exc}") from None
