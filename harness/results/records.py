"""The results records `export` writes, and the usage and cost they report.

- `runs.json`: `{"schema_version": 1, "runs": [run, ...]}`, one run per task (see `run_record`),
  each labelled with its `mode` (`trained` or `frozen`; one directory never mixes the two) and
  the `suite` its scores were measured on, and bound to its run by SHA-256 fingerprints
  (`provenance`);
- `trajectory.csv`: the rows of `harness.results.score_trajectory`, one task's rows replaced
  at a time.

`write_records` writes both atomically and `read_runs_json` reads one back; the rest computes
from a `RunView` (`provenance` also hashes the run's `resume-state.json` bytes).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.observe.cost import (
    CostEstimate,
    PriceTable,
    StepUsage,
    Usage,
    preflight_usage,
    total_usage,
    usage_by_step,
)
from harness.results.inspection import run_mode, run_suite, run_task_text, selected_case
from harness.results.run_view import RunView
from harness.results.score_trajectory import (
    TrajectoryRow,
    best_update,
    read_trajectory_csv,
    seed_entry,
    trajectory,
    trajectory_csv,
)
from harness.state import GUIDANCE_FORMAT_ERROR
from harness.storage.atomic import atomic_write_bytes
from harness.storage.library_json import library_json_bytes
from harness.storage.resume_state import RESUME_STATE
from harness.storage.state_files import exists, read_bytes, read_json_object

SCHEMA_VERSION = 1
#: The model name `models` gives when the state directory does not record it yet.
UNKNOWN_MODEL = "unknown model"


def read_runs_json(path: Path) -> list[dict[str, Any]]:
    """The runs of a `runs.json` (`{"schema_version": 1, "runs": [...]}`); a file of another
    shape is an error naming it."""
    document = read_json_object(Path(path))
    runs = document.get("runs")
    if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
        raise ValueError(f"{path}: not a runs.json (expected {{'runs': [...]}})")
    return runs


def sha256_bytes(data: bytes) -> str:
    """Hex SHA-256 of `data`."""
    return hashlib.sha256(data).hexdigest()


def provenance(view: RunView) -> dict[str, str | None]:
    """The SHA-256 fingerprints that bind a record to its run: the resume-state file's bytes, the
    committed archive as Discover `library.json` bytes (deterministic), and the seed solution."""
    resume = view.state_dir / RESUME_STATE
    return {
        "resume_state_sha256": sha256_bytes(read_bytes(resume)) if exists(resume) else None,
        "committed_library_sha256": sha256_bytes(library_json_bytes(view.archive)),
        "seed_sha256": sha256_bytes(seed_entry(view.archive).solution.encode("utf-8")),
    }


def run_usage(
    view: RunView, guidance: Mapping[str, Usage] | None = None, *, in_flight: bool = True
) -> dict[int, StepUsage]:
    """Usage per step over the committed rollouts and, with `in_flight`, the journaled rollouts
    of the step under way."""
    entries = list(view.archive.entries.values())
    if in_flight:
        entries += [e for _, _, e in view.in_flight]
    return usage_by_step(entries, guidance)


def models(view: RunView) -> tuple[str, str]:
    """(guidance model, executor model) ids: from the resume state, or before the first commit
    from the last `run_started` event and the journaled entries' executor backend (`unknown`
    when none of them names it)."""
    if view.resume is not None:
        executor = view.resume.executor_backend.get("model") or view.resume.identity.executor
        return view.resume.identity.model, str(executor)
    started = view.events_of("run_started")
    last = started[-1] if started else {}
    backends = [e.metadata.get("execution_backend") for _, _, e in view.in_flight]
    named = [str(b["model"]) for b in backends if isinstance(b, dict) and b.get("model")]
    guide = last.get("guidance_model") or UNKNOWN_MODEL
    executor = last.get("executor_model") or (named[0] if named else UNKNOWN_MODEL)
    return str(guide), str(executor)


def run_cost(
    view: RunView,
    prices: PriceTable,
    guidance: Mapping[str, Usage] | None = None,
    *,
    in_flight: bool = True,
) -> tuple[StepUsage, CostEstimate]:
    """The run's total usage (see `run_usage`, plus the preflight's real calls of every launch,
    `preflight_usage`) and its cost estimate."""
    total = total_usage(run_usage(view, guidance, in_flight=in_flight).values())
    total = total + preflight_usage(view.events)
    guide, executor = models(view)
    return total, prices.estimate(total.by_model(guide, executor))


def run_record(
    view: RunView,
    task: str,
    *,
    prices: PriceTable,
    gpu: str | None = None,
    run_name: str | None = None,
    guidance: Mapping[str, Usage] | None = None,
) -> dict[str, Any]:
    """The runs.json record of the committed part of a run (the in-flight step is left out)."""
    if view.resume is None or view.committed_step < 0:
        raise ValueError(f"{view.state_dir}: no committed step yet, nothing to export")
    rows = trajectory(view.archive, task, view.committed_step)
    steps = [r for r in rows if r.update > 0]
    entries = [e for e in view.archive.entries.values() if e.timestep >= 1]
    identity = view.resume.identity
    guide, executor = models(view)
    usage, cost = run_cost(view, prices, guidance, in_flight=False)
    finished = [e for e in view.events_of("run_finished") if e.get("next_step") == view.next_step]
    record = {
        "task": task,
        "run_name": run_name or view.state_dir.resolve().name,
        "mode": run_mode(view),
        "task_text": run_task_text(view),
        "arm": identity.arm,
        "parent_selection": identity.parent_selection,
        "run_seed": identity.run_seed,
        "suite": run_suite(view),
        "framework": "Reef",
        "status": "completed" if finished and not view.in_flight else "in_progress",
        "models": {"guidance": guide, "executor": executor},
        "search": {
            "updates": len(steps),
            "groups_per_update": identity.groups_per_step,
            "rollouts_per_group": identity.rollouts_per_group,
            "sampled_rollouts": sum(r.sampled_rollouts for r in steps),
            "valid_rollouts": sum(r.valid_rollouts or 0 for r in steps),
            "well_formed_guidance": sum(
                1 for e in entries if e.verifier_status != GUIDANCE_FORMAT_ERROR
            ),
            "score_direction": view.direction,
            "seed_score": rows[0].cumulative_best,
            "best_score": rows[-1].cumulative_best,
            "best_update": best_update(rows, view.direction),
            "elapsed_seconds": sum(float(s["elapsed_s"]) for s in view.resume.step_summaries),
        },
        "training": {
            "gpu": gpu,
            "lora_rank": identity.lora_rank,
            "guidance_max_tokens": identity.guidance_max_tokens,
            "sequence_length": identity.sequence_length,
        },
        "usage": {
            **usage.to_dict(),
            "cost": cost.to_dict(),
            "per_step": _per_step(view, prices, guidance),
            # in the totals above, in no step: the preflight's real calls, every launch
            "preflight": preflight_usage(view.events).to_dict(),
        },
        "selected_case": selected_case(view.archive),
        "provenance": provenance(view),
    }
    reevaluation = read_reevaluation(view.state_dir)
    if reevaluation is not None:
        record["fixed_candidate_reevaluation"] = reevaluation
    return record


#: Where `guidance-ttt reevaluate` writes its figures, relative to the state directory.
REEVALUATION = Path("guidance-run") / "reevaluation.json"


def read_reevaluation(state_dir: Path) -> dict[str, Any] | None:
    """The run's fixed-candidate re-evaluation (`guidance-ttt reevaluate`), or None."""
    path = Path(state_dir) / REEVALUATION
    return read_json_object(path) if exists(path) else None


def _per_step(
    view: RunView, prices: PriceTable, guidance: Mapping[str, Usage] | None
) -> list[dict[str, Any]]:
    """Tokens and cost of each committed step (what `guidance-ttt compare` puts on its budget
    axes when it reads an exported directory); `usd` is None when a model has no price."""
    guide, executor = models(view)
    by_step = run_usage(view, guidance, in_flight=False)
    rows = []
    for step in range(view.committed_step + 1):
        used = by_step.get(step, StepUsage(step))
        estimate = prices.estimate(used.by_model(guide, executor))
        rows.append(
            {
                "step": step,
                "tokens": used.executor.total_tokens + used.guidance.total_tokens,
                "usd": None if estimate.unpriced else round(estimate.usd, 6),
            }
        )
    return rows


#: Where `export` puts each run's archive (the Discover `library.json` layout) in its folder,
#: so that an exported folder can be browsed (`guidance-ttt browse OUT`) without the state.
EXPORTED_ARCHIVES = "archives"


def exported_archive_path(out_dir: Path, run_name: str) -> Path:
    """`<out_dir>/archives/<run_name>.library.json`."""
    return Path(out_dir) / EXPORTED_ARCHIVES / f"{run_name}.library.json"


def write_records(out_dir: Path, record: Mapping[str, Any], rows: Sequence[TrajectoryRow]) -> None:
    """Write (or update) `runs.json` and `trajectory.csv` in `out_dir`: the run and trajectory
    rows of `record["task"]` replace any earlier ones; other tasks are kept. Both atomically."""
    out_dir.mkdir(parents=True, exist_ok=True)
    runs_path, csv_path = out_dir / "runs.json", out_dir / "trajectory.csv"
    runs = read_runs_json(runs_path) if exists(runs_path) else []
    mode = record.get("mode", "trained")
    mixed = sorted({str(r.get("mode", "trained")) for r in runs})
    if mixed and mixed != [mode]:
        raise ValueError(
            f"{runs_path} holds {'/'.join(mixed)} runs and this run is {mode}; frozen-guidance "
            "and trained runs are never mixed in one results directory — export to another --out"
        )
    runs = [r for r in runs if r.get("task") != record["task"]] + [dict(record)]
    old = read_trajectory_csv(csv_path) if csv_path.exists() else []
    kept = [r for r in old if r.task != record["task"]]
    document = {"schema_version": SCHEMA_VERSION, "runs": runs}
    atomic_write_bytes(runs_path, (json.dumps(document, indent=2) + "\n").encode())
    atomic_write_bytes(csv_path, trajectory_csv([*kept, *rows]).encode())
