"""Small builders for archive tests: seed entries, rollout entries and hand-shaped trees.

These build real records and real `Archive` objects; nothing is faked.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from harness.library import Archive
from harness.state import (
    ARCHIVE_CANDIDATE,
    VALID,
    ArchiveConfig,
    LibraryEntry,
    LibraryNode,
)

_counter = itertools.count()


def make_seed(score: float = 10.0, solution: str = "int main() { return 0; }") -> LibraryEntry:
    """A valid seed candidate with a code-free summary."""
    return LibraryEntry(
        id="seed-entry",
        parent_id=None,
        problem_id="polyomino_packing",
        timestep=0,
        guidance="",
        execution_thinking="",
        solution=solution,
        verifier_reward=score / 100,
        verifier_raw_score=score,
        verifier_status=VALID,
        verifier_message="ok",
        summary="A shelf packer that places pieces left to right.",
        reusable_idea="A shelf packer that places pieces left to right.",
        failure_mode=None,
        metadata={"bootstrap": True},
    )


def make_entry(
    parent_id: str,
    step: int,
    *,
    status: str = VALID,
    raw: float | None = 1.0,
    solution: str | None = None,
    entry_id: str | None = None,
    payload: str = "",
) -> LibraryEntry:
    """A rollout entry of `step` expanding `parent_id`. Failures get reward 0 and no raw score
    unless `raw` is given; the solution defaults to a unique program."""
    number = next(_counter)
    valid = status == VALID
    return LibraryEntry(
        id=entry_id or f"entry-{number:06d}",
        parent_id=parent_id,
        problem_id="polyomino_packing",
        timestep=step + 1,
        guidance="try a skyline heuristic" if status != "guidance_format_error" else "",
        execution_thinking=payload,
        solution=f"// program {number}\nint main() {{}}" if solution is None else solution,
        verifier_reward=(raw or 0.0) / 100 if valid else 0.0,
        verifier_raw_score=raw if valid else None,
        verifier_status=status,
        verifier_message="ok" if valid else f"{status}: details",
        summary="a summary",
        reusable_idea="a summary",
        failure_mode=None if valid else status,
        metadata={"payload": payload},
    )


@dataclass(frozen=True)
class Spec:
    """One hand-placed node: id, parent id (None for a root), value, timestep, solution."""

    id: str
    parent: str | None
    value: float
    timestep: int = 1
    solution: str | None = None
    candidate: bool = True


def tree_archive(config: ArchiveConfig, specs: list[Spec]) -> Archive:
    """An archive holding exactly the given tree (no groups, zero statistics), for testing
    selection and the filter on shapes a short run would not produce."""
    nodes: dict[str, LibraryNode] = {}
    entries: dict[str, LibraryEntry] = {}
    children: dict[str, list[str]] = {}
    for spec in specs:
        if spec.parent is not None:
            children.setdefault(spec.parent, []).append(spec.id)
    for spec in specs:
        entry = make_entry(
            spec.parent or spec.id,
            max(spec.timestep - 1, 0),
            raw=spec.value,
            solution=spec.solution,
            entry_id=f"e-{spec.id}",
        )
        entries[entry.id] = entry
        metadata = {"verifier_status": VALID, ARCHIVE_CANDIDATE: spec.candidate}
        if spec.parent is None:
            metadata["kind"] = "root"
        nodes[spec.id] = LibraryNode(
            id=spec.id,
            problem_id="polyomino_packing",
            timestep=0 if spec.parent is None else spec.timestep,
            entry_id=entry.id,
            value=spec.value,
            raw_score=spec.value,
            visits=0,
            parent_id=spec.parent,
            children=tuple(children.get(spec.id, ())),
            metadata=metadata,
        )
    pool = [n for n in nodes.values() if n.archive_candidate]
    return Archive(
        config,
        nodes=nodes,
        entries=entries,
        groups={},
        best_node_id=max(pool, key=lambda n: (n.value, n.id)).id,
        puct_n={},
        puct_m={},
        puct_T=0,
    )


def lineage(archive: Archive, node_id: str) -> set[str]:
    """`node_id`, its ancestors and its descendants."""
    up, current = set(), node_id
    while current is not None:
        up.add(current)
        current = archive.nodes[current].parent_id
    down, frontier = set(), [node_id]
    while frontier:
        for child in archive.nodes[frontier.pop()].children:
            down.add(child)
            frontier.append(child)
    return up | down
