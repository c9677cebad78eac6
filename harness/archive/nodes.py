"""How archive nodes are made: the G seed roots of a fresh archive, and the child node a valid
rollout becomes.

Pure construction over plain values, no archive state: `harness.library.Archive` decides *whether*
a node is made (validity, deduplication) and links it into the tree; this module only says what
the node looks like. Child ids are derived from the entry id (uuid5), so replaying a journal
rebuilds identical nodes; root ids are random, since roots are made once and then stored.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

from harness import arms
from harness.state import ARCHIVE_CANDIDATE, VALID, ArchiveConfig, LibraryEntry, LibraryNode

# Child node ids are derived from the entry id, so replaying a journal rebuilds identical nodes.
_NODE_ID_NAMESPACE = uuid.UUID("5b0c3a57-5f2e-4a8e-9d55-6a1f0b7e4c21")


def seed_roots(
    config: ArchiveConfig, seed: LibraryEntry, run_seed: int | None = None
) -> tuple[dict[str, LibraryNode], dict[str, LibraryEntry]]:
    """The G root nodes of a fresh archive and their entries, by id: the seed itself, then clones
    of it (new entry id, marked `replicated_seed_entry` / `replicated_seed_root`) until there are
    `groups_per_batch` roots, so the groups of step 0 start in disjoint lineages. The caller has
    checked that the seed is valid with a raw score and a solution. With `run_seed` the root and
    clone ids derive from it (`harness.arms`), else they are random."""
    seed_score = float(seed.verifier_raw_score)  # type: ignore[arg-type] - caller checked
    nodes: dict[str, LibraryNode] = {}
    entries: dict[str, LibraryEntry] = {}
    for index in range(config.groups_per_batch):
        node_id = str(uuid.uuid4()) if run_seed is None else arms.root_id(run_seed, index)
        entry = replace(seed, parent_id=node_id, timestep=0)
        metadata: dict[str, Any] = {
            "kind": "root",
            "verifier_status": seed.verifier_status,
            ARCHIVE_CANDIDATE: True,
        }
        if index > 0:  # clones of the seed root
            entry = replace(
                entry,
                id=str(uuid.uuid4()) if run_seed is None else arms.clone_entry_id(run_seed, index),
                metadata={**seed.metadata, "replicated_seed_entry": True},
            )
            metadata["replicated_seed_root"] = True
        entries[entry.id] = entry
        nodes[node_id] = LibraryNode(
            id=node_id,
            problem_id=seed.problem_id,
            timestep=0,
            entry_id=entry.id,
            value=config.signed(seed_score),
            raw_score=seed.verifier_raw_score,
            visits=0,
            parent_id=None,
            metadata=metadata,
        )
    return nodes, entries


def child_node(entry: LibraryEntry, *, parent_id: str, timestep: int, value: float) -> LibraryNode:
    """The archive-candidate node a valid rollout `entry` becomes under `parent_id` at archive
    `timestep`, with the signed `value` of its raw score. Its id depends only on the entry id."""
    return LibraryNode(
        id=str(uuid.uuid5(_NODE_ID_NAMESPACE, entry.id)),
        problem_id=entry.problem_id,
        timestep=timestep,
        entry_id=entry.id,
        value=value,
        raw_score=entry.verifier_raw_score,
        visits=0,
        parent_id=parent_id,
        metadata={"verifier_status": VALID, ARCHIVE_CANDIDATE: True},
    )
