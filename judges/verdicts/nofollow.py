"""Reading and writing under the judge's state directory without following a symbolic link.

The judge's state directory (submissions, results, generated suites, compiled programs, the
verdict cache) is its own: a link placed there would send its writes to a file elsewhere, serve
another file as a result or compile another file as a source; a FIFO or device in a file's
place would block the reader. `refuse_links` raises `SymlinkRefused` (an `OSError`, so the
service's start-up reports it in one line) naming the first link among the paths,
`refuse_links_below` the first link on the way from a root to a path; `create_nofollow` opens a
file for writing with `O_NOFOLLOW`; `read_regular` reads a regular file only (`O_NOFOLLOW`,
`O_NONBLOCK`, then a type check: `NotRegular` otherwise); `refuse_unsafe_tree` checks a whole
folder. Both refusals are `UnsafePath`.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


class UnsafePath(OSError):
    """A path under the state directory is a link or not a regular file: not used."""


class NotRegular(UnsafePath):
    """A file the judge reads is a FIFO, device, socket or folder: it is not read."""

    def __init__(self, path: Path, mode: int) -> None:
        kind = next(
            (name for test, name in _KINDS if test(mode)), f"not a regular file (mode {mode:o})"
        )
        super().__init__(
            errno.EINVAL, f"{path} is {kind}, not a regular file; the judge does not read it"
        )

    def __str__(self) -> str:
        return self.strerror or ""


_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
)


class SymlinkRefused(UnsafePath):
    """A path the judge writes is a symbolic link: nothing is written."""

    def __init__(self, path: Path) -> None:
        super().__init__(
            errno.ELOOP,
            f"{path} is a symbolic link; the judge does not write through it (remove the link)",
        )

    def __str__(self) -> str:
        return self.strerror or ""


def refuse_links(*paths: Path) -> None:
    """Raise `SymlinkRefused` for the first of `paths` that is a symbolic link."""
    for path in paths:
        if Path(path).is_symlink():
            raise SymlinkRefused(Path(path))


def refuse_links_below(root: Path, path: Path) -> None:
    """Raise `SymlinkRefused` for the first link among the folders and file from `root`
    (itself not checked) down to `path`, which lies under it."""
    current = Path(root)
    for part in Path(path).relative_to(root).parts:
        current = current / part
        if current.is_symlink():
            raise SymlinkRefused(current)


def read_regular(path: Path, root: Path | None = None) -> bytes:
    """The bytes of the regular file `path`, never through a link (at `path` or, given `root`,
    on the way from it) and never blocking on a FIFO or device: `SymlinkRefused` or
    `NotRegular` instead; FileNotFoundError when there is nothing."""
    if root is not None:
        refuse_links_below(root, Path(path).parent)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise SymlinkRefused(Path(path)) from error
        raise
    with os.fdopen(fd, "rb") as file:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegular(Path(path), mode)
        return file.read()


def is_regular(path: Path) -> bool:
    """True when `path` itself (not what a link there names) is a regular file."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return False


def refuse_unsafe_tree(root: Path) -> None:
    """Raise `SymlinkRefused` or `NotRegular` for the first link, or file that is neither a
    folder nor a regular file, anywhere under `root` (which must not be a link itself)."""
    refuse_links(root)
    for folder, names, files in os.walk(root, followlinks=False):
        for name in (*names, *files):
            path = Path(folder) / name
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                raise SymlinkRefused(path)
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                raise NotRegular(path, mode)


def create_nofollow(path: Path, mode: int = 0o644) -> int:
    """A descriptor of `path` opened for writing (created or truncated), never through a link at
    `path` or in place of its directory."""
    refuse_links(Path(path).parent, path)
    try:
        return os.open(
            path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, mode
        )
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise SymlinkRefused(Path(path)) from error
        raise
