"""A run's own copy of its settings file (serve.yaml or serve-frozen.yaml), in its state
directory: the one writer of settings YAML in the project. run.sh, `reef serve`,
`RunSettings.load`, `status`, `resume` and `export` read that copy, so what ran is on disk beside
what it made. Copies are written atomically.

**`guidance-ttt run`'s copy**: the settings file with what the command line changed.

    copy = write_run_copy(Path("serve-frozen.yaml"), Path("work/run1"),
                          {"steps": 3, "groups": 1}, ["harness.max_rollout_workers=2"])

The named overrides (`NAMED`) and `--set KEY=VALUE` ones are set at their place in the file's
document; KEY is a dotted path from the document's root (`reef.port`), or from the run section
(`recipe.config.guidance-ttt` in frozen mode, `training.config` in trained mode:
`harness.max_rollout_workers`). VALUE is read as YAML (`3`, `true`, `null`, text). The copy is
then validated exactly as the file is (`RunSettings.load`): a wrong key or value is refused with
the key named, and nothing is written.

What the command line changed is remembered in `<state>/settings-overrides.json`, so the next
invocation on the same state directory starts from the settings file again with the same
changes (plus its own): a resume with only `--steps 3` keeps `--groups 1 --rollouts 2` of the
first invocation, and the run's identity stays what it was. A change to an identity key is then
refused by the run controller, naming the key.

**The rehearsal's and an experiment's copies**: the document with the run's own values filled in.

    document = load_document(FROZEN_TEMPLATE)
    fill_run(document, RunValues(state_dir, steps=2, groups=2, rollouts=4, ...))
    write_copy(document, state_dir / "serve-frozen.yaml", header="# Written by ...\n")
    forwarded = with_upstream(path, "http://127.0.0.1:PORT")   # the key forwarder's copy

`fill_run` sets the grid, STEPS, the state directory, the experiment arm and the spend limit of
either layout (a frozen file's `recipe.config.guidance-ttt`, a trained one's `training.config`,
whose Megatron batch and checkpoint and Reef run directories follow).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.settings import bounded_yaml
from harness.settings.document import FROZEN_SECTION, RunSettingsError
from harness.settings.run_settings import RunSettings
from harness.settings.tinker import is_tinker_backend
from harness.storage.atomic import atomic_write_bytes

__all__ = [
    "NAMED",
    "OVERRIDES_FILE",
    "RunValues",
    "apply_overrides",
    "copy_name",
    "fill_run",
    "is_frozen",
    "judge_url_given",
    "load_document",
    "overrides_of",
    "parse_set",
    "previous_overrides",
    "run_section",
    "with_upstream",
    "write_copy",
    "write_run_copy",
]

OVERRIDES_FILE = "settings-overrides.json"
TRAINED_RUN_SECTION = ("training", "config")


@dataclass(frozen=True)
class RunValues:
    """What a run's copy carries of its own."""

    state_dir: Path
    steps: int
    groups: int
    rollouts: int
    arm: str
    parent_selection: str
    run_seed: int
    max_cost_usd: float | None = None
    max_tokens: int | None = None


def load_document(path: Path) -> dict[str, Any]:
    """The settings file at `path` as a plain document (no interpolation), its aliases and size
    bounded (`harness.settings.bounded_yaml`: `YamlRefused`, a ValueError, in one line)."""
    document = bounded_yaml.read(Path(path))
    if not isinstance(document, dict):
        raise ValueError(f"{path} is not a settings file: its top level is not a mapping")
    return document


def is_frozen(document: Mapping[str, Any]) -> bool:
    """A frozen-guidance file (`recipe.config.guidance-ttt`) rather than a trained serve.yaml."""
    recipe = document.get("recipe")
    config = recipe.get("config") if isinstance(recipe, Mapping) else None
    return isinstance(config, Mapping) and FROZEN_SECTION[-1] in config


def _slime_batch(document: Mapping[str, Any]) -> bool:
    """Whether the file's global batch is Slime's ``global-batch-size`` (a trained run on
    Slime); a frozen run has none, and Reef's Tinker backend lays out its batch itself."""
    training = document.get("training")
    backend = training.get("backend") if isinstance(training, Mapping) else None
    return not is_frozen(document) and not is_tinker_backend(backend)


def fill_run(document: dict[str, Any], values: RunValues) -> dict[str, Any]:
    """Set the run's own values in `document` (in place) and return its run section."""
    config = document.setdefault("recipe", {}).setdefault("config", {})
    config.update({"groups-per-step": values.groups, "rollouts-per-group": values.rollouts})
    if is_frozen(document):
        run = config[FROZEN_SECTION[-1]]
    else:
        run = document["training"]["config"]
        if _slime_batch(document):
            document["training"]["options"]["global-batch-size"] = values.groups * values.rollouts
        run["checkpoint_dir"] = str(values.state_dir / "checkpoints")
        document["reef"]["run-dir"] = str(values.state_dir / "stack")
    run.update(steps=values.steps, state_dir=str(values.state_dir))
    harness = run.setdefault("harness", {})
    harness["experiment"] = {
        "arm": values.arm,
        "parent_selection": values.parent_selection,
        "run_seed": values.run_seed,
    }
    harness["spend_limit"] = {"max_cost_usd": values.max_cost_usd, "max_tokens": values.max_tokens}
    return run


def write_copy(document: dict[str, Any], path: Path, header: str = "") -> Path:
    """Write `document` to `path` atomically, after `header` (comment lines); returns `path`."""
    text = header + yaml.safe_dump(document, sort_keys=False)
    atomic_write_bytes(Path(path), text.encode("utf-8"))
    return Path(path)


def with_upstream(path: Path, url: str) -> Path:
    """A copy of the settings file `path` beside it (`<stem>-forwarded.yaml`) whose guidance
    upstream (`inference.upstream-url`) is `url`: the loopback key forwarder's address."""
    document = load_document(path)
    document["inference"]["upstream-url"] = url
    return write_copy(document, Path(path).with_name(Path(path).stem + "-forwarded.yaml"))


#: The named flags of `guidance-ttt run` and where each lives, relative to the run section
#: (a leading "/" is from the document's root).
NAMED: dict[str, str] = {
    "steps": "steps",
    "groups": "/recipe.config.groups-per-step",
    "rollouts": "/recipe.config.rollouts-per-group",
    "arm": "harness.experiment.arm",
    "selection": "harness.experiment.parent_selection",
    "seed": "harness.experiment.run_seed",
    "guidance_url": "/inference.upstream-url",
    "guidance_model": "/inference.upstream-model",
    "executor_url": "harness.executor.base_url",
    "executor_model": "harness.executor.model",
    "judge_url": "harness.judge_url",
}


def copy_name(document: Mapping[str, Any]) -> str:
    """The copy's file name: serve-frozen.yaml for a frozen-guidance file, else serve.yaml (the
    names `status` and the other read-only commands look for in a state directory)."""
    return "serve-frozen.yaml" if is_frozen(document) else "serve.yaml"


def run_section(document: Mapping[str, Any]) -> tuple[str, ...]:
    return FROZEN_SECTION if is_frozen(document) else TRAINED_RUN_SECTION


def parse_set(items: Sequence[str]) -> dict[str, Any]:
    """`KEY=VALUE` strings as {KEY: value}; VALUE read as YAML. Refused naming the item."""
    parsed: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise RunSettingsError(f"--set {item!r}: use KEY=VALUE, e.g. --set reef.port=8901")
        try:
            parsed[key.strip()] = bounded_yaml.load(value, f"--set {key}") if value.strip() else ""
        except (ValueError, yaml.YAMLError) as exc:
            raise RunSettingsError(f"--set {key}: {value!r} is not a YAML value: {exc}") from exc
    return parsed


def _path(document: Mapping[str, Any], key: str) -> tuple[str, ...]:
    """Where `key` lives: from the root when it starts with "/" or with a top-level key of the
    document, else from the run section."""
    if key.startswith("/"):
        return tuple(key[1:].split("."))
    parts = tuple(key.split("."))
    if parts[0] in document:
        return parts
    return (*run_section(document), *parts)


def _set(document: dict[str, Any], path: tuple[str, ...], value: Any, key: str) -> None:
    node: Any = document
    for i, part in enumerate(path[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            where = ".".join(path[: i + 1])
            raise RunSettingsError(f"--set {key}: {where} is a value, not a section")
        node = child
    node[path[-1]] = value


def overrides_of(named: Mapping[str, Any], sets: Mapping[str, Any]) -> dict[str, Any]:
    """The command line's changes as {dotted key: value} (named flags given as not None)."""
    changes = {NAMED[name]: value for name, value in named.items() if value is not None}
    changes.update(sets)
    return changes


def apply_overrides(
    document: dict[str, Any], changes: Mapping[str, Any], state_dir: Path
) -> dict[str, Any]:
    """`document` with `changes` and the state directory set (in place; also returned). A
    trained run's global batch on Slime follows the grid, as serve.yaml requires."""
    for key, value in changes.items():
        _set(document, _path(document, key), value, key)
    section = run_section(document)
    _set(document, (*section, "state_dir"), str(state_dir), "state_dir")
    if _slime_batch(document):
        config = document.get("recipe", {}).get("config", {})
        groups, rollouts = config.get("groups-per-step"), config.get("rollouts-per-group")
        if isinstance(groups, int) and isinstance(rollouts, int):
            batch = ("training", "options", "global-batch-size")
            _set(document, batch, groups * rollouts, "global-batch-size")
    return document


def previous_overrides(state_dir: Path) -> dict[str, Any]:
    """What earlier invocations on `state_dir` changed ({} for a new run)."""
    path = Path(state_dir) / OVERRIDES_FILE
    if not path.is_file():
        return {}
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunSettingsError(
            f"{path} is not readable JSON ({exc}); remove it to start over"
        ) from exc
    return dict(recorded.get("overrides") or {})


def write_run_copy(
    config: Path,
    state_dir: Path,
    named: Mapping[str, Any] | None = None,
    sets: Sequence[str] = (),
    *,
    environ: Mapping[str, str] | None = None,
    check: Callable[[RunSettings], None] | None = None,
    edit: Callable[[dict[str, Any]], None] | None = None,
) -> Path:
    """Write the run's settings copy into `state_dir` (see the module docstring) and return its
    path. `edit` changes the document once the copy is found valid (e.g. the W&B names of the
    run's own id). Raises `RunSettingsError` naming the key for a wrong override, or what
    `check` (given the new settings, e.g. the resume's identity check) raises; nothing is
    written then."""
    config = Path(config).expanduser().resolve()
    state_dir = Path(state_dir).expanduser().resolve()
    try:
        document = load_document(config)  # aliases and size bounded, as every settings read
    except (OSError, ValueError) as exc:
        raise RunSettingsError(f"--config {config}: {exc}") from exc
    changes = {**previous_overrides(state_dir), **overrides_of(named or {}, parse_set(sets))}
    apply_overrides(document, changes, state_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    copy = state_dir / copy_name(document)
    header = (
        f"# Written by `guidance-ttt run` from {config}, with what its command line changed\n"
        f"# ({OVERRIDES_FILE}); the run, status, resume and export read this copy.\n"
    )
    trial = write_copy(document, copy.with_name(f".{copy.name}.checking"), header)
    try:
        settings = RunSettings.load(trial, environ=environ)  # validated as the file is
        if check is not None:
            check(settings)
    except Exception:
        trial.unlink()
        raise
    if edit is not None:  # only once the copy is valid: a refused one leaves nothing behind
        edit(document)
        write_copy(document, trial, header)
    os.replace(trial, copy)
    recorded = {"settings_file": str(config), "overrides": changes}
    (state_dir / OVERRIDES_FILE).write_text(json.dumps(recorded, indent=2) + "\n", "utf-8")
    return copy


def judge_url_given(copy: Path, environ: Mapping[str, str]) -> bool:
    """True when the run names its judge: `$FRONTIERCS_JUDGE_URL` is set, or the copy's
    `harness.judge_url` is anything but the file's `${FRONTIERCS_JUDGE_URL:-...}` default (a URL
    written in the file, or one given with --judge-url). Else the command starts its own."""
    if environ.get("FRONTIERCS_JUDGE_URL", "").strip():
        return True
    document = load_document(Path(copy))
    node: Any = document
    for part in (*run_section(document), "harness", "judge_url"):
        node = node.get(part) if isinstance(node, Mapping) else None
    return not (node is None or str(node).startswith("${FRONTIERCS_JUDGE_URL"))
