"""The search side of a step as numbers and sample rows: what the W&B sink logs under `search/*`
(docs/observability.md, "Watching a run in W&B"). Pure: everything comes from the committed
archive and the step's events, so the figures are the same for a resumed step.

Metric names (all per step, on the `search/step` axis, steps counted from 0):

- `search/best_so_far`: the run's best raw score after the step, the seed included;
- `search/step_best`, `search/step_mean`, `search/step_median`: over the step's valid rollouts;
- `search/valid_fraction`, `search/format_error_fraction` (`guidance_format_error`),
  `search/candidate_failure_fraction` (every other non-valid outcome);
- `search/archive_nodes`, `search/archive_entries`: the archive as of the step (nodes the
  archive filter removed later are not counted);
- `search/tokens/executor`, `search/tokens/guidance`, and `search/cost_usd` when every model
  that used tokens has a price;
- `search/time/step_s` (the step's rollout phase), `search/time/training_wait_s`, and the mean
  seconds per rollout of each stage, `search/time/guidance_s`, `search/time/executor_s`,
  `search/time/judge_s`, plus `search/time/judge_total_s`;
- `search/grad_norm` when Reef trained the step.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.archive.best import run_best_score
from harness.library import Archive
from harness.observe.cost import PriceTable, entry_usage
from harness.state import GUIDANCE_FORMAT_ERROR, LibraryEntry

#: Columns of the per-step samples table, in order.
SAMPLE_COLUMNS = (
    "step",
    "group",
    "rollout",
    "parent_score",
    "guidance",
    "summary",
    "score",
    "status",
    "receipt",
)
#: Text cells are cut to this many characters, so a table stays small whatever a model writes.
MAX_CELL_CHARS = 1500
#: At most this many rows per step (the whole 8×16 grid fits).
MAX_SAMPLE_ROWS = 128
STAGES = ("guidance", "executor", "judge")


@dataclass(frozen=True)
class StepTimings:
    """What the step's events said about time: each rollout's stage seconds (only rollouts run by
    this process report them) and the longest training wait."""

    rollouts: tuple[Mapping[str, float], ...] = ()
    training_wait_s: float | None = None


def step_entries(archive: Archive, step: int) -> list[LibraryEntry]:
    """The rollouts of `step` (archive timestep `step + 1`), by group and rollout."""
    entries = [e for e in archive.entries.values() if e.timestep == step + 1]
    return sorted(
        entries, key=lambda e: (_int(e.metadata.get("group")), _int(e.metadata.get("rollout")))
    )


def step_metrics(
    archive: Archive,
    step: int,
    summary: Mapping[str, Any],
    timings: StepTimings,
    *,
    prices: PriceTable | None = None,
    models: tuple[str, str] | None = None,
) -> dict[str, float | int]:
    """The `search/*` numbers of one committed step (names in the module doc)."""
    entries = step_entries(archive, step)
    total = len(entries) or 1
    scores = [float(e.verifier_raw_score) for e in entries if e.is_valid]  # type: ignore[arg-type]
    format_errors = sum(1 for e in entries if e.verifier_status == GUIDANCE_FORMAT_ERROR)
    invalid = sum(1 for e in entries if not e.is_valid)
    metrics: dict[str, float | int] = {
        "search/step": step,
        "search/rollouts": len(entries),
        "search/valid_fraction": len(scores) / total,
        "search/format_error_fraction": format_errors / total,
        "search/candidate_failure_fraction": (invalid - format_errors) / total,
        # As of this step, whenever the archive is read: the sink may read it a step late.
        "search/archive_nodes": sum(1 for n in archive.nodes.values() if n.timestep <= step + 1),
        "search/archive_entries": sum(
            1 for e in archive.entries.values() if e.timestep <= step + 1
        ),
    }
    if scores:
        best = max(scores) if archive.config.score_direction == "max" else min(scores)
        metrics.update(
            {
                "search/step_best": best,
                "search/step_mean": statistics.fmean(scores),
                "search/step_median": statistics.median(scores),
            }
        )
    best_so_far = best_score_up_to(archive, step)
    if best_so_far is not None:
        metrics["search/best_so_far"] = best_so_far
    executor = guidance = None
    for entry in entries:
        used = entry_usage(entry)
        executor = used[0] if executor is None else executor + used[0]
        guidance = used[1] if guidance is None else guidance + used[1]
    if executor is not None and guidance is not None:
        metrics["search/tokens/executor"] = executor.total_tokens
        metrics["search/tokens/guidance"] = guidance.total_tokens
        if prices is not None and models is not None:
            by_model: dict[str, Any] = {}
            for model, usage in ((models[0], guidance), (models[1], executor)):
                by_model[model] = by_model[model] + usage if model in by_model else usage
            cost = prices.estimate(by_model)
            if not cost.unpriced:
                metrics["search/cost_usd"] = round(cost.usd, 6)
    metrics.update(_time_metrics(summary, timings))
    grad = summary.get("grad_norm")
    if isinstance(grad, int | float) and not isinstance(grad, bool):
        metrics["search/grad_norm"] = float(grad)
    return metrics


def _time_metrics(summary: Mapping[str, Any], timings: StepTimings) -> dict[str, float]:
    out: dict[str, float] = {}
    elapsed = summary.get("elapsed_s")
    if isinstance(elapsed, int | float):
        out["search/time/step_s"] = float(elapsed)
    if timings.training_wait_s is not None:
        out["search/time/training_wait_s"] = float(timings.training_wait_s)
    for stage in STAGES:
        values = [
            float(t[f"{stage}_s"])
            for t in timings.rollouts
            if isinstance(t.get(f"{stage}_s"), int | float)
        ]
        if values:
            out[f"search/time/{stage}_s"] = statistics.fmean(values)
            if stage == "judge":
                out["search/time/judge_total_s"] = sum(values)
    return out


def best_score_up_to(archive: Archive, step: int) -> float | None:
    """The run's best raw score over the seed and steps 0..`step` (`harness.archive.best`)."""
    return run_best_score(archive, step)


def parent_score(archive: Archive, entry: LibraryEntry) -> float | None:
    """The raw score of the candidate a rollout started from (its parent entry), if known."""
    parent_entry = entry.metadata.get("selected_parent_entry_id")
    if isinstance(parent_entry, str) and parent_entry in archive.entries:
        return archive.entries[parent_entry].verifier_raw_score
    node = archive.nodes.get(entry.parent_id or "")
    return None if node is None else node.raw_score


def sample_rows(archive: Archive, step: int, *, max_rows: int = MAX_SAMPLE_ROWS) -> list[list[Any]]:
    """The step's samples as table rows (columns `SAMPLE_COLUMNS`), text cells cut to
    `MAX_CELL_CHARS`, at most `max_rows` rows (the first in group-major order)."""
    return [_row(archive, e) for e in step_entries(archive, step)[:max_rows]]


def _row(archive: Archive, entry: LibraryEntry) -> list[Any]:
    meta = entry.metadata
    return [
        _int(meta.get("step")),
        _int(meta.get("group")),
        _int(meta.get("rollout")),
        parent_score(archive, entry),
        cut(str(meta.get("raw_guidance_text") or entry.guidance)),
        cut(entry.summary),
        entry.verifier_raw_score,
        entry.verifier_status,
        str(meta.get("agent_record_id") or ""),
    ]


def cut(text: str, limit: int = MAX_CELL_CHARS) -> str:
    """`text`, or its first `limit` characters and a note of how much was left out."""
    if len(text) <= limit:
        return text
    return text[:limit] + f" … [{len(text) - limit} more characters]"


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return -1


def timings_of(events: Iterable[Mapping[str, Any]], step: int) -> StepTimings:
    """The `StepTimings` of `step` from its `rollout_finished` and `training_wait` events."""
    rollouts: list[Mapping[str, float]] = []
    wait: float | None = None
    for event in events:
        if event.get("step") != step:
            continue
        if event.get("event") == "rollout_finished" and isinstance(event.get("timings"), Mapping):
            rollouts.append(event["timings"])
        elif event.get("event") == "training_wait" and isinstance(
            event.get("elapsed_s"), int | float
        ):
            wait = max(wait or 0.0, float(event["elapsed_s"]))
    return StepTimings(tuple(rollouts), wait)


__all__: Sequence[str] = (
    "MAX_CELL_CHARS",
    "MAX_SAMPLE_ROWS",
    "SAMPLE_COLUMNS",
    "StepTimings",
    "best_score_up_to",
    "cut",
    "parent_score",
    "sample_rows",
    "step_metrics",
    "timings_of",
)
