"""Reading a run's state directory, and the results records built from it (issue 6 item 4).

`load_run(state_dir)` reads, without taking any lock, what a running or finished run has made
durable: the committed archive, `resume-state.json`, the journaled rollouts of the in-flight
step, and `events.jsonl`. Everything else here is pure: the per-update trajectory, the best
candidates, the lineage of the best, failure modes per step, guidance → candidate case studies,
and the two records `export` writes:

- `runs.json`: `{"schema_version": 1, "runs": [run, ...]}`, one run per task (see `run_record`),
  each labelled with its `mode` (`trained` or `frozen`; one directory never mixes the two) and
  the `suite` its scores were measured on;
- `trajectory.csv`: `task,update,cumulative_best,valid_rollouts,sampled_rollouts`; update 0 is
  the seed (no valid count, 0 sampled), update u ≥ 1 is step u - 1.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.atomic import atomic_write_bytes
from harness.cost import CostEstimate, PriceTable, StepUsage, Usage, total_usage, usage_by_step
from harness.events import EVENTS_FILE, read_events
from harness.library import Archive
from harness.library_json import library_json_bytes, read_library_json
from harness.resume_state import RESUME_STATE, ResumeState
from harness.state import GUIDANCE_FORMAT_ERROR, LibraryEntry, LibraryNode
from harness.state_files import exists, read_bytes, read_json_object
from harness.store import HEAD, missing_slots, read_committed, read_in_flight

SCHEMA_VERSION = 1
TRAJECTORY_FIELDS = ("task", "update", "cumulative_best", "valid_rollouts", "sampled_rollouts")
RUN_DIR = RESUME_STATE.parent  # guidance-run
#: Where the run keeps its archive store, relative to the state directory (`harness.runner`).
STORE_CANDIDATES = (RUN_DIR / "archive",)
COMMITTED_LIBRARY = RUN_DIR / "committed-library.json"
#: The model name `models` gives when the state directory does not record it yet.
UNKNOWN_MODEL = "unknown model"


class RunNotFound(FileNotFoundError):
    """The directory holds no run this tool can read."""


@dataclass(frozen=True)
class RunView:
    """A read-only snapshot of one run's state directory."""

    state_dir: Path
    archive: Archive  # the committed archive
    committed_step: int  # -1 before the first commit
    resume: ResumeState | None
    in_flight: tuple[tuple[int, int, LibraryEntry], ...]  # (group, rollout, entry) of next step
    events: tuple[dict[str, Any], ...]
    archive_source: Path  # the store directory or the library.json read

    @property
    def next_step(self) -> int:
        """The step the run is at (running, or next to run)."""
        return self.committed_step + 1

    @property
    def direction(self) -> str:
        """`max` or `min`: which way scores improve."""
        return self.archive.config.score_direction

    def missing_slots(self) -> list[tuple[int, int]]:
        """The `(group, rollout)` slots of the in-flight step with no journaled rollout."""
        return missing_slots(self.archive.config, ((g, r) for g, r, _ in self.in_flight))

    def events_of(self, kind: str) -> list[dict[str, Any]]:
        """The logged events of one kind, oldest first."""
        return [e for e in self.events if e.get("event") == kind]


def find_store(state_dir: Path) -> Path | None:
    """The archive store directory under `state_dir` (the one holding `archive-head.json`)."""
    for candidate in (Path(state_dir) / c for c in STORE_CANDIDATES):
        if exists(candidate / HEAD):  # whatever is there; reading it names what is wrong
            return candidate
    return None


def load_run(state_dir: Path) -> RunView:
    """Read a run's state directory: the archive store (or, for an archive made elsewhere,
    `guidance-run/committed-library.json`), the resume state and the event log. Raises
    `RunNotFound` naming what was looked for when there is no archive."""
    state_dir = Path(state_dir)
    store = find_store(state_dir)
    resume = ResumeState.load(state_dir / RESUME_STATE)
    in_flight: list[tuple[int, int, LibraryEntry]] = []
    if store is not None:
        archive, committed = read_committed(store)
        in_flight = [(r.group, r.rollout, r.entry) for r in read_in_flight(store, committed + 1)]
        source = store
    elif exists(state_dir / COMMITTED_LIBRARY):
        source = state_dir / COMMITTED_LIBRARY
        archive = read_library_json(source)
        committed = archive.last_step()
    else:
        looked = ", ".join(str(state_dir / c / HEAD) for c in STORE_CANDIDATES)
        raise RunNotFound(
            f"{state_dir} holds no run: none of {looked} or {state_dir / COMMITTED_LIBRARY} "
            "exists; pass the state directory of a run (e.g. work/<task>)"
        )
    events = read_events(_events_path(state_dir))
    return RunView(state_dir, archive, committed, resume, tuple(in_flight), tuple(events), source)


def _events_path(state_dir: Path) -> Path:
    for candidate in (state_dir / RUN_DIR / EVENTS_FILE, state_dir / EVENTS_FILE):
        if exists(candidate):
            return candidate
    return state_dir / RUN_DIR / EVENTS_FILE


# --- scores and the trajectory -------------------------------------------------------------


def better(direction: str, a: float, b: float) -> bool:
    """Whether score `a` is strictly better than `b` in `direction`."""
    return a > b if direction == "max" else a < b


def seed_entry(archive: Archive) -> LibraryEntry:
    """The seed candidate: the timestep-0 root entry that is not a replicated clone."""
    roots = [e for e in archive.entries.values() if e.timestep == 0]
    originals = [e for e in roots if not e.metadata.get("replicated_seed_entry")]
    if not (originals or roots):
        raise ValueError("the archive has no seed entry (no timestep-0 entry)")
    return (originals or roots)[0]


@dataclass(frozen=True)
class TrajectoryRow:
    """One line of `trajectory.csv`."""

    task: str
    update: int
    cumulative_best: float
    valid_rollouts: int | None
    sampled_rollouts: int


def trajectory(archive: Archive, task: str, through_step: int) -> list[TrajectoryRow]:
    """The seed row and one row per step 0..`through_step`: valid and sampled rollouts of that
    step and the best raw score seen so far. Entries are never pruned, so this is exact."""
    direction = archive.config.score_direction
    best = seed_entry(archive).verifier_raw_score
    by_step: dict[int, list[LibraryEntry]] = {}
    for entry in archive.entries.values():
        if entry.timestep >= 1:
            by_step.setdefault(entry.timestep - 1, []).append(entry)
    rows = [TrajectoryRow(task, 0, float(best), None, 0)]
    for step in range(through_step + 1):
        entries = by_step.get(step, [])
        for entry in entries:
            score = entry.verifier_raw_score
            if entry.is_valid and score is not None and better(direction, score, best):
                best = score
        valid = sum(1 for e in entries if e.is_valid)
        rows.append(TrajectoryRow(task, step + 1, float(best), valid, len(entries)))
    return rows


def best_update(rows: Sequence[TrajectoryRow], direction: str) -> int:
    """The first update at which the final cumulative best was reached."""
    final = rows[-1].cumulative_best
    return next(r.update for r in rows if not better(direction, final, r.cumulative_best))


def best_step(rows: Sequence[TrajectoryRow], direction: str) -> int | None:
    """The step (0-based, as the CLI and progress count them) whose rollouts first reached the
    final cumulative best; None when no step beat the seed."""
    update = best_update(rows, direction)
    return None if update == 0 else update - 1


def step_of(entry: LibraryEntry) -> int | None:
    """The step that made `entry` (None for the seed and its replicas)."""
    return entry.timestep - 1 if entry.timestep >= 1 else None


def trajectory_csv(rows: Iterable[TrajectoryRow]) -> str:
    """The rows as CSV text with the header (`repr` floats, an empty valid count for the seed)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(TRAJECTORY_FIELDS)
    for r in rows:
        valid = "" if r.valid_rollouts is None else r.valid_rollouts
        writer.writerow([r.task, r.update, repr(r.cumulative_best), valid, r.sampled_rollouts])
    return out.getvalue()


def read_trajectory_csv(path: Path) -> list[TrajectoryRow]:
    """Rows of a `trajectory.csv` (any tasks), in file order; a wrong header is an error."""
    with Path(path).open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if tuple(reader.fieldnames or ()) != TRAJECTORY_FIELDS:
            raise ValueError(f"{path}: header {reader.fieldnames} is not {list(TRAJECTORY_FIELDS)}")
        return [
            TrajectoryRow(
                row["task"],
                int(row["update"]),
                float(row["cumulative_best"]),
                int(row["valid_rollouts"]) if row["valid_rollouts"] else None,
                int(row["sampled_rollouts"]),
            )
            for row in reader
        ]


def read_runs_json(path: Path) -> list[dict[str, Any]]:
    """The runs of a `runs.json` (`{"schema_version": 1, "runs": [...]}`); a file of another
    shape is an error naming it."""
    document = read_json_object(Path(path))
    runs = document.get("runs")
    if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
        raise ValueError(f"{path}: not a runs.json (expected {{'runs': [...]}})")
    return runs


# --- inspection ----------------------------------------------------------------------------


def score_of(archive: Archive, node_id: str | None) -> float | None:
    """The raw score of a node (None if the node is unknown)."""
    node = archive.nodes.get(node_id or "")
    return node.raw_score if node else None


def best_nodes(archive: Archive, limit: int) -> list[LibraryNode]:
    """The `limit` best archive candidates, best first (`(value, id)` order, as the archive)."""
    pool = [n for n in archive.nodes.values() if n.archive_candidate]
    return sorted(pool, key=lambda n: (n.value, n.id), reverse=True)[:limit]


def lineage(archive: Archive, node_id: str) -> list[LibraryNode]:
    """The chain of nodes from the root to `node_id` (ancestors are always kept by the filter)."""
    chain = []
    current = archive.nodes.get(node_id)
    while current is not None:
        chain.append(current)
        current = archive.nodes.get(current.parent_id or "")
    return chain[::-1]


def failure_modes(archive: Archive) -> dict[int, Counter[str]]:
    """Per step, how many rollouts ended in each status (`valid` included), in step order."""
    table: dict[int, Counter[str]] = {}
    for entry in archive.entries.values():
        if entry.timestep >= 1:
            table.setdefault(entry.timestep - 1, Counter())[entry.verifier_status] += 1
    return dict(sorted(table.items()))


@dataclass(frozen=True)
class CaseStudy:
    """One guidance → candidate transition: the parent the group expanded, the guidance the
    policy wrote, and the child the executor built from it, with both judged scores. `gain` is
    positive when the child is better, whichever the score direction."""

    update: int
    entry: LibraryEntry
    node_id: str | None
    parent_score: float
    candidate_score: float
    gain: float


def parent_score(archive: Archive, entry: LibraryEntry) -> float | None:
    """The raw score of the candidate `entry` expanded: its parent node's, or (when the filter
    has dropped that node) the score of the parent entry named in the rollout's metadata."""
    node = archive.nodes.get(entry.parent_id or "")
    if node is not None and node.raw_score is not None:
        return node.raw_score
    parent = archive.entries.get(str(entry.metadata.get("selected_parent_entry_id")))
    return parent.verifier_raw_score if parent is not None else None


def case_studies(archive: Archive, limit: int) -> list[CaseStudy]:
    """The `limit` valid rollouts that improved on their parent (gain > 0) most, largest gain
    first (ties: earlier update, then entry id); fewer, or none, when fewer improved."""
    sign = 1.0 if archive.config.score_direction == "max" else -1.0
    node_of_entry = {n.entry_id: n.id for n in archive.nodes.values()}
    cases = []
    for entry in archive.entries.values():
        parent = parent_score(archive, entry) if entry.timestep >= 1 else None
        if parent is None or not entry.is_valid:
            continue
        child = float(entry.verifier_raw_score)  # type: ignore[arg-type] - is_valid checked
        if sign * (child - parent) <= 0:
            continue
        cases.append(
            CaseStudy(
                entry.timestep,
                entry,
                node_of_entry.get(entry.id),
                parent,
                child,
                sign * (child - parent),
            )
        )
    cases.sort(key=lambda c: (-c.gain, c.update, c.entry.id))
    return cases[:limit]


def selected_case(archive: Archive) -> dict[str, Any] | None:
    """The runs.json `selected_case`: the largest single improvement over a parent."""
    cases = case_studies(archive, 1)
    if not cases:
        return None
    case = cases[0]
    return {
        "update": case.update,
        "entry_id": case.entry.id,
        "node_id": case.node_id,
        "parent_score": case.parent_score,
        "candidate_score": case.candidate_score,
    }


def run_mode(view: RunView) -> str:
    """`trained` or `frozen`: the resume state's identity, else the last `run_started` event
    (a run from before modes were recorded is `trained`)."""
    if view.resume is not None:
        return view.resume.identity.mode
    started = view.events_of("run_started")
    return str(started[-1].get("mode", "trained")) if started else "trained"


def run_suite(view: RunView) -> str | None:
    """The suite the run's scores were measured on (`harness.suites`): the seed entry's label,
    else the last `run_started` event's; None when the run did not record it."""
    value = seed_entry(view.archive).metadata.get("suite")
    if isinstance(value, str) and value:
        return value
    started = [e for e in view.events_of("run_started") if e.get("suite")]
    return str(started[-1]["suite"]) if started else None


def run_note(view: RunView) -> str:
    """`frozen run, suite public`: the labels that keep runs apart (`run_mode`, `run_suite`),
    as the plot's subtitle shows them."""
    suite = run_suite(view)
    return f"{run_mode(view)} run, suite {suite if suite else 'not recorded'}"


def seed_rescored(view: RunView) -> dict[str, Any] | None:
    """Where the run's seed score came from when it was re-scored on the judge's suite at start
    (`{"suite", "score"}` of the seed file's measurement), else None."""
    value = seed_entry(view.archive).metadata.get("seed_rescored_from")
    return dict(value) if isinstance(value, Mapping) else None


# --- the records -----------------------------------------------------------------------------


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
    """The run's total usage (see `run_usage`) and its cost estimate."""
    total = total_usage(run_usage(view, guidance, in_flight=in_flight).values())
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
    return {
        "task": task,
        "run_name": run_name or view.state_dir.resolve().name,
        "mode": run_mode(view),
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
        "usage": {**usage.to_dict(), "cost": cost.to_dict()},
        "selected_case": selected_case(view.archive),
        "provenance": provenance(view),
    }


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
