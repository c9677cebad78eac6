"""What the inspection commands show about a run: pure functions of its archive and `RunView`.

The best candidates and the lineage of one, failure modes per step, guidance → candidate case
studies (a rollout's gain over the parent it expanded, positive when the child is better,
whichever the score direction), and the labels that keep runs apart: the run's `mode`
(`trained` or `frozen`), the `suite` its scores were measured on, and where a re-scored seed's
score came from. Nothing here reads a file; the caller loads the run (`harness.results.load_run`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.archive.best import ranked
from harness.library import Archive
from harness.results.run_view import RunView
from harness.results.score_trajectory import seed_entry
from harness.state import LibraryEntry, LibraryNode


def best_entries(archive: Archive, limit: int) -> list[LibraryEntry]:
    """The `limit` best candidates the run judged, best first, one per program (the earliest to
    reach its score: `harness.archive.best`, the ranking every report uses). Entries, not archive
    nodes: a best-of-n run's candidates never become nodes, yet they are its results."""
    seen: set[str] = set()
    chosen: list[LibraryEntry] = []
    for entry in ranked(archive):
        if entry.solution in seen:
            continue
        seen.add(entry.solution)
        chosen.append(entry)
        if len(chosen) == limit:
            break
    return chosen


def node_of(archive: Archive, entry: LibraryEntry) -> LibraryNode | None:
    """The archive node made from `entry`, if one is (still) kept."""
    return next((n for n in archive.nodes.values() if n.entry_id == entry.id), None)


def entry_lineage(archive: Archive, entry: LibraryEntry) -> list[LibraryEntry]:
    """The entries from the root to `entry`: its node's lineage, or, for a candidate that is no
    node (best-of-n, or a duplicate), the lineage of the parent it expanded and then itself."""
    node = node_of(archive, entry)
    anchor = node.id if node is not None else (entry.parent_id or "")
    chain = [archive.entry_of(n.id) for n in lineage(archive, anchor) if n.entry_id]
    return chain if node is not None else [*chain, entry]


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


def run_task_text(view: RunView) -> str:
    """What both models read (`harness.task_text`): the resume state's identity, else the last
    `run_started` event; a run from before task texts were recorded read the `full` text."""
    if view.resume is not None:
        return view.resume.identity.task_text
    started = view.events_of("run_started")
    return str(started[-1].get("task_text", "full")) if started else "full"


def run_suite(view: RunView) -> str | None:
    """The suite the run's scores were measured on (`harness.adapters.judge.suites`): the seed
    entry's label,
    else the last `run_started` event's; None when the run did not record it."""
    value = seed_entry(view.archive).metadata.get("suite")
    if isinstance(value, str) and value:
        return value
    started = [e for e in view.events_of("run_started") if e.get("suite")]
    return str(started[-1]["suite"]) if started else None


def run_arm(view: RunView) -> str:
    """The run's experiment arm with a non-default parent selection (`guidance-ttt`,
    `unguided/greedy`, ...; `harness.arms`): the resume state's identity, else the last
    `run_started` event; a run from before arms is `guidance-ttt`."""
    if view.resume is not None:
        arm, selection = view.resume.identity.arm, view.resume.identity.parent_selection
    else:
        started = view.events_of("run_started")
        last = started[-1] if started else {}
        arm = str(last.get("arm", "guidance-ttt"))
        selection = str(last.get("parent_selection", "puct"))
    return arm if arm == "best-of-n" or selection == "puct" else f"{arm}/{selection}"


def run_requests(view: RunView) -> dict[str, str | None]:
    """How the run shapes each endpoint's requests (`harness.request_shapes.RequestShape.describe`):
    the guidance's from the resume identity (else the last `run_started` event; `sglang`, the
    reference's body, for a run from before shapes were recorded) and the executor's from the
    last `run_started` event (None when not recorded)."""
    started = view.events_of("run_started")
    last = started[-1] if started else {}
    guidance = last.get("guidance_request", "sglang")
    if view.resume is not None:
        guidance = view.resume.identity.guidance_request
    executor = last.get("executor_request")
    return {
        "guidance": None if guidance is None else str(guidance),
        "executor": None if executor is None else str(executor),
    }


def run_seed(view: RunView) -> int | None:
    """The run seed (`harness.arms`), or None when the run did not record one."""
    if view.resume is not None:
        return view.resume.identity.run_seed
    started = [e for e in view.events_of("run_started") if "run_seed" in e]
    return int(started[-1]["run_seed"]) if started else None


def run_note(view: RunView) -> str:
    """`frozen run, arm unguided, seed 1, suite public`: the labels that keep runs apart
    (`run_mode`, `run_arm`, `run_seed`, `run_suite`), as the plot's subtitle shows them."""
    suite = run_suite(view)
    seed = run_seed(view)
    return (
        f"{run_mode(view)} run, arm {run_arm(view)}"
        + ("" if seed is None else f", seed {seed}")
        + f", suite {suite if suite else 'not recorded'}"
    )


def seed_rescored(view: RunView) -> dict[str, Any] | None:
    """Where the run's seed score came from when it was re-scored on the judge's suite at start
    (`{"suite", "score"}` of the seed file's measurement), else None."""
    value = seed_entry(view.archive).metadata.get("seed_rescored_from")
    return dict(value) if isinstance(value, Mapping) else None
