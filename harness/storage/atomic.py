"""Crash-safe file writes: atomic replace and durable append.

`atomic_write_bytes` writes a temp file in the target's directory, fsyncs it, renames it over
the target and fsyncs the directory, so a reader (or a restart after a crash or power loss)
sees either the old file or the new one, never a mix. `append_durable_line` appends one
newline-terminated record and fsyncs it before returning (`harness.storage.state_files` reads such a
file back safely and ignores a torn final line). Every write is counted in `METER` so benchmarks can
report the bytes that actually reached the file system.

Nothing here writes through a symbolic link: a file opened for appending, truncating or locking
is opened with `O_NOFOLLOW`, an atomic replace refuses a link in the target's place, and a
linked parent directory is refused too (`SymlinkRefusedError`, naming the path). A state
directory is the run's own; a link inside it would send the run's writes somewhere else.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TEMP_SUFFIX = ".tmp"


class SymlinkRefusedError(OSError):
    """A state file, or the directory holding it, is a symbolic link: nothing is written."""

    def __init__(self, path: Path) -> None:
        super().__init__(
            errno.ELOOP,
            f"{path} is a symbolic link; refusing to write through it (remove the link: a state "
            "directory holds only the run's own files)",
        )
        self.path = Path(path)

    def __str__(self) -> str:
        return self.strerror or ""


class DiskFullError(OSError):
    """A state file could not be written for lack of space (or quota); nothing partial is left."""

    def __init__(self, path: Path, cause: OSError) -> None:
        try:
            free = shutil.disk_usage(Path(path).parent).free
            room = f"{free / 2**20:.1f} MiB free there"
        except OSError:
            room = "free space unknown"
        super().__init__(
            cause.errno, f"no space left writing {path} ({room}): free some space, then resume"
        )
        self.path = Path(path)

    def __str__(self) -> str:
        return self.strerror or ""


_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})


def refuse_linked_parent(path: Path) -> None:
    """Raise `SymlinkRefusedError` when the directory holding `path` is a symbolic link."""
    parent = Path(path).parent
    if parent.is_symlink():
        raise SymlinkRefusedError(parent)


def open_nofollow(path: Path, flags: int, mode: int = 0o644) -> int:
    """`os.open` that never follows a symbolic link at `path` (dangling or not) or in place of
    its directory; such a link raises `SymlinkRefusedError` naming it."""
    refuse_linked_parent(path)
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP and os.path.islink(path):
            raise SymlinkRefusedError(Path(path)) from exc
        raise


@dataclass
class WriteMeter:
    """Counts bytes written, fsync calls and the seconds spent in both, for every write made
    through this module (process-wide; used by benchmarks and tests)."""

    bytes_written: int = 0
    fsyncs: int = 0
    seconds: float = 0.0

    def reset(self) -> None:
        """Start counting from zero."""
        self.bytes_written = 0
        self.fsyncs = 0
        self.seconds = 0.0


METER = WriteMeter()


def _write_all(fd: int, data: bytes) -> None:
    start = time.perf_counter()
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
    METER.bytes_written += len(data)
    METER.seconds += time.perf_counter() - start


def _fsync(fd: int) -> None:
    start = time.perf_counter()
    os.fsync(fd)
    METER.fsyncs += 1
    METER.seconds += time.perf_counter() - start


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (new, renamed or removed files) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _fsync(fd)
    finally:
        os.close(fd)


def temp_path_for(path: Path) -> Path:
    """A unique hidden temp name beside `path` (same directory, so the rename is atomic)."""
    return path.with_name(f".{path.name}.{uuid.uuid4().hex}{TEMP_SUFFIX}")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace `path` with `data` atomically and durably (temp file in the same directory, fsync,
    rename, fsync the directory). On any error the target is untouched and the temp file removed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink():
        raise SymlinkRefusedError(path)
    temp = temp_path_for(path)
    fd = open_nofollow(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        try:
            _write_all(fd, data)
            _fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
        if isinstance(exc, OSError) and exc.errno in _NO_SPACE:
            raise DiskFullError(path, exc) from exc
        raise
    fsync_dir(path.parent)


def atomic_write_json(path: Path, value: Any) -> None:
    """Atomically write `value` as pretty, key-sorted JSON with a trailing newline. NaN and
    infinities are refused (they are not JSON), so a bad number fails before anything is written."""
    text = json.dumps(value, indent=2, sort_keys=True, allow_nan=False) + "\n"
    atomic_write_bytes(path, text.encode("utf-8"))


def append_durable_line(path: Path, line: bytes) -> int:
    """Append one record (`line` must not contain a newline; one is added) with a single write,
    fsync it, and return the file size after the append. A newly created file's directory entry
    is fsynced too, so the record survives a crash once this returns. A write that fails (a full
    disk: `DiskFullError`) leaves the file as it was."""
    if b"\n" in line:
        raise ValueError("a journal line must not contain a newline")
    path = Path(path)
    created = not os.path.lexists(path)
    fd = open_nofollow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        before = os.fstat(fd).st_size
        try:
            _write_all(fd, line + b"\n")
            _fsync(fd)
        except OSError as exc:
            # Cut what part of the line got in, so the next append does not merge with it.
            with contextlib.suppress(OSError):
                os.ftruncate(fd, before)
            if exc.errno in _NO_SPACE:
                raise DiskFullError(path, exc) from exc
            raise
        size = os.fstat(fd).st_size
    finally:
        os.close(fd)
    if created:
        fsync_dir(path.parent)
    return size


def truncate_durable(path: Path, size: int) -> None:
    """Cut `path` to `size` bytes and fsync it (drops a torn or uncommitted tail)."""
    fd = open_nofollow(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, size)
        _fsync(fd)
    finally:
        os.close(fd)


def remove_stale_temps(directory: Path) -> list[Path]:
    """Delete temp files left by an interrupted `atomic_write_bytes` in `directory` (they were
    never renamed, so nothing refers to them) and return what was removed."""
    stale = [p for p in Path(directory).glob(f".*{TEMP_SUFFIX}") if p.is_file()]
    for path in stale:
        path.unlink()
    return stale
