"""Which nodes a step may choose as parents, as pure functions over the archive's mappings
(docs/design.md §1).

A node is *selectable* in archive timestep `t` (step `t - 1`) when it is visible (a root, or
made before `t`), an archive candidate, and has a stored entry with a non-empty solution. Once a
group of the step has its parent, the parent's whole line of descent (ancestors and
descendants) is *blocked* for the step's other groups; siblings are not. `harness.library.Archive`
ranks the selectable nodes by PUCT and takes the best unblocked one.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness import puct
from harness.archive.filtering import ancestors
from harness.state import ArchiveGroup, LibraryEntry, LibraryNode


def selectable(
    nodes: Mapping[str, LibraryNode], entries: Mapping[str, LibraryEntry], t: int
) -> list[puct.Candidate]:
    """The PUCT candidates of archive timestep `t`, in node order: visible archive candidates
    whose entry is stored and has a non-empty solution."""
    return [
        puct.Candidate(node.id, node.value, node.is_root)
        for node in nodes.values()
        if (node.is_root or node.timestep < t)
        and node.archive_candidate
        and node.entry_id in entries
        and entries[node.entry_id].solution.strip()
    ]


def blocked_lines(
    nodes: Mapping[str, LibraryNode], groups: Mapping[str, ArchiveGroup], t: int
) -> set[str]:
    """Every node on the line of descent (itself, its ancestors, its descendants) of a parent
    already chosen by a group of archive timestep `t`. A parent no longer in `nodes` blocks
    nothing."""
    chosen = [
        g.selected_node_id
        for g in groups.values()
        if g.visible_timestep_exclusive == t and g.selected_node_id in nodes
    ]
    blocked: set[str] = set()
    for node_id in chosen:
        blocked.update(ancestors(nodes, node_id))
        frontier = [node_id]
        while frontier:  # all descendants
            current = frontier.pop()
            for child in nodes[current].children:
                if child not in blocked:
                    blocked.add(child)
                    frontier.append(child)
    return blocked
