"""Writing under the judge's state directory without following a symbolic link.

The judge's state directory (submissions, results, the verdict cache) is its own: a link placed
there would send its writes to a file elsewhere. `refuse_links` raises `SymlinkRefused` (an
`OSError`, so the service's start-up reports it in one line) naming the first link among the
paths; `create_nofollow` opens a file for writing with `O_NOFOLLOW`.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path


class SymlinkRefused(OSError):
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
