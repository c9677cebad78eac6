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

A plan is bounded input: at most `MAX_PLAN_BYTES`, no YAML aliases or anchors (a plan is a few
lines, and aliases are how a small file expands to gigabytes — the "billion laughs"), every
count at most its `BOUNDS` entry (named in the refusal), at most `MAX_RUNS` arm × seed runs;
its `name` is a name (`NAME_PATTERN`), never a path, since the experiment directory defaults to
`work/<name>`; and a `settings:` file (read relative to the plan's folder) must exist, all
checked before any run starts.
"""

from __future__ import annotations

import re
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


#: The largest plan file read (a plan is a few lines).
MAX_PLAN_BYTES = 64 * 1024
#: The most runs (arms × seeds) one plan may name.
MAX_RUNS = 1000
#: The largest value each count may take.
BOUNDS = {
    "steps": 10_000,
    "groups": 1024,
    "rollouts": 1024,
    "parallel": 64,
    "judge.cases": 100_000,
    "judge.seed": 2**31 - 1,
}
#: What a plan `name` may be: a file name of letters, digits, `.`, `_`, `-`, not a path.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def read_plan_yaml(path: Path) -> Any:
    """The plan file's YAML, bounded: at most `MAX_PLAN_BYTES`, and no anchors or aliases
    (refused before anything is built from them). `ValueError` naming the file otherwise."""
    try:
        with Path(path).open("rb") as handle:
            data = handle.read(MAX_PLAN_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"cannot read the plan {path}: {exc}") from exc
    if len(data) > MAX_PLAN_BYTES:
        raise ValueError(
            f"{path}: a plan is at most {MAX_PLAN_BYTES // 1024} KiB (this one is larger); "
            "a plan lists arms, seeds and a few counts"
        )
    try:
        text = data.decode("utf-8")
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                mark = event.start_mark
                raise ValueError(
                    f"{path}, line {mark.line + 1}: YAML anchors and aliases (&name, *name) are "
                    "refused in a plan; write the value out"
                )
        return yaml.safe_load(text)
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ValueError(f"cannot read the plan {path}: {exc}") from exc


def _name(document: Mapping[str, Any], path: Path) -> str:
    name = str(document.get("name") or Path(path).stem)
    if not NAME_PATTERN.fullmatch(name) or name in {".", ".."}:
        raise ValueError(
            f"{path}: name {name!r} is not a name: the experiment directory defaults to "
            "work/<name>, so a name is letters, digits, '.', '_' and '-' (at most 100), not a "
            "path; e.g. name: arms (use `directory:` or --dir to place it elsewhere)"
        )
    return name


def _settings_path(value: Any, base: Path, path: Path) -> Path | None:
    if not value:
        return None
    resolved = (base / str(value)).resolve()
    if not resolved.is_file():
        relative = (
            ""
            if Path(str(value)).is_absolute()
            else f" (read relative to the plan's folder {base})"
        )
        raise ValueError(
            f"{path}: settings: {value} is not a file: {resolved}{relative}; give the settings "
            "file every run starts from, e.g. settings: serve-frozen.yaml beside the plan, or "
            "an absolute path"
        )
    return resolved


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
    document = read_plan_yaml(path)
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
    if len(arms) * len(seeds) > MAX_RUNS:
        raise ValueError(
            f"{path}: {len(arms)} arms × {len(seeds)} seeds is {len(arms) * len(seeds)} runs; "
            f"a plan names at most {MAX_RUNS} runs (MAX_RUNS)"
        )
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"{path}: seeds {list(seeds)} repeat a seed; each seed once")
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
        name=_name(document, path),
        arms=arms,
        seeds=seeds,
        steps=_count(document, "steps", 2, path),
        groups=_count(document, "groups", 2, path),
        rollouts=_count(document, "rollouts", 4, path),
        stand_ins=stand_ins,
        settings=_settings_path(settings, base, path),
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
    most = BOUNDS[prefix + key]
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise ValueError(
            f"{path}: {prefix}{key} must be a whole number from {least} to {most:,}, got "
            f"{_shown(value)}; e.g. {prefix}{key}: {default}"
        )
    return value


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
