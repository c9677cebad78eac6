"""A disk that fills mid-step (docs/archive.md, "Why a reader never sees a torn state").

The state directory lives on a real, small tmpfs (mounted for the test; skipped where this
process may not mount one), filled with a real file until the kernel answers ENOSPC. A journal
append that does not fit raises one `DiskFullError` naming the file and the free space, and
leaves both the journal and the in-memory archive as they were, so another rollout whose line
still fits is journaled (its work is kept) and the step resumes from the journal.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.library import Archive
from harness.storage.atomic import DiskFullError
from harness.storage.store import ArchiveStore, journal_name
from tests.state_fixture import STORE_DIR, _rollout, build_state_dir


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "fs"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(directory: Path, leave: int) -> Path:
    """Fill the file system of `directory` up to `leave` bytes (0: until ENOSPC)."""
    filler = directory / "filler"
    with filler.open("wb") as handle:
        chunk = b"\0" * 4096
        while True:
            free = os.statvfs(directory).f_bavail * os.statvfs(directory).f_frsize
            if free <= leave:
                break
            try:
                handle.write(chunk if free - leave >= 4096 else b"\0" * (free - leave))
                handle.flush()
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
    return filler


def _larger(entry, size: int = 32_768):
    """The same rollout with a program of about `size` bytes."""
    return entry.__class__.from_dict({**entry.to_dict(), "solution": "// x\n" * (size // 5)})


def _in_flight(state: Path) -> tuple[ArchiveStore, Archive, int, list]:
    store = ArchiveStore.open(state / STORE_DIR)
    restored = store.load()
    archive, step = restored.archive, restored.committed_step + 1
    parents = archive.select_parents(step)
    rng = random.Random(3)
    entries = []
    for group, parent in enumerate(parents):
        for rollout in range(archive.config.rollout_n):
            parent_entry = archive.entry_of(parent.id)
            entry, _, _ = _rollout(
                rng, archive, step, group, rollout, parent_entry, parent.id, (1, 2)
            )
            entries.append((group, rollout, entry))
    return store, archive, step, entries


def test_a_full_disk_keeps_the_journal_and_the_archive_as_they_were(small_fs: Path) -> None:
    state = small_fs / "state"
    build_state_dir(state, committed_steps=1, in_flight_slots=0)
    store, archive, step, entries = _in_flight(state)
    journal = state / STORE_DIR / journal_name(step)
    group, rollout, first = entries[0]
    store.record_rollout(archive, step, group, rollout, first)
    size, submitted = journal.stat().st_size, archive.puct_T
    filler = _fill(small_fs, leave=0)

    group, rollout, second = entries[1]
    second = _larger(second)  # more than the page the journal's last line left room in
    with pytest.raises(DiskFullError) as excinfo:
        store.record_rollout(archive, step, group, rollout, second)
    message = str(excinfo.value)
    assert str(journal) in message and "MiB free" in message and "\n" not in message
    assert journal.stat().st_size == size and archive.puct_T == submitted

    filler.unlink()  # space comes back: the same rollout goes in, nothing is refused
    store.record_rollout(archive, step, group, rollout, second)
    store.close()
    reopened = ArchiveStore.open(state / STORE_DIR)
    with contextlib.closing(reopened):
        again = reopened.load()
    assert [r.entry.id for r in again.in_flight] == [first.id, second.id]


def test_a_rollout_that_still_fits_is_kept_after_one_that_did_not(small_fs: Path) -> None:
    state = small_fs / "state"
    build_state_dir(state, committed_steps=1, in_flight_slots=0)
    store, archive, step, entries = _in_flight(state)
    (g0, r0, big), (g1, r1, small) = entries[0], entries[1]
    big = _larger(big, 300_000)
    _fill(small_fs, leave=64 * 1024)
    with pytest.raises(DiskFullError):
        store.record_rollout(archive, step, g0, r0, big)
    store.record_rollout(archive, step, g1, r1, small)  # before: "the archive has N submitted…"
    store.close()
    reopened = ArchiveStore.open(state / STORE_DIR)
    with contextlib.closing(reopened):
        again = reopened.load()
    assert [r.entry.id for r in again.in_flight] == [small.id]
    assert again.missing_slots()[0] == (g0, r0)
