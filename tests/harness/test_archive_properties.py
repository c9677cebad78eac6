"""Property-based test: random select/submit sequences (which finalize and filter steps), with
occasional commit/reopen through the store, keep every invariant after every operation."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from archive_builders import lineage, make_entry, make_seed
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from harness.library import Archive, construction_key
from harness.state import STATUSES, VALID, ArchiveConfig
from harness.storage.library_json import from_library_dict, library_json_bytes, to_library_dict
from harness.storage.store import ArchiveStore


class ArchiveMachine(RuleBasedStateMachine):
    """Drives an archive (and its store) through random steps and checks it against a model of
    what the statistics must be."""

    @initialize(
        groups=st.integers(1, 3),
        rollouts=st.integers(1, 3),
        cap=st.integers(3, 8),
        topk=st.integers(1, 2),
        direction=st.sampled_from(["max", "min"]),
    )
    def start(self, groups, rollouts, cap, topk, direction):
        self.config = ArchiveConfig(
            rollout_n=rollouts,
            groups_per_batch=groups,
            max_buffer_size=cap,
            topk_children=topk,
            score_direction=direction,
        )
        self.archive = Archive.from_seed(self.config, make_seed(score=5.0, solution="seed"))
        self.dir = Path(tempfile.mkdtemp(prefix="archive-machine-"))
        self.store = ArchiveStore.create(self.dir / "store", self.archive)
        self.step = 0
        self.slots: dict[int, int] = {}  # group -> next rollout slot in this step
        self.selected = False

    def teardown(self):
        if hasattr(self, "store"):
            self.store.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    @precondition(lambda self: not self.selected)
    @rule()
    def select(self):
        parents = self.archive.select_parents(self.step)
        again = self.archive.select_parents(self.step)
        assert [p.id for p in parents] == [p.id for p in again]  # idempotent
        ids = [p.id for p in parents]
        for i, first in enumerate(ids):
            assert all(other not in lineage(self.archive, first) for other in ids[i + 1 :])
        self.selected = True
        self.slots = dict.fromkeys(range(self.config.groups_per_batch), 0)

    @precondition(lambda self: self.selected)
    @rule(
        data=st.data(),
        status=st.sampled_from(STATUSES),
        score=st.sampled_from([1.0, 2.0, 2.0, 3.5, 7.0]),
        program=st.integers(0, 4),
    )
    def submit(self, data, status, score, program):
        open_groups = [g for g, n in self.slots.items() if n < self.config.rollout_n]
        group = data.draw(st.sampled_from(open_groups))
        parent_id = self.archive.groups[f"{self.step + 1}:{group}"].selected_node_id
        ancestors = []
        current = parent_id
        while current is not None:
            ancestors.append(current)
            current = self.archive.nodes[current].parent_id
        n_before = {a: self.archive.puct_n.get(a, 0) for a in ancestors}
        m_before = self.archive.puct_m.get(parent_id)
        candidate_keys = {
            construction_key(self.archive.entries[n.entry_id])
            for n in self.archive.nodes.values()
            if n.archive_candidate
        }
        entry = make_entry(parent_id, self.step, status=status, raw=score, solution=f"p{program}")
        total = self.archive.puct_T
        last_of_step = sum(self.slots.values()) + 1 == len(self.slots) * self.config.rollout_n

        node = self.store.record_rollout(self.archive, self.step, group, self.slots[group], entry)
        self.slots[group] += 1

        assert self.archive.puct_T == total + 1
        assert entry.id in self.archive.entries
        archived = status == VALID and construction_key(entry) not in candidate_keys
        assert (node is not None) == archived
        if not last_of_step:  # the filter may drop statistics of pruned nodes
            assert all(self.archive.puct_n[a] == n_before[a] + 1 for a in ancestors)
            if status == VALID:
                value = self.config.signed(score)
                assert self.archive.puct_m[parent_id] == max(m_before or value, value)
            else:
                assert self.archive.puct_m.get(parent_id) == m_before
        if last_of_step:
            self.check_filtered()
            self.store.commit_step(self.archive, self.step)
            self.step += 1
            self.selected = False
            event(f"steps completed: {min(self.step, 4)}{'+' if self.step >= 4 else ''}")

    def check_filtered(self):
        nodes = self.archive.nodes
        candidates = [n for n in nodes.values() if n.archive_candidate]
        assert len(candidates) <= max(self.config.max_buffer_size, self.config.groups_per_batch)
        for node in nodes.values():
            kids = [c for c in node.children if nodes[c].archive_candidate]
            assert len(kids) <= self.config.topk_children
        keys = [
            construction_key(self.archive.entries[n.entry_id]) for n in candidates if n.parent_id
        ]
        assert len(keys) == len(set(keys))
        for node in candidates:  # every candidate's ancestors are still present
            current = node.parent_id
            while current is not None:
                current = nodes[current].parent_id

    @rule()
    def reopen_store(self):
        """Close and reopen the store: the restored archive equals the in-memory one."""
        self.store.close()
        self.store = ArchiveStore.open(self.dir / "store", self.config)
        restored = self.store.load()
        if self.selected:  # parents are re-selected on resume; selection is deterministic
            restored.archive.select_parents(self.step)
        assert library_json_bytes(restored.archive) == library_json_bytes(self.archive)
        self.archive = restored.archive

    @rule()
    def export_import(self):
        data = library_json_bytes(self.archive)
        assert library_json_bytes(from_library_dict(to_library_dict(self.archive))) == data

    @invariant()
    def invariants_hold(self):
        if hasattr(self, "archive"):
            self.archive.check_invariants()
            submitted = sum(g.submitted for g in self.archive.groups.values())
            assert self.archive.puct_T == submitted
            roots = [n for n in self.archive.nodes.values() if n.is_root]
            assert len(roots) == self.config.groups_per_batch
            assert all(n.archive_candidate for n in roots)


ArchiveMachine.TestCase.settings = settings(
    max_examples=50,
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_archive_state_machine = ArchiveMachine.TestCase
