"""One safe way to read the files of a state directory, whatever someone left in their place.

Every reader of run state (the store, the resume record, the event log, the committed library,
the CLI) goes through this module, so a damaged state directory ends in one `StateFileError`
naming the file (and line) instead of a hang, a traceback or unbounded memory:

- the file is opened non-blocking and checked with `fstat` on the open descriptor before a
  byte is read: a FIFO, socket, device or directory is refused at once (opening a FIFO
  non-blocking for reading never waits for a writer), and a symlink loop is named;
- whole-file reads are bounded (`max_bytes`); line reads stream in chunks and refuse a line
  longer than `max_line`, so a 1 GiB file of zeros costs one chunk and one line of memory;
- text must be UTF-8 and a record must be a JSON object; the error names file and line.

A missing file is not an error here: readers that accept absence call `exists` first (it does
not follow into a FIFO) and everything else gets `StateFileError` "is missing".
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: Largest single-record state file read whole (resume state, head, committed library).
MAX_FILE_BYTES = 1 << 30
#: Longest line of a line-oriented state file (journal, events): far above any real record.
MAX_LINE_BYTES = 64 << 20
CHUNK_BYTES = 1 << 20


class StateFileError(RuntimeError):
    """A state file cannot be read as what it should be; the message names file (and line)."""


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def exists(path: Path) -> bool:
    """Whether anything (a file, a FIFO, a dangling or looping symlink) is at `path`: a reader
    that accepts absence must still refuse what is there when it is not a regular file."""
    return os.path.lexists(path)


def open_regular(path: Path) -> int:
    """Open `path` read-only without blocking and return the descriptor, after checking on the
    descriptor itself that it is a regular file. Raises `StateFileError` naming the file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError as exc:
        raise StateFileError(f"{path} is missing") from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StateFileError(f"{path} is a symlink loop, not a state file") from exc
        raise StateFileError(f"{path} cannot be opened: {exc.strerror}") from exc
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise StateFileError(f"{path} is {_kind(mode)}, not a regular state file")
    return fd


def read_bytes(path: Path, limit: int | None = None, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of the regular file `path` (its first `limit` bytes, if given). A file larger
    than `max_bytes` (with no `limit`) is refused rather than read."""
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        if limit is None and size > max_bytes:
            raise StateFileError(
                f"{path} is {size} bytes, more than the {max_bytes} a state file of its kind "
                "can hold; it is damaged or not a state file"
            )
        want = size if limit is None else min(limit, size)
        chunks, got = [], 0
        while got < want:
            chunk = os.read(fd, min(CHUNK_BYTES, want - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def decode_object(data: bytes, where: str) -> dict[str, Any]:
    """`data` as a JSON object; anything else (bad UTF-8, bad JSON, another JSON value) raises
    `StateFileError` naming `where` (a file, or `file:line`)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StateFileError(f"{where}: not UTF-8 (byte {exc.start})") from exc
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise StateFileError(f"{where}: not valid JSON ({exc})") from exc
    except RecursionError as exc:
        raise StateFileError(f"{where}: JSON nested too deeply") from exc
    if not isinstance(value, dict):
        raise StateFileError(f"{where}: a JSON {type(value).__name__}, expected a JSON object")
    return value


def read_json_object(path: Path, max_bytes: int = MAX_FILE_BYTES) -> dict[str, Any]:
    """The JSON object held by the regular file `path`, read safely (see the module doc)."""
    return decode_object(read_bytes(path, max_bytes=max_bytes), str(path))


def iter_lines(
    path: Path, max_line: int = MAX_LINE_BYTES, limit: int | None = None
) -> Iterator[tuple[int, bytes]]:
    """Stream the newline-terminated lines of `path` (within its first `limit` bytes) as
    `(line number, bytes without the newline)`. A final line without its newline is a torn
    append and is not yielded; a line longer than `max_line` raises `StateFileError` naming
    file and line, after reading at most one chunk past the cap."""
    fd = open_regular(path)
    try:
        number, pending, left = 1, bytearray(), limit
        while left is None or left > 0:
            chunk = os.read(fd, CHUNK_BYTES if left is None else min(CHUNK_BYTES, left))
            if not chunk:
                return
            if left is not None:
                left -= len(chunk)
            searched = len(pending)
            pending += chunk
            start = 0
            while (cut := pending.find(b"\n", max(start, searched))) >= 0:
                if cut - start > max_line:
                    break
                yield number, bytes(pending[start:cut])
                number, start = number + 1, cut + 1
            del pending[:start]
            if len(pending) > max_line:
                raise StateFileError(
                    f"{path}:{number}: a line longer than {max_line} bytes; the file is "
                    "damaged or not a state file"
                )
    finally:
        os.close(fd)


def complete_lines(path: Path, limit: int | None = None) -> tuple[list[bytes], int]:
    """The newline-terminated lines of `path` (within its first `limit` bytes) and the byte
    length they span; a torn final line is left out."""
    lines = [line for _, line in iter_lines(path, limit=limit)]
    return lines, sum(len(line) + 1 for line in lines)
