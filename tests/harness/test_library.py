"""The archive: roots, selection, submission, statistics, filter, invariants, config pinning."""

from __future__ import annotations

from dataclasses import replace

import pytest
from archive_builders import Spec, lineage, make_entry, make_seed, tree_archive

from harness.library import (
    Archive,
    ArchiveConfigMismatch,
    ArchiveError,
    ArchiveInvariantError,
    construction_key,
)
from harness.state import (
    EXECUTION_ERROR,
    GUIDANCE_FORMAT_ERROR,
    INVALID,
    PARSE_ERROR,
    ArchiveConfig,
    ArchiveGroup,
)


def config(g: int = 2, r: int = 2, **extra) -> ArchiveConfig:
    return ArchiveConfig(rollout_n=r, groups_per_batch=g, **extra)


def test_seed_is_replicated_to_one_root_per_group_with_cloned_entries():
    archive = Archive.from_seed(config(g=3), make_seed(score=12.0))
    roots = [n for n in archive.nodes.values() if n.is_root]
    assert len(roots) == 3
    assert len({n.entry_id for n in roots}) == 3
    clones = [n for n in roots if n.metadata.get("replicated_seed_root")]
    assert len(clones) == 2
    for node in roots:
        entry = archive.entries[node.entry_id]
        assert entry.parent_id == node.id and entry.timestep == 0
        assert node.value == 12.0 and node.archive_candidate
        assert node.metadata["kind"] == "root"
    assert sum(1 for e in archive.entries.values() if e.metadata.get("replicated_seed_entry")) == 2


def test_seed_of_a_min_task_gets_a_negated_value():
    archive = Archive.from_seed(config(g=1, score_direction="min"), make_seed(score=12.0))
    assert [n.value for n in archive.nodes.values()] == [-12.0]


def test_an_invalid_seed_is_refused():
    bad = make_entry("x", -1, status=INVALID)
    with pytest.raises(ArchiveError, match="seed entry"):
        Archive.from_seed(config(), bad)


def test_two_groups_of_one_step_start_in_disjoint_root_lineages():
    archive = Archive.from_seed(config(g=2), make_seed())
    first, second = archive.select_parents(0)
    assert first.id != second.id and first.is_root and second.is_root


def test_groups_of_a_later_step_get_disjoint_lineages():
    archive = Archive.from_seed(config(g=2, r=2), make_seed(score=1.0))
    parents = archive.select_parents(0)
    # the first root's lineage gets much better children than the second's
    for g, parent in enumerate(parents):
        for raw in (50.0, 60.0) if g == 0 else (2.0, 3.0):
            archive.submit(0, g, make_entry(parent.id, 0, raw=raw))
    first, second = archive.select_parents(1)
    assert first.value == 60.0  # the best node wins group 0
    # group 1 may not pick anything on group 0's line of descent (ancestors or descendants)
    assert second.id not in lineage(archive, first.id)
    assert first.id not in lineage(archive, second.id)
    assert second.value == 50.0  # the sibling is not on that line, and it ranks next


def test_selection_falls_back_to_the_best_ranked_node_when_every_lineage_is_blocked():
    # two roots, but only one has a solution: the second group has nowhere else to go
    archive = tree_archive(
        config(g=2, r=1),
        [Spec("r1", None, 5.0), Spec("r2", None, 9.0, solution="   ")],
    )
    first, second = archive.select_parents(0)
    assert first.id == second.id == "r1"


def test_selecting_an_existing_group_is_idempotent_and_counts_one_visit():
    archive = Archive.from_seed(config(g=2), make_seed())
    chosen = archive.select_parent(0, 1)
    again = archive.select_parent(0, 1)
    assert again.id == chosen.id and again.visits == 1
    assert archive.groups["1:1"].selected_node_id == chosen.id


def test_children_made_during_a_step_are_not_selectable_in_it():
    archive = Archive.from_seed(config(g=2, r=1), make_seed(score=1.0))
    parent = archive.select_parent(0, 0)
    child = archive.submit(0, 0, make_entry(parent.id, 0, raw=1000.0))
    assert child is not None
    assert child.id not in {r.id for r in archive.ranking(0)}
    assert archive.select_parent(0, 1).id != child.id
    assert child.id in {r.id for r in archive.ranking(1)}


def test_failed_rollouts_count_as_visits_for_parent_and_every_ancestor_but_make_no_node():
    archive = tree_archive(
        config(g=1, r=4),
        [Spec("root", None, 1.0), Spec("mid", "root", 2.0, 1), Spec("leaf", "mid", 10.0, 2)],
    )
    parent = archive.select_parent(5, 0)
    assert parent.id == "leaf"
    failures = [
        make_entry("leaf", 5, status=GUIDANCE_FORMAT_ERROR),
        make_entry("leaf", 5, status=EXECUTION_ERROR),
        make_entry("leaf", 5, status=PARSE_ERROR),
    ]
    for number, entry in enumerate(failures, 1):
        assert archive.submit(5, 0, entry) is None
        assert archive.puct_n == {"leaf": number, "mid": number, "root": number}
        assert archive.puct_T == number
    assert archive.puct_m == {}
    assert set(archive.nodes) == {"root", "mid", "leaf"}
    assert all(e.id in archive.entries for e in failures)


def test_an_invalid_verdict_with_a_score_is_a_visit_without_best_child_update():
    archive = tree_archive(config(g=1, r=2), [Spec("root", None, 1.0)])
    archive.select_parent(0, 0)
    assert archive.submit(0, 0, make_entry("root", 0, status=INVALID, raw=99.0)) is None
    assert archive.puct_m == {} and archive.puct_n == {"root": 1}


def test_valid_rollout_updates_best_child_of_the_direct_parent_only():
    archive = tree_archive(config(g=1, r=2), [Spec("root", None, 1.0), Spec("mid", "root", 5.0, 1)])
    assert archive.select_parent(3, 0).id == "mid"
    node = archive.submit(3, 0, make_entry("mid", 3, raw=7.0))
    assert node is not None and node.parent_id == "mid" and node.timestep == 4
    assert archive.nodes["mid"].children == (node.id,)
    assert archive.puct_m == {"mid": 7.0}
    assert archive.puct_n == {"mid": 1, "root": 1}


def test_duplicate_solution_is_stored_and_counted_but_not_archived():
    archive = Archive.from_seed(config(g=1, r=3), make_seed(score=1.0))
    (parent,) = archive.select_parents(0)
    first = archive.submit(0, 0, make_entry(parent.id, 0, raw=4.0, solution="int main(){}"))
    dup = archive.submit(0, 0, make_entry(parent.id, 0, raw=9.0, solution="  int main(){}\n"))
    assert first is not None and dup is None
    assert archive.puct_m[parent.id] == 9.0  # computed before the duplicate check
    assert archive.puct_T == 2 and len(archive.entries) == 3


def test_a_duplicate_of_the_seed_is_not_archived():
    archive = Archive.from_seed(config(g=1, r=1), make_seed(solution="seed code"))
    (parent,) = archive.select_parents(0)
    assert archive.submit(0, 0, make_entry(parent.id, 0, solution="seed code")) is None


def test_construction_key_hashes_the_stripped_solution():
    entry = make_entry("p", 0, solution="\n int main(){} \n")
    assert construction_key(entry) == construction_key(make_entry("p", 0, solution="int main(){}"))
    assert construction_key(entry).startswith("solution-sha256:")
    assert construction_key(make_entry("p", 0, solution="  ")) is None


def test_group_accounting_refuses_an_extra_submission():
    archive = Archive.from_seed(config(g=2, r=2), make_seed())
    parent = archive.select_parent(0, 0)
    archive.submit(0, 0, make_entry(parent.id, 0))
    archive.submit(0, 0, make_entry(parent.id, 0))
    assert archive.groups["1:0"].finalized
    with pytest.raises(ArchiveError, match="refusing an extra submission"):
        archive.submit(0, 0, make_entry(parent.id, 0))
    assert archive.puct_T == 2


def test_submission_to_an_unselected_group_or_with_the_wrong_parent_is_refused():
    archive = Archive.from_seed(config(g=2, r=2), make_seed())
    with pytest.raises(ArchiveError, match="call select_parents"):
        archive.submit(0, 0, make_entry("anything", 0))
    first, second = archive.select_parents(0)
    with pytest.raises(ArchiveError, match="does not belong to group 1:0"):
        archive.submit(0, 0, make_entry(second.id, 0))
    with pytest.raises(ArchiveError, match="does not belong"):
        archive.submit(0, 0, make_entry(first.id, 1))  # wrong timestep
    assert archive.puct_T == 0


def test_filter_keeps_top_two_children_per_parent_and_drops_their_statistics():
    archive = Archive.from_seed(config(g=1, r=5), make_seed(score=0.0))
    (root,) = archive.select_parents(0)
    made = [archive.submit(0, 0, make_entry(root.id, 0, raw=float(v))) for v in (3, 1, 5, 4, 2)]
    kept = {n.id for n in archive.nodes.values() if not n.is_root}
    assert kept == {made[2].id, made[3].id}  # values 5 and 4
    assert archive.nodes[root.id].children == tuple(c for c in (n.id for n in made) if c in kept)
    assert len(archive.entries) == 6  # entries are never pruned
    assert archive.best_node_id == made[2].id


def _finish_step_with_failures(archive: Archive, step: int) -> None:
    for g, parent in enumerate(archive.select_parents(step)):
        for _ in range(archive.config.rollout_n):
            archive.submit(step, g, make_entry(parent.id, step, status=INVALID))


def test_filter_dedups_non_roots_by_construction_key_best_first():
    archive = tree_archive(
        config(g=1, r=1),
        [
            Spec("root", None, 0.0),
            Spec("a", "root", 5.0, 1, solution="same"),
            Spec("b", "root", 4.0, 1, solution="other"),
            Spec("c", "b", 3.0, 2, solution="same"),
        ],
    )
    _finish_step_with_failures(archive, 5)
    assert set(archive.nodes) == {"root", "a", "b"}
    assert archive.nodes["b"].children == ()


def test_filter_keeps_ancestors_of_kept_nodes_but_makes_them_unselectable():
    archive = tree_archive(
        config(g=1, r=1),
        [
            Spec("root", None, 0.0),
            Spec("a", "root", 5.0, 1),
            Spec("b", "root", 4.0, 1),
            Spec("d", "root", 1.0, 1),
            Spec("e", "d", 10.0, 2),
        ],
    )
    _finish_step_with_failures(archive, 5)
    assert set(archive.nodes) == {"root", "a", "b", "d", "e"}
    assert not archive.nodes["d"].archive_candidate
    assert archive.nodes["e"].archive_candidate
    ranked = {r.id for r in archive.ranking(6)}
    assert "d" not in ranked and "e" in ranked


def test_filter_caps_the_archive_with_roots_first_then_best_values():
    archive = tree_archive(
        config(g=1, r=1, max_buffer_size=3),
        [
            Spec("root", None, 0.0),
            Spec("a", "root", 5.0, 1),
            Spec("b", "root", 4.0, 1),
            Spec("a1", "a", 7.0, 2),
            Spec("a2", "a", 6.0, 2),
            Spec("b1", "b", 3.0, 2),
        ],
    )
    _finish_step_with_failures(archive, 5)
    candidates = {i for i, n in archive.nodes.items() if n.archive_candidate}
    assert candidates == {"root", "a1", "a2"}
    assert set(archive.nodes) == {"root", "a", "a1", "a2"}  # a kept only as ancestor
    assert archive.puct_n.keys() <= set(archive.nodes)


def test_filter_waits_for_the_whole_batch():
    archive = Archive.from_seed(config(g=2, r=3), make_seed(score=0.0))
    first, _ = archive.select_parents(0)
    for v in (1.0, 2.0, 3.0):
        archive.submit(0, 0, make_entry(first.id, 0, raw=v))
    assert len(archive.nodes[first.id].children) == 3  # group 0 finalized, batch not complete
    assert not archive.step_finalized(0)


def test_invariant_violations_raise_when_an_archive_is_built():
    good = Archive.from_seed(config(g=2), make_seed())
    parts = {
        "nodes": dict(good.nodes),
        "entries": dict(good.entries),
        "groups": {},
        "best_node_id": good.best_node_id,
        "puct_n": {},
        "puct_m": {},
    }
    with pytest.raises(ArchiveInvariantError, match="puct_T=3 but 0 rollouts"):
        Archive(good.config, puct_T=3, **parts)
    with pytest.raises(ArchiveInvariantError, match="2 roots, expected groups_per_batch=3"):
        Archive(config(g=3), puct_T=0, **parts)
    bad_group = ArchiveGroup(next(iter(good.nodes)), 2, (), False, 1, ("x", "y"))
    with pytest.raises(ArchiveInvariantError, match="finalized=False with submitted=2"):
        Archive(good.config, puct_T=2, **(parts | {"groups": {"1:0": bad_group}}))
    with pytest.raises(ArchiveInvariantError, match="puct_n has keys of missing nodes"):
        Archive(good.config, puct_T=0, **(parts | {"puct_n": {"ghost": 1}}))


def test_a_parent_cycle_in_a_loaded_archive_is_refused():
    archive = tree_archive(config(g=1, r=1), [Spec("root", None, 1.0), Spec("a", "root", 2.0)])
    nodes = dict(archive.nodes)
    nodes["b"] = replace(nodes["a"], id="b", parent_id="c", children=("c",))
    nodes["c"] = replace(nodes["a"], id="c", parent_id="b", children=("b",))
    with pytest.raises(ArchiveInvariantError, match="parent chain loops"):
        Archive(
            archive.config,
            nodes=nodes,
            entries=archive.entries,
            groups={},
            best_node_id="a",
            puct_n={},
            puct_m={},
            puct_T=0,
        )


def test_a_stored_config_that_differs_from_the_requested_one_refuses_to_run():
    archive = Archive.from_seed(config(g=2, r=2), make_seed())
    archive.require_config(config(g=2, r=2))
    with pytest.raises(ArchiveConfigMismatch, match="rollout_n: stored 2, requested 4") as err:
        archive.require_config(config(g=2, r=4))
    assert "use a new output directory" in str(err.value)
