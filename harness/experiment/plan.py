"""The plan of `guidance-ttt experiment PLAN.yaml`: its file, checked, and the runs it names.

The plan (docs/experiments.md):

    name: arms-rehearsal        # the experiment directory defaults to work/<name>
    stand_ins: true             # the rehearsal's stand-in models and local judge (CPU)
    arms: [guidance-ttt, unguided, best-of-n, {arm: unguided, parent_selection: greedy}]
    seeds: [0, 1, 2]
    steps: 2
    groups: 1
    rollouts: 2
    judge: {cases: 2, seed: 11} # stand-ins only: the generated suite every run is judged on
    parallel: 1                 # runs at once
    spend_limit: {max_tokens: null, max_cost_usd: null}   # per run

`load_plan` reads and checks a plan (a `ValueError` naming the key and the fix); `Plan.runs()`
lists its arm × seed runs, each with the state directory `<arm>-s<seed>`. Running them is
`harness.experiment.runs`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness.arms import ARMS, DEFAULT_SELECTION, SELECTIONS, Arm


@dataclass(frozen=True)
class PlannedRun:
    """One run of the plan: its arm and seed and where its state lives."""

    arm: Arm
    directory: str

    @property
    def name(self) -> str:
        return self.directory


@dataclass(frozen=True)
class Plan:
    name: str
    arms: tuple[Arm, ...]
    seeds: tuple[int, ...]
    steps: int
    groups: int
    rollouts: int
    stand_ins: bool
    settings: Path | None
    judge_cases: int
    judge_seed: int
    parallel: int
    max_tokens: int | None
    max_cost_usd: float | None
    directory: Path | None
    document: Mapping[str, Any]

    def runs(self) -> list[PlannedRun]:
        out = []
        for spec in self.arms:
            for seed in self.seeds:
                arm = Arm(spec.name, spec.parent_selection, seed)
                out.append(PlannedRun(arm, f"{arm.label().replace('/', '-')}-s{seed}"))
        return out


def _arm(item: Any, where: str) -> Arm:
    if isinstance(item, str):
        return Arm(item, DEFAULT_SELECTION)
    if isinstance(item, Mapping) and set(item) <= {"arm", "parent_selection"}:
        return Arm(str(item.get("arm")), str(item.get("parent_selection", DEFAULT_SELECTION)))
    raise ValueError(
        f"{where}: an arm is one of {', '.join(ARMS)} or {{arm: ..., parent_selection: "
        f"{'|'.join(SELECTIONS)}}}, got {item!r}"
    )


PLAN_KEYS = {
    "name",
    "arms",
    "seeds",
    "steps",
    "groups",
    "rollouts",
    "stand_ins",
    "settings",
    "judge",
    "parallel",
    "spend_limit",
    "directory",
    "task",
}


EXAMPLES = {"judge": "{cases: 2, seed: 11}", "spend_limit": "{max_tokens: null, max_cost_usd: 5}"}


def load_plan(path: Path) -> Plan:
    """Read and check a plan; `ValueError` naming the key and the fix."""
    try:
        document = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"cannot read the plan {path}: {exc}") from exc
    if not isinstance(document, dict):
        raise ValueError(f"{path}: a plan is a YAML mapping (docs/experiments.md)")
    unknown = sorted(set(document) - PLAN_KEYS)
    if unknown:
        raise ValueError(f"{path}: unknown keys {unknown}; a plan has {sorted(PLAN_KEYS)}")
    try:
        arms = tuple(_arm(a, f"{path}: arms") for a in document.get("arms") or ())
        seeds = tuple(int(s) for s in document.get("seeds") or ())
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: {exc}") from exc
    if not arms or not seeds:
        raise ValueError(f"{path}: give `arms` and `seeds` (lists), e.g. seeds: [0, 1, 2]")
    stand_ins = bool(document.get("stand_ins", False))
    settings = document.get("settings")
    if not stand_ins and not settings:
        raise ValueError(
            f"{path}: give `settings:` (the settings file every run starts from) or "
            "`stand_ins: true` (the CPU rehearsal's stand-in models)"
        )
    judge = document.get("judge") or {}
    limit = document.get("spend_limit") or {}
    for key, section in (("judge", judge), ("spend_limit", limit)):
        if not isinstance(section, Mapping):
            raise ValueError(f"{path}: {key} is a mapping, e.g. {key}: {EXAMPLES[key]}")
    base = Path(path).resolve().parent
    return Plan(
        name=str(document.get("name") or Path(path).stem),
        arms=arms,
        seeds=seeds,
        steps=_count(document, "steps", 2, path),
        groups=_count(document, "groups", 2, path),
        rollouts=_count(document, "rollouts", 4, path),
        stand_ins=stand_ins,
        settings=None if not settings else (base / str(settings)).resolve(),
        judge_cases=_count(judge, "cases", 2, path, "judge."),
        judge_seed=_count(judge, "seed", 11, path, "judge.", least=0),
        parallel=_count(document, "parallel", 1, path),
        max_tokens=limit.get("max_tokens"),
        max_cost_usd=limit.get("max_cost_usd"),
        directory=None if not document.get("directory") else base / str(document["directory"]),
        document=document,
    )


def _count(
    section: Mapping[str, Any], key: str, default: int, path: Path, prefix: str = "", least: int = 1
) -> int:
    """`section[key]` (or `default`) as a whole number of at least `least`; `ValueError` naming
    the key, the value and the fix otherwise."""
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(
            f"{path}: {prefix}{key} must be a whole number ≥ {least}, got {value!r}; "
            f"e.g. {prefix}{key}: {default}"
        )
    return value
