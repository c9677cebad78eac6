"""The descriptors of one sandboxed run: its stdin, its stdout file and the runner's report pipe.

The judge's own files are never mounted into the sandbox: input arrives on stdin from a sealed
in-memory file (a copy the program cannot write to, even by reopening /proc/self/fd/0) and
output leaves through descriptors to files opened here, by the judge. An interactive run passes
pipe descriptors instead; whoever receives one here owns it and closes it with the file.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import BinaryIO


def close_descriptors(*streams: object) -> None:
    """Close the pipe descriptors among `streams` (the sandbox owns them even when a run fails)."""
    for stream in streams:
        if isinstance(stream, int) and not isinstance(stream, bool):
            with contextlib.suppress(OSError):
                os.close(stream)


def open_output(target: Path | int) -> BinaryIO:
    """The file a program writes its stdout to, or a pipe descriptor (closed with the file)."""
    if isinstance(target, int):
        return os.fdopen(target, "wb")
    return open(target, "wb")


def sealed_input(data: bytes | Path | int | None) -> BinaryIO:
    """A read-only view of `data` (or a file's content): a memfd sealed against writes and
    resizing, or /dev/null; a pipe descriptor is used as given (closed with the file)."""
    if isinstance(data, int):
        return os.fdopen(data, "rb")
    if data is None:
        return open(os.devnull, "rb")
    if isinstance(data, Path):
        data = data.read_bytes()
    fd = os.memfd_create("judge-input", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    view = os.fdopen(fd, "w+b")
    view.write(data)
    view.flush()
    seals = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    view.seek(0)
    return view


def drain(fd: int) -> str:
    """Read a pipe to its end (all writers are gone once bwrap has exited) and close it."""
    chunks = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace")
