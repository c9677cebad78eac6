"""A run's own copy of its settings file: the one writer of settings YAML in the project.

A run started by the rehearsal or by an experiment gets a copy of its settings file (serve.yaml,
or a serve-frozen.yaml) in its state directory, with its own values filled in; run.sh, `reef
serve` and `RunSettings.load` then read that copy, so what ran is on disk beside what it made.

    document = load_document(FROZEN_TEMPLATE)
    fill_run(document, RunValues(state_dir, steps=2, groups=2, rollouts=4, ...))
    write_copy(document, state_dir / "serve-frozen.yaml", header="# Written by ...\n")
    forwarded = with_upstream(path, "http://127.0.0.1:PORT")   # the key forwarder's copy

`fill_run` sets the grid, STEPS, the state directory, the experiment arm and the spend limit of
either layout (a frozen file's `recipe.config.guidance-ttt`, a trained one's `training.config`,
whose Megatron batch and checkpoint and Reef run directories follow). Copies are written
atomically.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.settings import bounded_yaml
from harness.settings.document import FROZEN_SECTION
from harness.storage.atomic import atomic_write_bytes

__all__ = ["RunValues", "fill_run", "is_frozen", "load_document", "with_upstream", "write_copy"]


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


def is_frozen(document: dict[str, Any]) -> bool:
    """A frozen-guidance file (`recipe.config.guidance-ttt`) rather than a trained serve.yaml."""
    return FROZEN_SECTION[-1] in document.get("recipe", {}).get("config", {})


def fill_run(document: dict[str, Any], values: RunValues) -> dict[str, Any]:
    """Set the run's own values in `document` (in place) and return its run section."""
    config = document.setdefault("recipe", {}).setdefault("config", {})
    config.update({"groups-per-step": values.groups, "rollouts-per-group": values.rollouts})
    if is_frozen(document):
        run = config[FROZEN_SECTION[-1]]
    else:
        run = document["training"]["config"]
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
