"""The archive's invariants as pure checks over plain mappings (docs/design.md §2).

Each function returns a list of human-readable violations (empty when all is well); the
archive raises `ArchiveInvariantError` with them. `archive_errors` is the whole-archive check
(run on construction and after each step's filter); the others check one group or node, so a
single selection or submission can check what it touched in constant time.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.state import ArchiveGroup, LibraryEntry, LibraryNode


def archive_errors(
    *,
    rollout_n: int,
    groups_per_batch: int,
    nodes: Mapping[str, LibraryNode],
    entries: Mapping[str, LibraryEntry],
    groups: Mapping[str, ArchiveGroup],
    puct_n: Mapping[str, int],
    puct_m: Mapping[str, float],
    puct_T: int,
    counted_submissions: int,
    best_node_id: str | None,
) -> list[str]:
    """Every violated invariant of a whole archive: group accounting, `puct_T` and the running
    submission count against the groups' total, exactly `groups_per_batch` roots, referential
    integrity of every node, no parent cycles, statistics keyed by existing nodes, and a best
    node that exists."""
    errors: list[str] = []
    for uid, group in groups.items():
        errors.extend(group_errors(uid, group, rollout_n, nodes))
    submitted = sum(g.submitted for g in groups.values())
    if puct_T != submitted or counted_submissions != submitted:
        errors.append(f"puct_T={puct_T} but {submitted} rollouts were submitted")
    roots = sum(1 for n in nodes.values() if n.is_root)
    if roots != groups_per_batch:
        errors.append(f"{roots} roots, expected groups_per_batch={groups_per_batch}")
    for node_id in nodes:
        errors.extend(node_errors(node_id, nodes, entries))
    errors.extend(cycle_errors(nodes))
    for stat, table in (("puct_n", puct_n), ("puct_m", puct_m)):
        stray = [i for i in table if i not in nodes]
        if stray:
            errors.append(f"{stat} has keys of missing nodes: {stray[:3]}")
    if best_node_id is not None and best_node_id not in nodes:
        errors.append(f"best_node_id {best_node_id} is not a node")
    return errors


def group_errors(
    uid: str, group: ArchiveGroup, rollout_n: int, nodes: Mapping[str, LibraryNode]
) -> list[str]:
    """Group accounting: 0 <= submitted <= R, finalized iff submitted == R, one entry id per
    submission, and an open group's parent still exists."""
    errors = []
    if not 0 <= group.submitted <= rollout_n:
        errors.append(f"group {uid}: submitted={group.submitted} outside 0..{rollout_n}")
    if group.finalized != (group.submitted == rollout_n):
        errors.append(f"group {uid}: finalized={group.finalized} with submitted={group.submitted}")
    if len(group.entry_ids) != group.submitted:
        errors.append(f"group {uid}: {len(group.entry_ids)} entry ids for {group.submitted}")
    if not group.finalized and group.selected_node_id not in nodes:
        errors.append(f"group {uid}: open group's parent {group.selected_node_id} is missing")
    return errors


def node_errors(
    node_id: str, nodes: Mapping[str, LibraryNode], entries: Mapping[str, LibraryEntry]
) -> list[str]:
    """Referential integrity of one node: its key, parent, entry and child links."""
    node, errors = nodes[node_id], []
    if node.id != node_id:
        errors.append(f"node stored under {node_id} has id {node.id}")
    if node.parent_id is not None and node.parent_id not in nodes:
        errors.append(f"node {node_id}: parent {node.parent_id} is missing")
    if node.entry_id is not None and node.entry_id not in entries:
        errors.append(f"node {node_id}: entry {node.entry_id} is missing")
    for child in node.children:
        if child not in nodes or nodes[child].parent_id != node_id:
            errors.append(f"node {node_id}: child link {child} is broken")
    return errors


def cycle_errors(nodes: Mapping[str, LibraryNode]) -> list[str]:
    """Nodes whose parent chain loops instead of reaching a root (only a corrupt file can)."""
    rooted: set[str] = set()
    for start in nodes:
        path: list[str] = []
        current: str | None = start
        while current is not None and current in nodes and current not in rooted:
            if current in path:
                return [f"node {start}: parent chain loops back to {current}"]
            path.append(current)
            current = nodes[current].parent_id
        rooted.update(path)
    return []
