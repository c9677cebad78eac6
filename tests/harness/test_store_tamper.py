"""Tamper evidence of the real store: every record carries its own checksum, every load checks it.

Each test writes a real store with the store's own API, alters one byte-level detail of one
record on disk (one digit of a score, one character of a string, a removed checksum) in the
in-flight journal, a committed segment or the head, and checks that opening, loading and the
lock-free readers all refuse, naming the file and the line.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from archive_builders import make_seed

from harness.library import Archive
from harness.state import VALID, ArchiveConfig, LibraryEntry
from harness.storage.store import (
    BASE_SEGMENT,
    HEAD,
    ArchiveStore,
    StoreError,
    journal_name,
    read_committed,
    read_in_flight,
)

CONFIG = ArchiveConfig(rollout_n=2, groups_per_batch=1)


def entry(archive: Archive, step: int, rollout: int) -> LibraryEntry:
    """A valid rollout of slot (0, rollout) with raw score 47.04 and a recognisable string."""
    return LibraryEntry(
        id=f"entry-{step}-{rollout}",
        parent_id=archive.groups[f"{step + 1}:0"].selected_node_id,
        problem_id="polyomino_packing",
        timestep=step + 1,
        guidance=f"pack the tall pieces first ({step}/{rollout})",
        execution_thinking="",
        solution=f"int main() {{ return {step * 10 + rollout}; }}",
        verifier_reward=0.4704,
        verifier_raw_score=47.04 + rollout,
        verifier_status=VALID,
        verifier_message="ok",
        summary="s",
        reusable_idea="s",
        failure_mode=None,
        metadata={"agent_record_id": f"receipt-{step}-{rollout}"},
    )


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    """A store with step 0 committed and step 1 half journaled (one of its two slots)."""
    root = tmp_path / "archive"
    ArchiveStore.create(root, Archive.from_seed(CONFIG, make_seed())).close()
    with ArchiveStore.open(root, CONFIG) as store:
        archive = store.load().archive
        archive.select_parents(0)
        for rollout in range(2):
            store.record_rollout(archive, 0, 0, rollout, entry(archive, 0, rollout))
        store.commit_step(archive, 0)
        archive.select_parents(1)
        store.record_rollout(archive, 1, 0, 0, entry(archive, 1, 0))
    return root


def alter(path: Path, old: bytes, new: bytes) -> int:
    """Replace the one occurrence of `old` in `path` by `new` (same length); return the line
    number (1-based) it was on."""
    data = path.read_bytes()
    assert data.count(old) == 1, (old, data.count(old))
    assert len(old) == len(new)
    at = data.index(old)
    path.write_bytes(data.replace(old, new))
    return data[:at].count(b"\n") + 1


def assert_refused(root: Path, where: str) -> None:
    """Every way to read the store refuses, naming `where` (file:line)."""
    refused = pytest.raises(StoreError, match=r"checksum")
    with refused as opened, ArchiveStore.open(root, CONFIG) as store:
        store.load()
    assert where in str(opened.value)
    if journal_name(1) not in where:  # the committed state is read by the lock-free readers too
        with pytest.raises(StoreError, match=where):
            read_committed(root)
    else:
        with pytest.raises(StoreError, match=where):
            read_in_flight(root, 1)


def test_an_untouched_store_loads_with_every_checksum_verified(store_dir: Path) -> None:
    with ArchiveStore.open(store_dir, CONFIG) as store:
        restored = store.load()
    assert restored.committed_step == 0
    assert [r.entry.verifier_raw_score for r in restored.in_flight] == [47.04]
    assert read_committed(store_dir)[0].entries["entry-0-1"].verifier_raw_score == 48.04


def test_one_digit_of_a_score_in_the_in_flight_journal_is_refused_naming_file_and_line(
    store_dir: Path,
) -> None:
    path = store_dir / journal_name(1)
    line = alter(path, b"47.04", b"97.04")
    assert_refused(store_dir, f"{path}:{line}")


def test_one_digit_of_a_score_in_a_committed_segment_is_refused_naming_file_and_line(
    store_dir: Path,
) -> None:
    path = store_dir / journal_name(0)
    line = alter(path, b'"verifier_raw_score":47.04', b'"verifier_raw_score":97.04')
    assert line == 1
    assert_refused(store_dir, f"{path}:{line}")


def test_one_character_of_a_string_in_the_in_flight_journal_is_refused(store_dir: Path) -> None:
    path = store_dir / journal_name(1)
    line = alter(path, b"tall pieces first (1/0)", b"wide pieces first (1/0)")
    assert_refused(store_dir, f"{path}:{line}")


def test_one_character_of_a_string_in_a_committed_segment_is_refused(store_dir: Path) -> None:
    path = store_dir / journal_name(0)
    line = alter(path, b"receipt-0-1", b"receipt-0-7")
    assert line == 2
    assert_refused(store_dir, f"{path}:{line}")


def test_a_changed_seed_entry_in_the_base_segment_is_refused(store_dir: Path) -> None:
    path = store_dir / BASE_SEGMENT
    old = b'right.","reusable'
    line = alter(path, old, old.replace(b".", b"!"))
    assert_refused(store_dir, f"{path}:{line}")


def test_a_changed_head_is_refused_naming_the_head(store_dir: Path) -> None:
    path = store_dir / HEAD
    alter(path, b'"committed_step":0', b'"committed_step":1')
    assert_refused(store_dir, f"{path}:1")


def test_a_record_whose_checksum_was_removed_is_refused(store_dir: Path) -> None:
    path = store_dir / journal_name(1)
    data = path.read_bytes()
    cut = data.rindex(b',"sha256":"')
    path.write_bytes(data[:cut] + b"}\n")
    refused = pytest.raises(StoreError, match=rf"{path}:1: the record carries no checksum")
    with refused, ArchiveStore.open(store_dir, CONFIG) as store:
        store.load()


def test_a_torn_last_line_is_cut_off_as_a_crash_not_refused_as_tampering(store_dir: Path) -> None:
    # A torn (unterminated) last line is a crash mid-append, not tampering: it is cut off.
    path = store_dir / journal_name(1)
    with open(path, "ab") as handle:
        handle.write(b'{"step":1,"group":0,"rollout":1,"entry":{"id":"ha')
    with ArchiveStore.open(store_dir, CONFIG) as store:
        restored = store.load()
    assert [(r.group, r.rollout) for r in restored.in_flight] == [(0, 0)]
    assert path.read_bytes().endswith(b"\n")
