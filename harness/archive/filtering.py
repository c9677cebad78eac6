"""The batch-complete archive filter of TTT-Discover (docs/design.md §2), as a pure function.

Runs once per step, after the whole G×R batch is in. It decides which nodes stay selectable
(`candidates`) and which stay at all (`closure` = candidates plus their ancestors); nodes kept
only as ancestors remain in the tree but can no longer be chosen as parents.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from harness.state import LibraryNode


def _best_first(nodes: list[LibraryNode]) -> list[LibraryNode]:
    return sorted(nodes, key=lambda n: (n.value, n.id), reverse=True)


def ancestors(nodes: Mapping[str, LibraryNode], node_id: str) -> list[str]:
    """`node_id` followed by every ancestor up to its root."""
    chain = []
    current: str | None = node_id
    while current is not None:
        chain.append(current)
        current = nodes[current].parent_id
    return chain


def survivors(
    nodes: Mapping[str, LibraryNode],
    *,
    topk_children: int,
    max_buffer_size: int,
    key: Callable[[LibraryNode], str | None],
) -> tuple[set[str], set[str]]:
    """Return `(candidates, closure)`:

    1. every root, and for each parent its best `topk_children` candidate children by (value, id);
    2. non-roots deduplicated by construction `key`, best first (a None key never collides);
    3. capped at `max_buffer_size`: roots first, then best (value, id);
    4. `closure` adds every ancestor of a candidate. Everything outside `closure` is dropped.
    """
    roots = {n.id for n in nodes.values() if n.is_root}
    siblings: dict[str, list[LibraryNode]] = {}
    for node in nodes.values():
        if node.parent_id is not None and node.archive_candidate:
            siblings.setdefault(node.parent_id, []).append(node)
    selected = set(roots)
    for children in siblings.values():
        selected.update(n.id for n in _best_first(children)[:topk_children])

    candidates, seen = set(roots), set()
    for node in _best_first([nodes[i] for i in selected - roots]):
        node_key = key(node)
        if node_key is None or node_key not in seen:
            candidates.add(node.id)
            if node_key is not None:
                seen.add(node_key)

    if len(candidates) > max_buffer_size:
        rest = _best_first([nodes[i] for i in candidates - roots])
        candidates = roots | {n.id for n in rest[: max(max_buffer_size - len(roots), 0)]}

    closure = {a for node_id in candidates for a in ancestors(nodes, node_id)}
    return candidates, closure
