"""The Discover-compatible library.json: exact bytes, strict reading.

`tests/fixtures/reference_library.json` is a small hand-made archive (two roots, one of them a
replicated seed, three children, a malformed-guidance entry, finalized groups, an open group
without submissions, PUCT statistics, a non-ASCII summary) written in the reference layout by
the independent writer below: `json.dumps(obj, indent=2, sort_keys=True)`, no trailing newline.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from archive_builders import make_entry, make_seed

from harness.library import Archive
from harness.state import GUIDANCE_FORMAT_ERROR, ArchiveConfig, RecordError
from harness.storage.library_json import (
    from_library_dict,
    library_json_bytes,
    read_library_json,
    write_library_json,
)

FIXTURE = Path(__file__).parents[1] / "fixtures" / "reference_library.json"

R1, R2 = "0b6f4f0e-3a59-4c8e-9d7e-1f2a3b4c5d01", "0b6f4f0e-3a59-4c8e-9d7e-1f2a3b4c5d02"
C1, C2, C3 = (f"7d1e2c3b-4a59-4c8e-9d7e-00000000000{i}" for i in (1, 2, 3))


def _entry(entry_id, parent, timestep, solution, reward, raw, summary, **metadata):
    failed = raw is None
    return {
        "id": entry_id,
        "parent_id": parent,
        "problem_id": "polyomino_packing",
        "timestep": timestep,
        "guidance": "" if failed else "Pack the largest pieces first along a skyline.",
        "execution_thinking": "",
        "solution": solution,
        "verifier_reward": reward,
        "verifier_raw_score": raw,
        "verifier_status": GUIDANCE_FORMAT_ERROR if failed else "valid",
        "verifier_message": "malformed guidance" if failed else "ok",
        "summary": summary,
        "reusable_idea": summary,
        "failure_mode": GUIDANCE_FORMAT_ERROR if failed else None,
        "metadata": metadata,
    }


def _node(node_id, parent, timestep, entry_id, value, visits, children, **metadata):
    return {
        "id": node_id,
        "problem_id": "polyomino_packing",
        "timestep": timestep,
        "entry_id": entry_id,
        "value": value,
        "raw_score": value,
        "visits": visits,
        "parent_id": parent,
        "children": children,
        "metadata": {"archive_candidate": True, "verifier_status": "valid", **metadata},
    }


def reference_archive_object() -> dict:
    """The fixture's content as plain JSON values, assembled independently of `harness`."""
    seed_summary = "Shelf packing, pieces sorted by area."
    entries = [
        _entry("e-seed", R1, 0, "int main(){}", 0.405, 40.5, seed_summary, bootstrap=True),
        _entry("e-seed-2", R2, 0, "int main(){}", 0.405, 40.5, seed_summary,
               bootstrap=True, replicated_seed_entry=True),
        _entry("e-c1", R1, 1, "int main(){return 1;}", 0.5225, 52.25, "Skyline packing.",
               group_uid="1:0", raw_model_summary="Skyline packing."),
        _entry("e-fail", R1, 1, "", 0.0, None, "No usable canonical summary was emitted.",
               group_uid="1:0", raw_model_summary=None),
        _entry("e-c2", R2, 1, "int main(){return 2;}", 0.61, 61.0,
               "Skyline packing with a \u2265 2-cell lookahead, caf\u00e9 style.",
               group_uid="1:1"),
        _entry("e-c3", R2, 1, "int main(){return 3;}", 0.44125, 44.125, "Row packing.",
               group_uid="1:1"),
    ]  # fmt: skip
    nodes = [
        _node(R1, None, 0, "e-seed", 40.5, 1, [C1], kind="root"),
        _node(R2, None, 0, "e-seed-2", 40.5, 1, [C2, C3], kind="root", replicated_seed_root=True),
        _node(C1, R1, 1, "e-c1", 52.25, 0, []),
        _node(C2, R2, 1, "e-c2", 61.0, 1, []),
        _node(C3, R2, 1, "e-c3", 44.125, 0, []),
    ]
    config = {
        "rollout_n": 2,
        "puct_c": 1.0,
        "max_buffer_size": 1000,
        "topk_children": 2,
        "puct_q_mode": "best_child",
        "discover_compat": True,
        "groups_per_batch": 2,
        "score_direction": "max",
    }
    return {
        "nodes": {n["id"]: n for n in nodes},
        "entries": {e["id"]: e for e in entries},
        "groups": {
            "1:0": {
                "selected_node_id": R1,
                "submitted": 2,
                "children": [C1],
                "finalized": True,
                "visible_timestep_exclusive": 1,
                "entry_ids": ["e-c1", "e-fail"],
            },
            "1:1": {
                "selected_node_id": R2,
                "submitted": 2,
                "children": [C2, C3],
                "finalized": True,
                "visible_timestep_exclusive": 1,
                "entry_ids": ["e-c2", "e-c3"],
            },
            "2:0": {
                "selected_node_id": C2,
                "submitted": 0,
                "children": [],
                "finalized": False,
                "visible_timestep_exclusive": 2,
            },
        },
        "best_node_id": C2,
        "config": config,
        "rollout_n": 2,
        "puct_c": 1.0,
        "puct_q_mode": "best_child",
        "discover_compat": True,
        "groups_per_batch": 2,
        "score_direction": "max",
        "puct_n": {R1: 2, R2: 2},
        "puct_m": {R1: 52.25, R2: 61.0},
        "puct_T": 4,
    }


def reference_writer(obj: dict) -> bytes:
    """How the reference implementation serialises its archive."""
    return json.dumps(obj, indent=2, sort_keys=True).encode()


def test_fixture_is_in_the_reference_layout():
    assert FIXTURE.read_bytes() == reference_writer(reference_archive_object())
    assert b"\\u2265" in FIXTURE.read_bytes()  # non-ASCII is escaped, as the reference does
    assert not FIXTURE.read_bytes().endswith(b"\n")


def test_reference_library_round_trips_byte_stable(tmp_path):
    archive = read_library_json(FIXTURE)
    assert library_json_bytes(archive) == FIXTURE.read_bytes()
    out = tmp_path / "library.json"
    write_library_json(archive, out)
    assert out.read_bytes() == FIXTURE.read_bytes()


def test_imported_reference_archive_continues_its_open_step():
    archive = read_library_json(FIXTURE)
    assert archive.select_parent(1, 0).id == C2  # the recorded group is honoured
    second = archive.select_parent(1, 1)
    assert second.id not in {C2, R2}  # C2's ancestors are blocked
    assert archive.nodes[C2].visits == 1  # no second visit for the recorded group


def test_our_own_archive_round_trips_byte_stable():
    config = ArchiveConfig(rollout_n=3, groups_per_batch=2, score_direction="min")
    archive = Archive.from_seed(config, make_seed(score=30.0))
    for step in range(3):
        for g, parent in enumerate(archive.select_parents(step)):
            for r in range(3):
                status = "valid" if r else GUIDANCE_FORMAT_ERROR
                entry = make_entry(parent.id, step, status=status, raw=float(10 + step + g + r))
                archive.submit(step, g, entry)
    data = library_json_bytes(archive)
    again = from_library_dict(json.loads(data))
    assert library_json_bytes(again) == data
    assert all(n.value < 0 for n in again.nodes.values())


def test_unknown_top_level_key_is_an_error_naming_it():
    obj = reference_archive_object() | {"lineage_cache": {}}
    with pytest.raises(RecordError, match="unknown key 'lineage_cache'"):
        from_library_dict(obj)


def test_unknown_key_in_a_nested_record_is_an_error_naming_it():
    obj = reference_archive_object()
    obj["entries"]["e-c1"]["score"] = 1.0
    with pytest.raises(RecordError, match="entry e-c1: unknown key 'score'"):
        from_library_dict(obj)
    obj = reference_archive_object()
    obj["groups"]["1:0"]["owner"] = "x"
    with pytest.raises(RecordError, match="group 1:0: unknown key 'owner'"):
        from_library_dict(obj)


def test_top_level_config_copy_must_agree_with_config():
    obj = reference_archive_object() | {"rollout_n": 16}
    with pytest.raises(RecordError, match="top-level rollout_n=16 disagrees"):
        from_library_dict(obj)


def test_a_record_stored_under_another_id_is_refused():
    obj = reference_archive_object()
    obj["nodes"]["wrong"] = obj["nodes"].pop(C3)
    with pytest.raises(RecordError, match="nodes\\['wrong'\\] holds id"):
        from_library_dict(obj)
