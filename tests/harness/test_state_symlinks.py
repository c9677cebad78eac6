"""No write goes through a symbolic link in a state directory (docs/archive.md, "Safety").

Each test builds a real state directory (committed steps, an in-flight journal, the event log,
resume-state.json) with the real store, puts a symlink where the run writes one kind of file,
and does what a resume does with that file. The write is refused with one error naming the
path, and the file the link points at is untouched (or, for a dangling link, not created).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.observe.events import EventLog
from harness.storage.atomic import (
    SymlinkRefusedError,
    append_durable_line,
    atomic_write_json,
    truncate_durable,
)
from harness.storage.resume_state import RESUME_STATE, ResumeState
from harness.storage.run_files import COMMITTED_LIBRARY, EVENT_LOG
from harness.storage.store import LOCK, ArchiveStore
from tests.state_fixture import STORE_DIR, build_state_dir

OUTSIDE_TEXT = "root:x:0:0:root:/root:/bin/bash\n"


@pytest.fixture
def state(tmp_path: Path) -> Path:
    build_state_dir(tmp_path / "state", committed_steps=1, in_flight_slots=2)
    return tmp_path / "state"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    target = tmp_path / "outside" / "passwd"
    target.parent.mkdir()
    target.write_text(OUTSIDE_TEXT)
    return target


def _link(path: Path, target: Path) -> None:
    if path.exists() or path.is_symlink():
        path.unlink()
    path.symlink_to(target)


def _refused(excinfo: pytest.ExceptionInfo[BaseException], path: Path) -> None:
    message = str(excinfo.value)
    assert str(path) in message and "symbolic link" in message
    assert "\n" not in message


def test_the_event_log_is_not_appended_through_a_link(state: Path, outside: Path) -> None:
    log = state / EVENT_LOG
    _link(log, outside)
    with pytest.raises(SymlinkRefusedError) as excinfo:
        EventLog(log)
    _refused(excinfo, log)
    assert outside.read_text() == OUTSIDE_TEXT


def test_a_dangling_writer_lock_link_creates_nothing(state: Path, tmp_path: Path) -> None:
    lock = state / STORE_DIR / LOCK
    target = tmp_path / "outside-lock"
    _link(lock, target)
    with pytest.raises(SymlinkRefusedError) as excinfo:
        ArchiveStore.open(state / STORE_DIR)
    _refused(excinfo, lock)
    assert not target.exists()


def test_the_in_flight_journal_is_not_cut_or_appended_through_a_link(
    state: Path, outside: Path
) -> None:
    journals = sorted((state / STORE_DIR).glob("step-*.jsonl"))
    journal = journals[-1]
    _link(journal, outside)
    with pytest.raises(SymlinkRefusedError) as excinfo:
        append_durable_line(journal, b'{"x": 1}')
    _refused(excinfo, journal)
    with pytest.raises(SymlinkRefusedError):
        truncate_durable(journal, 0)
    assert outside.read_text() == OUTSIDE_TEXT


@pytest.mark.parametrize("name", [RESUME_STATE, COMMITTED_LIBRARY], ids=["resume", "library"])
def test_an_atomic_replace_does_not_replace_a_link(state: Path, outside: Path, name: Path) -> None:
    path = state / name
    _link(path, outside)
    with pytest.raises(SymlinkRefusedError) as excinfo:
        atomic_write_json(path, {"x": 1})
    _refused(excinfo, path)
    assert path.is_symlink() and outside.read_text() == OUTSIDE_TEXT
    assert not list(path.parent.glob(".*.tmp"))


def test_resume_state_save_refuses_a_link(state: Path, outside: Path) -> None:
    path = state / RESUME_STATE
    saved = ResumeState.load(path)
    assert saved is not None
    _link(path, outside)
    with pytest.raises(SymlinkRefusedError):
        saved.save(path)
    assert outside.read_text() == OUTSIDE_TEXT


def test_a_linked_run_directory_is_refused(state: Path, tmp_path: Path) -> None:
    run_dir = state / EVENT_LOG.parent
    elsewhere = tmp_path / "elsewhere"
    os.rename(run_dir, elsewhere)
    run_dir.symlink_to(elsewhere, target_is_directory=True)
    before = (elsewhere / EVENT_LOG.name).read_bytes()
    with pytest.raises(SymlinkRefusedError) as excinfo:
        EventLog(state / EVENT_LOG)
    _refused(excinfo, run_dir)
    with pytest.raises(SymlinkRefusedError) as excinfo:
        ArchiveStore.open(state / STORE_DIR)
    _refused(excinfo, run_dir)
    assert (elsewhere / EVENT_LOG.name).read_bytes() == before


def test_regular_files_still_work(state: Path) -> None:
    store = ArchiveStore.open(state / STORE_DIR)
    assert store.load().archive is not None
    EventLog(state / EVENT_LOG).emit("probe", ok=True)
    assert b'"probe"' in (state / EVENT_LOG).read_bytes()
