"""Run settings: ``serve.yaml`` read once into a frozen ``RunSettings`` record (no Reef needed).

``serve.yaml`` is the single source of truth for the grid (G, R), STEPS, the token limits, the
LoRA rank, the TP size, where Reef listens and where state lives. Reef reads the file with
``reef serve -c serve.yaml``; the harness reads the same file here, with the same interpolation
rules as Reef 0.1.3, and checks once that Slime's batch layout matches the grid.

Interpolation, as Reef 0.1.3 does it: ``${VAR}`` is the environment variable (empty when unset),
``${VAR:?}`` must be set and non-empty, and ``${dotted.path}`` refers to another setting of the
file. Reef has no default form, so ``${VAR:-default}`` (the variable when set and non-empty,
else ``default``) is accepted only under ``training.config.harness``, the harness's own section
that Reef passes through untouched; anywhere else Reef would use that text literally, so it is
refused here.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

#: ``serve.yaml`` at the repository root.
DEFAULT_SERVE_YAML = Path(__file__).resolve().parents[1] / "serve.yaml"
#: Reef 0.1.3's environment reference: ``${VAR}`` or ``${VAR:?}``.
_ENV_REFERENCE = re.compile(r"\$\{(\w+)(:\?)?\}")
#: The harness-only default form ``${VAR:-default}``.
_DEFAULT_REFERENCE = re.compile(r"\$\{(\w+):-([^}]*)\}")
#: A reference to another setting, ``${section.key...}``.
_CONFIG_REFERENCE = re.compile(r"\$\{([\w.-]+)\}")
#: The section whose values only the harness reads (and where ``:-`` defaults are allowed).
HARNESS_SECTION = ("training", "config", "harness")
EXECUTOR_BACKENDS = ("gpt_oss_120b", "openrouter_glm_5_2")
REASONING_EFFORTS = ("low", "medium", "high")
DEFAULT_RAY_NAMESPACE = "reef"
#: The Slime options that must agree with the grid and STEPS.
GRID_OPTIONS = ("global-batch-size", "rollout-batch-size", "n-samples-per-prompt", "num-rollout")
DEFAULT_RAY_ACTOR_NAME = "reef-train-bridge"


class RunSettingsError(ValueError):
    """``serve.yaml`` is missing a setting, has a wrong value, or disagrees with itself."""


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
        try:
            number = _integer(value, f"training.options.{name}")
        except RunSettingsError as exc:
            errors.append(str(exc))
            continue
        if number != want:
            errors.append(
                f"training.options.{name} is {number} but {meaning} = {want}; "
                f"set training.options.{name}: {want}"
            )
    return errors


def _option(options: Mapping[str, Any], name: str) -> Any:
    for spelling in (name, name.replace("-", "_")):
        if spelling in options:
            return options[spelling]
    return None


def _integer(value: Any, where: str) -> int:
    if isinstance(value, bool):
        raise RunSettingsError(f"{where} must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+\s*", value):
        return int(value)
    raise RunSettingsError(f"{where} must be an integer, got {value!r}")


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
    model_path: Path
    groups_per_step: int
    rollouts_per_group: int
    steps: int
    checkpoint_every_n_versions: int
    guidance_max_tokens: int
    sequence_length: int
    lora_rank: int
    tensor_parallel_size: int
    reef_host: str
    reef_port: int
    run_dir: Path
    state_dir: Path
    checkpoint_dir: Path
    megatron_checkpoint_dir: Path
    hf_checkpoint_template: str
    ray_actor_name: str
    ray_namespace: str
    executor_backend: str
    gpt_oss_reasoning_effort: str
    judge_url: str
    judge_problem_id: str
    reef_token: str | None = field(default=None, repr=False)

    @property
    def scenario(self) -> str:
        """The Reef scenario of this task: ``guidance-ttt-<task-with-dashes>``."""
        return "guidance-ttt-" + self.task.replace("_", "-")

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
        """The run-identity fields a resume must match (SPEC §7), without the executor record."""
        return {
            "model": self.model,
            "executor": self.executor_backend,
            "gpt_oss_reasoning_effort": self.gpt_oss_reasoning_effort,
            "groups_per_step": self.groups_per_step,
            "rollouts_per_group": self.rollouts_per_group,
            "guidance_max_tokens": self.guidance_max_tokens,
            "sequence_length": self.sequence_length,
            "lora_rank": self.lora_rank,
            "tensor_parallel_size": self.tensor_parallel_size,
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
        """Read, interpolate and check ``serve.yaml``; raise ``RunSettingsError`` naming the fix.

        ``environ`` defaults to ``os.environ`` and ``base_dir`` (for relative paths) to the
        current directory, which is where ``reef serve`` resolves them too.
        """
        config_path = Path(path).expanduser().resolve()
        document = ServeDocument.read(config_path, os.environ if environ is None else environ)
        base = Path.cwd() if base_dir is None else Path(base_dir)
        return _settings_from(document, config_path, base)


class ServeDocument:
    """``serve.yaml`` with environment references expanded and ``${dotted.path}`` lookups."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.data = data

    @classmethod
    def read(cls, path: Path, environ: Mapping[str, str]) -> ServeDocument:
        """Load the YAML; expand ``${VAR}``, ``${VAR:?}`` and (harness section only) ``:-``."""
        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise RunSettingsError(f"cannot read {path}: {exc.strerror}") from exc
        except yaml.YAMLError as exc:
            raise RunSettingsError(f"{path} is not valid YAML: {exc}") from exc
        if not isinstance(loaded, dict):
            raise RunSettingsError(f"{path} must hold a YAML mapping at the top level")
        values = {**environ}
        values.setdefault("REEF_PYTHON", sys.executable)
        missing: dict[str, list[str]] = {}
        data = _expand_environment(loaded, values, missing, ())
        if missing:
            listed = "; ".join(f"{name} (at {', '.join(where)})" for name, where in missing.items())
            raise RunSettingsError(
                f"{path}: required environment variables are missing or empty: {listed}; "
                "set them before starting the run"
            )
        return cls(data)

    def get(self, *path: str, default: Any = None) -> Any:
        """The value at a public path (``-`` and ``_`` spellings agree), references resolved."""
        value = _lookup(self.data, path)
        return default if value is None else self.resolve(value, ".".join(path))

    def require(self, *path: str) -> Any:
        """Like :meth:`get`, but a missing or empty setting is an error naming it."""
        value = self.get(*path)
        if value is None or (isinstance(value, str) and not value.strip()):
            raise RunSettingsError(f"serve.yaml must set {'.'.join(path)}")
        return value

    def resolve(self, value: Any, where: str) -> Any:
        """Expand ``${dotted.path}`` references in a string value (Reef's second pass)."""
        if not isinstance(value, str):
            return value
        seen: set[str] = set()
        for _ in range(64):
            whole = _CONFIG_REFERENCE.fullmatch(value.strip())
            if whole is not None:
                # A value that is only a reference takes the referenced value's type.
                target = _lookup(self.data, tuple(whole.group(1).split(".")))
                if target is None:
                    raise RunSettingsError(
                        f"{where} refers to ${{{whole.group(1)}}}, which is not set"
                    )
                if not isinstance(target, str):
                    return target
                expanded = target
            else:
                expanded = _CONFIG_REFERENCE.sub(lambda match: self._text(match, where), value)
            if expanded == value:
                return value
            if expanded in seen:
                raise RunSettingsError(f"{where}: cyclic reference in {value!r}")
            seen.add(value)
            value = expanded
        raise RunSettingsError(f"{where}: references nest more than 64 levels")

    def _text(self, match: re.Match[str], where: str) -> str:
        target = _lookup(self.data, tuple(match.group(1).split(".")))
        if target is None:
            raise RunSettingsError(f"{where} refers to ${{{match.group(1)}}}, which is not set")
        return str(target)


def _expand_environment(
    node: Any, environ: Mapping[str, str], missing: dict[str, list[str]], path: tuple[str, ...]
) -> Any:
    if isinstance(node, dict):
        return {
            key: _expand_environment(value, environ, missing, (*path, str(key)))
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [
            _expand_environment(item, environ, missing, (*path, str(index)))
            for index, item in enumerate(node)
        ]
    if not isinstance(node, str):
        return node
    where = ".".join(path)
    if _DEFAULT_REFERENCE.search(node):
        normalized = tuple(part.replace("-", "_") for part in path[: len(HARNESS_SECTION)])
        if normalized != HARNESS_SECTION:
            raise RunSettingsError(
                f"{where} uses ${{VAR:-default}}, which Reef 0.1.3 does not expand (it would use "
                f"the text literally); use ${{VAR}} or ${{VAR:?}} there, or move the setting "
                f"under {'.'.join(HARNESS_SECTION)}"
            )
        node = _DEFAULT_REFERENCE.sub(
            lambda match: environ.get(match.group(1), "").strip() or match.group(2), node
        )

    def replace(match: re.Match[str]) -> str:
        value = environ.get(match.group(1), "")
        if match.group(2) and not value.strip():
            missing.setdefault(match.group(1), []).append(where)
        return value

    return _ENV_REFERENCE.sub(replace, node)


def _lookup(data: Any, path: tuple[str, ...]) -> Any:
    node = data
    for index, part in enumerate(path):
        if not isinstance(node, Mapping):
            return None
        spellings = [
            name
            for name in dict.fromkeys((part, part.replace("_", "-"), part.replace("-", "_")))
            if name in node
        ]
        if len(spellings) > 1:
            raise RunSettingsError(
                f"serve.yaml spells {'.'.join(path[: index + 1])} twice ({spellings})"
            )
        if not spellings:
            return None
        node = node[spellings[0]]
    return node


def _settings_from(document: ServeDocument, config_path: Path, base: Path) -> RunSettings:
    def integer(*path: str, default: Any = None) -> int:
        value = document.get(*path, default=default)
        if value is None:
            raise RunSettingsError(f"serve.yaml must set {'.'.join(path)}")
        return _integer(value, ".".join(path))

    def directory(*path: str) -> Path:
        value = Path(os.path.expanduser(str(document.require(*path))))
        return value if value.is_absolute() else (base / value).resolve()

    groups = integer("recipe", "config", "groups-per-step")
    rollouts = integer("recipe", "config", "rollouts-per-group")
    steps = integer("training", "config", "steps")
    options = document.get("training", "options", default={})
    if not isinstance(options, Mapping):
        raise RunSettingsError("serve.yaml training.options must be a mapping")
    # Only the options the checks read are resolved: Reef leaves references it cannot resolve
    # as text, and an option the harness never reads must not stop the run.
    resolved = {
        name: document.resolve(value, f"training.options.{name}")
        for name, value in options.items()
        if name.replace("_", "-") in GRID_OPTIONS
    }
    errors = grid_layout_errors(groups, rollouts, resolved, steps)
    if errors:
        raise RunSettingsError(f"{config_path}: " + "; ".join(errors))
    if steps < 1:
        raise RunSettingsError(f"training.config.steps must be >= 1, got {steps}")

    harness = ("training", "config", "harness")
    backend = str(document.require(*harness, "executor_backend"))
    if backend not in EXECUTOR_BACKENDS:
        raise RunSettingsError(
            f"{'.'.join(harness)}.executor_backend is {backend!r}; choose one of "
            f"{', '.join(EXECUTOR_BACKENDS)}"
        )
    effort = str(document.require(*harness, "gpt_oss_reasoning_effort"))
    if effort not in REASONING_EFFORTS:
        raise RunSettingsError(
            f"{'.'.join(harness)}.gpt_oss_reasoning_effort is {effort!r}; choose one of "
            f"{', '.join(REASONING_EFFORTS)}"
        )
    token = document.get("reef", "token")
    hf_template = str(document.require("training", "options", "save-hf"))
    if not Path(hf_template).is_absolute():
        hf_template = str(base / hf_template)
    return RunSettings(
        config_path=config_path,
        task=str(document.require("training", "config", "task")),
        model=str(document.require("training", "config", "model")),
        model_path=directory("inference", "model-path"),
        groups_per_step=groups,
        rollouts_per_group=rollouts,
        steps=steps,
        checkpoint_every_n_versions=integer(
            "recipe", "config", "checkpoint-every-n-versions", default=1
        ),
        guidance_max_tokens=integer("training", "config", "max_response_len"),
        sequence_length=integer("training", "config", "context_length"),
        lora_rank=integer("training", "config", "lora_rank"),
        tensor_parallel_size=integer("inference", "tensor-parallel-size"),
        reef_host=str(document.get("reef", "host", default="127.0.0.1")),
        reef_port=integer("reef", "port", default=8900),
        reef_token=(str(token).strip() or None) if token is not None else None,
        run_dir=directory("reef", "run-dir"),
        state_dir=directory("training", "config", "state_dir"),
        checkpoint_dir=directory("training", "config", "checkpoint_dir"),
        megatron_checkpoint_dir=directory("training", "options", "save"),
        hf_checkpoint_template=hf_template,
        ray_actor_name=str(
            document.get("training", "ray-actor-name", default=DEFAULT_RAY_ACTOR_NAME)
        ),
        ray_namespace=str(document.get("training", "ray-namespace", default=DEFAULT_RAY_NAMESPACE)),
        executor_backend=backend,
        gpt_oss_reasoning_effort=effort,
        judge_url=str(document.require(*harness, "judge_url")),
        judge_problem_id=str(document.require(*harness, "judge_problem_id")),
    )
