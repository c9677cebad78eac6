"""The archive: a PUCT search tree over verified candidates, in the Discover-compatible layout.

`Archive` is pure in-memory state with the operations of one run (docs/design.md §1–§2): seed roots,
select the G parents of a step, submit rollouts, and filter the archive when a step's whole
batch is in. Every mutation re-checks the invariants and raises on a violation, so a bug
cannot silently corrupt a run. The pure pieces it composes live beside it: node construction in
`harness.archive.nodes`, who is selectable in `harness.archive.selection`, the filter arithmetic
in `harness.archive.filtering`, the invariant checks in `harness.archive.checks`. Persistence lives
in `harness.storage.store`, the `library.json` exchange format in `harness.storage.library_json`.

Slightly over the project's ~400 lines: what is left is the archive's own state and its
mutations, each re-checking the invariants; the pure pieces are already out in `archive/`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType

from harness import arms, puct
from harness.archive import checks, filtering, selection
from harness.archive.nodes import child_node, seed_roots
from harness.state import (
    ARCHIVE_CANDIDATE,
    ArchiveConfig,
    ArchiveGroup,
    LibraryEntry,
    LibraryNode,
    group_uid,
)


class ArchiveError(RuntimeError):
    """An operation the archive refuses (wrong group, full group, unknown node, ...)."""


class ArchiveInvariantError(ArchiveError):
    """The archive state violates an invariant (docs/design.md §2): a bug or a corrupt file."""


class ArchiveConfigMismatch(ArchiveError):
    """A stored archive was made with other settings than the ones requested."""


def require_same_config(stored: ArchiveConfig, requested: ArchiveConfig) -> None:
    """Raise `ArchiveConfigMismatch` naming every differing setting: a stored archive is
    immutable with respect to its sampling config, so a changed run needs a new directory."""
    diffs = stored.differences(requested)
    if diffs:
        raise ArchiveConfigMismatch(
            "archive config mismatch: " + "; ".join(diffs) + " — use a new output directory"
        )


def construction_key(entry: LibraryEntry) -> str | None:
    """The dedup key of a candidate: `solution-sha256:` + sha256 of the stripped solution, or
    None when there is no solution (such entries never deduplicate)."""
    solution = entry.solution.strip()
    if not solution:
        return None
    return "solution-sha256:" + hashlib.sha256(solution.encode("utf-8")).hexdigest()


class Archive:
    """The search archive of one run. Build it with `from_seed`, or from a Discover
    `library.json` with `harness.storage.library_json.read_library_json`.

    All public methods keep the invariants (group accounting, PUCT totals, G roots, referential
    integrity); they raise `ArchiveError` for a refused operation and `ArchiveInvariantError`
    if the state is inconsistent.
    """

    def __init__(
        self,
        config: ArchiveConfig,
        *,
        nodes: Mapping[str, LibraryNode],
        entries: Mapping[str, LibraryEntry],
        groups: Mapping[str, ArchiveGroup],
        best_node_id: str | None,
        puct_n: Mapping[str, int],
        puct_m: Mapping[str, float],
        puct_T: int,
    ) -> None:
        self.config = config
        self._nodes = dict(nodes)
        self._entries = dict(entries)
        self._groups = dict(groups)
        self._best_node_id = best_node_id
        self._puct_n = dict(puct_n)
        self._puct_m = dict(puct_m)
        self._puct_T = puct_T
        self._keys: dict[str, str | None] = {}  # entry id -> construction key (cache)
        self._candidate_keys = self._keys_of_candidates()
        self._submitted = sum(g.submitted for g in self._groups.values())
        self.check_invariants()

    # --- construction ------------------------------------------------------------------------

    @classmethod
    def from_seed(
        cls, config: ArchiveConfig, seed: LibraryEntry, run_seed: int | None = None
    ) -> Archive:
        """A fresh archive holding the seed candidate as a root, cloned until there are G roots so
        the groups of step 0 start in disjoint lineages. The seed must be valid with a solution.
        With `run_seed`, the roots' ids derive from it (`harness.arms.root_id`), so two runs with
        the same seed build the same archive; without it they are random."""
        if not seed.is_valid or not seed.solution.strip():
            raise ArchiveError(
                f"seed entry {seed.id} must be valid, with a raw score and a solution "
                f"(status {seed.verifier_status!r}, raw score {seed.verifier_raw_score!r})"
            )
        nodes, entries = seed_roots(config, seed, run_seed)
        best = max(nodes.values(), key=lambda n: (n.value, n.id)).id
        return cls(
            config,
            nodes=nodes,
            entries=entries,
            groups={},
            best_node_id=best,
            puct_n={},
            puct_m={},
            puct_T=0,
        )

    # --- read access -------------------------------------------------------------------------

    @property
    def nodes(self) -> Mapping[str, LibraryNode]:
        """Current nodes by id (read-only view)."""
        return MappingProxyType(self._nodes)

    @property
    def entries(self) -> Mapping[str, LibraryEntry]:
        """Every entry ever stored, by id (read-only view)."""
        return MappingProxyType(self._entries)

    @property
    def groups(self) -> Mapping[str, ArchiveGroup]:
        """Every group ever acquired, by uid (read-only view)."""
        return MappingProxyType(self._groups)

    @property
    def puct_n(self) -> Mapping[str, int]:
        """PUCT visit counts by node id."""
        return MappingProxyType(self._puct_n)

    @property
    def puct_m(self) -> Mapping[str, float]:
        """Best valid child value by node id."""
        return MappingProxyType(self._puct_m)

    @property
    def puct_T(self) -> int:
        """Total number of submitted rollouts."""
        return self._puct_T

    @property
    def best_node_id(self) -> str | None:
        """The archive candidate with the highest `(value, id)`."""
        return self._best_node_id

    def best_entry(self) -> LibraryEntry | None:
        """The entry of the best archive candidate (what a trial writes out at the end)."""
        node = self._nodes.get(self._best_node_id or "")
        return self._entries.get(node.entry_id or "") if node else None

    def entry_of(self, node_id: str) -> LibraryEntry:
        """The entry a node was made from (its code, summary and verdict)."""
        node = self._require_node(node_id)
        if node.entry_id is None or node.entry_id not in self._entries:
            raise ArchiveError(f"node {node_id} has no stored entry")
        return self._entries[node.entry_id]

    def last_step(self) -> int:
        """The highest step that has a group (-1 for a fresh archive)."""
        return max((g.visible_timestep_exclusive for g in self._groups.values()), default=0) - 1

    def step_groups(self, step: int) -> dict[str, ArchiveGroup]:
        """The groups acquired for `step` (archive timestep `step + 1`), by uid."""
        t = step + 1
        return {uid: g for uid, g in self._groups.items() if g.visible_timestep_exclusive == t}

    def step_finalized(self, step: int) -> bool:
        """True when all G groups of `step` exist and each has all R submissions."""
        t = step + 1
        return all(
            group_uid(t, g) in self._groups and self._groups[group_uid(t, g)].finalized
            for g in range(self.config.groups_per_batch)
        )

    def require_config(self, requested: ArchiveConfig) -> None:
        """Refuse settings other than the stored ones (see `require_same_config`)."""
        require_same_config(self.config, requested)

    # --- selection ---------------------------------------------------------------------------

    def select_parents(
        self, step: int, policy: str = arms.DEFAULT_SELECTION, run_seed: int = 0
    ) -> list[LibraryNode]:
        """Select (or return the recorded) parents of all G groups of `step`, in group order."""
        return [
            self.select_parent(step, g, policy, run_seed)
            for g in range(self.config.groups_per_batch)
        ]

    def select_parent(
        self, step: int, group: int, policy: str = arms.DEFAULT_SELECTION, run_seed: int = 0
    ) -> LibraryNode:
        """The parent of group `group` in `step`: the recorded one if the group exists (the call is
        idempotent), else the one `policy` picks (`harness.archive.selection.choose`): for `puct`
        the best-ranked visible archive candidate outside the lineages already chosen in this
        step (or the best-ranked one if all are blocked); `greedy`, `uniform` (drawn with a seed
        derived from `run_seed`, step and group) and `seed` (best-of-n) as `harness.arms` says."""
        if not 0 <= group < self.config.groups_per_batch:
            raise ArchiveError(
                f"group index {group} is outside 0..{self.config.groups_per_batch - 1}"
            )
        t = step + 1
        uid = group_uid(t, group)
        if uid in self._groups:
            return self._require_node(self._groups[uid].selected_node_id)
        ranked = self.ranking(step)
        if not ranked:
            raise ArchiveError(f"no selectable node for step {step}: the archive has no candidate")
        blocked = selection.blocked_lines(self._nodes, self._groups, t)
        roots = [n.id for n in self._nodes.values() if n.is_root]
        chosen_id = selection.choose(
            policy,
            ranked,
            blocked,
            roots,
            group=group,
            draw_seed=arms.derived_seed(run_seed, "uniform", step, group),
        )
        chosen = replace(self._nodes[chosen_id], visits=self._nodes[chosen_id].visits + 1)
        self._nodes[chosen_id] = chosen
        self._groups[uid] = ArchiveGroup(
            selected_node_id=chosen_id,
            submitted=0,
            children=(),
            finalized=False,
            visible_timestep_exclusive=t,
        )
        self._check_touched(uid, [chosen_id])
        return chosen

    def ranking(self, step: int) -> list[puct.Ranked]:
        """PUCT ranking of the nodes selectable in `step`: visible (root or made before this
        step), archive candidates, with a non-empty solution."""
        return puct.rank(
            selection.selectable(self._nodes, self._entries, step + 1),
            visits=self._puct_n,
            best_child=self._puct_m,
            total=self._puct_T,
            c=self.config.puct_c,
        )

    # --- submission --------------------------------------------------------------------------

    def check_submission(self, step: int, group: int, entry: LibraryEntry) -> ArchiveGroup:
        """Raise `ArchiveError` when `submit(step, group, entry)` would refuse it; changes
        nothing (the store checks before it journals, so a refused entry never reaches disk)."""
        t = step + 1
        uid = group_uid(t, group)
        current = self._groups.get(uid)
        if current is None:
            raise ArchiveError(f"group {uid} has no parent yet: call select_parents({step}) first")
        if current.finalized or current.submitted >= self.config.rollout_n:
            raise ArchiveError(
                f"group {uid} is already complete ({current.submitted} of "
                f"{self.config.rollout_n} submitted); refusing an extra submission"
            )
        if entry.parent_id != current.selected_node_id or entry.timestep != t:
            raise ArchiveError(
                f"entry {entry.id} (parent {entry.parent_id}, timestep {entry.timestep}) does not "
                f"belong to group {uid} (parent {current.selected_node_id}, timestep {t})"
            )
        if entry.id in self._entries:
            raise ArchiveError(f"entry {entry.id} is already stored")
        return current

    def submit(self, step: int, group: int, entry: LibraryEntry) -> LibraryNode | None:
        """Record one finished rollout of `group` in `step` and return the node it became (None if
        it is not archived: failed, no raw score, or a duplicate of an archive candidate).

        The entry is always stored and always counts as a PUCT visit of its parent and every
        ancestor. Refuses a group that was not selected, is full or finalized, and an entry whose
        parent or timestep does not match the group. When this completes the step's batch, the
        archive filter runs.
        """
        t = step + 1
        uid = group_uid(t, group)
        current = self.check_submission(step, group, entry)
        parent = self._require_node(current.selected_node_id)

        self._entries[entry.id] = entry
        child_value = self.config.signed(entry.verifier_raw_score) if entry.is_valid else None
        child: LibraryNode | None = None
        key = self._key(entry.id)
        grows = entry.metadata.get(arms.ADDS_TO_TREE, True) is not False  # best-of-n: never
        if grows and child_value is not None and (key is None or key not in self._candidate_keys):
            child = child_node(entry, parent_id=parent.id, timestep=t, value=child_value)
            self._nodes[child.id] = child
            self._nodes[parent.id] = replace(parent, children=(*parent.children, child.id))
            if key is not None:
                self._candidate_keys.add(key)

        submitted = current.submitted + 1
        self._groups[uid] = replace(
            current,
            submitted=submitted,
            children=(*current.children, child.id) if child else current.children,
            entry_ids=(*current.entry_ids, entry.id),
            finalized=submitted == self.config.rollout_n,
        )
        # PUCT statistics: m for the direct parent (before the duplicate check), n up the tree.
        if child_value is not None:
            self._puct_m[parent.id] = max(self._puct_m.get(parent.id, child_value), child_value)
        for node_id in filtering.ancestors(self._nodes, parent.id):
            self._puct_n[node_id] = self._puct_n.get(node_id, 0) + 1
        self._puct_T += 1
        self._submitted += 1

        best = self._nodes.get(self._best_node_id or "")
        if child is not None and (best is None or (child.value, child.id) > (best.value, best.id)):
            self._best_node_id = child.id
        if self.step_finalized(step):
            self._filter()
            self._refresh_best()
            self.check_invariants()  # once per step: the whole archive
        else:
            self._check_touched(uid, [parent.id] + ([child.id] if child else []))
        return child

    def _key(self, entry_id: str) -> str | None:
        if entry_id not in self._keys:
            self._keys[entry_id] = construction_key(self._entries[entry_id])
        return self._keys[entry_id]

    def _keys_of_candidates(self) -> set[str]:
        """Construction keys of the archive candidates (what a new child must not duplicate)."""
        keys = (
            self._key(n.entry_id)
            for n in self._nodes.values()
            if n.archive_candidate and n.entry_id
        )
        return {key for key in keys if key is not None}

    # --- archive filter (docs/design.md §2, when a step's whole batch is finalized) -------------

    def _filter(self) -> None:
        candidates, closure = filtering.survivors(
            self._nodes,
            topk_children=self.config.topk_children,
            max_buffer_size=self.config.max_buffer_size,
            key=lambda node: self._key(node.entry_id) if node.entry_id else None,
        )
        self._nodes = {
            node_id: replace(
                node,
                children=tuple(c for c in node.children if c in closure),
                metadata={**node.metadata, ARCHIVE_CANDIDATE: node_id in candidates},
            )
            for node_id, node in self._nodes.items()
            if node_id in closure
        }
        self._puct_n = {i: n for i, n in self._puct_n.items() if i in closure}
        self._puct_m = {i: m for i, m in self._puct_m.items() if i in closure}
        self._candidate_keys = self._keys_of_candidates()

    def _refresh_best(self) -> None:
        pool = [n for n in self._nodes.values() if n.archive_candidate]
        self._best_node_id = max(pool, key=lambda n: (n.value, n.id)).id if pool else None

    # --- invariants --------------------------------------------------------------------------

    def check_invariants(self) -> None:
        """Raise `ArchiveInvariantError` listing every violated invariant: group accounting
        (0 <= submitted <= R, finalized iff submitted == R, one entry per submission), puct_T ==
        total submissions, G roots, and referential integrity of nodes, entries and statistics.
        Runs on construction and after each step's filter; other mutations check what they touch.
        """
        errors = checks.archive_errors(
            rollout_n=self.config.rollout_n,
            groups_per_batch=self.config.groups_per_batch,
            nodes=self._nodes,
            entries=self._entries,
            groups=self._groups,
            puct_n=self._puct_n,
            puct_m=self._puct_m,
            puct_T=self._puct_T,
            counted_submissions=self._submitted,
            best_node_id=self._best_node_id,
        )
        if errors:
            raise ArchiveInvariantError("archive invariants violated: " + "; ".join(errors))

    def _check_touched(self, uid: str, node_ids: list[str]) -> None:
        """The invariants a selection or a submission can break: its group's accounting, the
        PUCT total against the submission count, and the links of the nodes it changed. Cost is
        independent of the archive size, so per-rollout work stays flat."""
        errors = checks.group_errors(uid, self._groups[uid], self.config.rollout_n, self._nodes)
        if self._puct_T != self._submitted:
            errors.append(f"puct_T={self._puct_T} but {self._submitted} rollouts were submitted")
        for node_id in node_ids:
            errors.extend(checks.node_errors(node_id, self._nodes, self._entries))
        if errors:
            raise ArchiveInvariantError("archive invariants violated: " + "; ".join(errors))

    def _require_node(self, node_id: str) -> LibraryNode:
        if node_id not in self._nodes:
            raise ArchiveError(f"unknown node {node_id}")
        return self._nodes[node_id]
