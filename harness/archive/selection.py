"""Which nodes a step may choose as parents, as pure functions over the archive's mappings
(docs/design.md §1).

A node is *selectable* in archive timestep `t` (step `t - 1`) when it is visible (a root, or
made before `t`), an archive candidate, and has a stored entry with a non-empty solution. Once a
group of the step has its parent, the parent's whole line of descent (ancestors and
descendants) is *blocked* for the step's other groups; siblings are not. `harness.library.Archive`
ranks the selectable nodes by PUCT and takes the best unblocked one.
"""

from __future__ import annotations

import random
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


def choose(
    policy: str,
    ranked: list[puct.Ranked],
    blocked: set[str],
    roots: list[str],
    *,
    group: int,
    draw_seed: int,
) -> str:
    """The node a group expands under `policy` (`harness.arms`): `puct`, the best-ranked node
    outside the blocked lines (the best-ranked one when all are blocked); `greedy`, the
    candidate with the highest `(value, id)`, blocked or not; `uniform`, a candidate drawn
    uniformly (ids in sorted order, `random.Random(draw_seed)`); `seed`, seed root
    `group mod len(roots)` (best-of-n). `ranked` is the PUCT ranking of the selectable nodes,
    never empty."""
    if policy == "puct":
        return next((r.id for r in ranked if r.id not in blocked), ranked[0].id)
    if policy == "greedy":
        return max(ranked, key=lambda r: (r.value, r.id)).id
    if policy == "uniform":
        return random.Random(draw_seed).choice(sorted(r.id for r in ranked))
    if policy == "seed":
        if not roots:
            raise ValueError("best-of-n needs the seed roots, and the archive has none")
        return roots[group % len(roots)]
    raise ValueError(f"unknown parent selection {policy!r}")
