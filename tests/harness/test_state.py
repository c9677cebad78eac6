"""Records: validation at the boundary, canonical types, and the reference dict layout."""

from __future__ import annotations

import pytest
from archive_builders import make_entry, make_seed

from harness.state import (
    ArchiveConfig,
    ArchiveGroup,
    LibraryEntry,
    LibraryNode,
    RecordError,
    group_uid,
)


def test_entry_round_trips_through_its_dict_in_reference_key_order():
    entry = make_entry("parent", 3, raw=42.5)
    data = entry.to_dict()
    assert list(data) == [
        "id", "parent_id", "problem_id", "timestep", "guidance", "execution_thinking",
        "solution", "verifier_reward", "verifier_raw_score", "verifier_status",
        "verifier_message", "summary", "reusable_idea", "failure_mode", "metadata",
    ]  # fmt: skip
    assert LibraryEntry.from_dict(data) == entry


def test_unknown_key_in_an_entry_is_an_error_naming_the_key():
    data = make_seed().to_dict() | {"lineage": []}
    with pytest.raises(RecordError, match="unknown key 'lineage'"):
        LibraryEntry.from_dict(data)


def test_missing_key_in_a_node_is_an_error_naming_the_key():
    data = LibraryNode("n", "p", 0, None, 1.0, 1.0, 0, None).to_dict()
    del data["visits"]
    with pytest.raises(RecordError, match="missing key 'visits'"):
        LibraryNode.from_dict(data)


def test_wrong_types_are_refused_with_the_field_name():
    data = make_seed().to_dict() | {"timestep": "0"}
    with pytest.raises(RecordError, match=r"\.timestep must be int"):
        LibraryEntry.from_dict(data)
    data = make_seed().to_dict() | {"timestep": True}
    with pytest.raises(RecordError, match=r"\.timestep must be int"):
        LibraryEntry.from_dict(data)


def test_integer_scores_are_stored_as_floats_so_json_is_stable():
    entry = LibraryEntry.from_dict(make_seed().to_dict() | {"verifier_reward": 1})
    assert entry.verifier_reward == 1.0 and isinstance(entry.verifier_reward, float)
    node = LibraryNode("n", "p", 0, None, 5, 5, 0, None, ["c"])
    assert node.to_dict()["value"] == 5.0 and isinstance(node.to_dict()["value"], float)
    assert node.children == ("c",)


def test_unknown_verifier_status_is_refused():
    with pytest.raises(RecordError, match="unknown verifier_status 'timeout'"):
        LibraryEntry.from_dict(make_seed().to_dict() | {"verifier_status": "timeout"})


def test_non_finite_values_are_refused():
    with pytest.raises(RecordError, match="finite"):
        LibraryEntry.from_dict(make_seed().to_dict() | {"verifier_raw_score": float("nan")})
    with pytest.raises(RecordError, match="finite"):
        LibraryNode("n", "p", 0, None, float("inf"), None, 0, None)


def test_group_without_submissions_has_no_entry_ids_key_like_the_reference():
    fresh = ArchiveGroup("node", 0, (), False, 3)
    assert "entry_ids" not in fresh.to_dict()
    assert ArchiveGroup.from_dict(fresh.to_dict()) == fresh
    used = ArchiveGroup("node", 1, (), False, 3, ("e1",))
    assert used.to_dict()["entry_ids"] == ["e1"]
    assert ArchiveGroup.from_dict(used.to_dict()) == used
    assert group_uid(3, 1) == "3:1"


def test_config_holds_the_published_defaults_and_refuses_other_policies():
    config = ArchiveConfig(rollout_n=16, groups_per_batch=8)
    assert config.to_dict() == {
        "rollout_n": 16,
        "puct_c": 1.0,
        "max_buffer_size": 1000,
        "topk_children": 2,
        "puct_q_mode": "best_child",
        "discover_compat": True,
        "groups_per_batch": 8,
        "score_direction": "max",
    }
    assert ArchiveConfig.from_dict(config.to_dict()) == config
    with pytest.raises(RecordError, match="puct_q_mode 'blended'"):
        ArchiveConfig(rollout_n=1, groups_per_batch=1, puct_q_mode="blended")
    with pytest.raises(RecordError, match="score_direction"):
        ArchiveConfig(rollout_n=1, groups_per_batch=1, score_direction="up")
    with pytest.raises(RecordError, match="rollout_n must be >= 1"):
        ArchiveConfig(rollout_n=0, groups_per_batch=1)


def test_config_differences_name_each_setting_with_both_values():
    stored = ArchiveConfig(rollout_n=16, groups_per_batch=8)
    requested = ArchiveConfig(rollout_n=8, groups_per_batch=8, score_direction="min")
    assert stored.differences(requested) == [
        "rollout_n: stored 16, requested 8",
        "score_direction: stored 'max', requested 'min'",
    ]


def test_value_of_a_min_task_is_the_negated_raw_score():
    assert ArchiveConfig(rollout_n=1, groups_per_batch=1, score_direction="min").signed(3.5) == -3.5
    assert ArchiveConfig(rollout_n=1, groups_per_batch=1).signed(3.5) == 3.5
