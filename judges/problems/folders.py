"""A problem folder stays inside itself: every file a package names is a regular file inside its
folder, and what is read from one is bounded (judges/README.md "Security model").

A package names files two ways: by convention (`config.yaml`, `statement.txt`,
`testdata/<k>.in`, `chk.cc`, `generated.txt`) and by a key of its config.yaml (`checker:`,
`interactor:`, `verifier:`, a GPU package's `reference:` and `cases:`). A key must name a
relative path without `..`; either way the path, once its links are resolved, must lie inside
the folder (resolved too, so a folder that is itself a link works). A link from one file of
the folder to another is followed; a link out, an absolute path, a `..` path or a file that
is not regular (a FIFO, a device) is a `ProblemError` naming the path and the fix, and the
package is not served. The statement is refused over `STATEMENT_LIMIT` bytes, a config file
over `CONFIG_LIMIT`. `read_config` and `read_statement` read a package's two texts by these
rules (config.yaml with its aliases bounded, `judges.problems.bounded_yaml`).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath
from typing import Any

from judges.problems import bounded_yaml

#: The largest statement.txt served or written into a task (FrontierCS's are a few KiB).
STATEMENT_LIMIT = 1 << 20
#: The largest config.yaml (or a GPU package's cases file) read.
CONFIG_LIMIT = 1 << 20


class ProblemError(ValueError):
    """A problem package is malformed; the message names the file, the key and the fix."""


def _size(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit >> 10} KiB"


def inside(directory: Path, path: Path) -> Path:
    """`path` with its links resolved, when that lies inside `directory` (resolved too);
    ProblemError otherwise. `path` need not exist."""
    root = directory.resolve()
    resolved = path.resolve()
    if resolved != root and root not in resolved.parents:
        raise ProblemError(
            f"{path}: leads outside the problem folder {directory} (to {resolved}); a problem "
            "folder must hold its own files: copy the file in instead of linking to it"
        )
    return resolved


def member(directory: Path, name: object, key: str, where: str) -> Path:
    """The file a config key (`checker:`, …) names: a relative path without `..`, inside
    `directory` once resolved (`inside`); ProblemError naming the key otherwise."""
    text = str(name)
    parts = PurePosixPath(text.replace("\\", "/")).parts
    if not text.strip() or text.startswith(("/", "\\", "~")) or ".." in parts or ":" in text:
        raise ProblemError(
            f"{where}: {key} {text!r} must name a file inside the problem folder, as a "
            "relative path without '..' (e.g. chk.cc)"
        )
    path = directory / text
    inside(directory, path)
    return path


def regular(directory: Path, path: Path, what: str) -> Path:
    """`path`, checked inside `directory` (`inside`) and, where it exists, a regular file."""
    resolved = inside(directory, path)
    if resolved.exists() and not resolved.is_file():
        raise ProblemError(f"{path}: the {what} is not a regular file; replace it with one")
    return path


def read_bounded(directory: Path, path: Path, limit: int, what: str) -> str:
    """The text of a file of the folder: inside it (`inside`), regular, at most `limit`
    bytes, UTF-8; opened without following a link and without blocking (a FIFO cannot
    hang the judge). ProblemError naming the path and the limit otherwise."""
    resolved = inside(directory, path)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
    try:
        descriptor = os.open(resolved, flags)
    except OSError as error:
        raise ProblemError(f"{path}: cannot read the {what}: {error.strerror}") from None
    with os.fdopen(descriptor, "rb") as file:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise ProblemError(f"{path}: the {what} is not a regular file; replace it with one")
        data = file.read(limit + 1)
    if len(data) > limit:
        raise ProblemError(
            f"{path}: the {what} is over {_size(limit)}; a problem's {what} is at most that"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ProblemError(f"{path}: the {what} is not UTF-8 ({error.reason})") from None


def read_config(directory: Path) -> tuple[dict[str, Any], Path]:
    """A package's `config.yaml` as a mapping, and its path; ProblemError naming what is wrong
    (also for a config.yaml outside the folder, over `CONFIG_LIMIT` bytes, or whose aliases
    expand without bound). The package's statement.txt, when there is one, is checked too
    (`read_statement`)."""
    config_path = directory / "config.yaml"
    if not config_path.is_file():
        raise ProblemError(f"{config_path}: missing; a FrontierCS problem needs config.yaml")
    text = read_bounded(directory, config_path, CONFIG_LIMIT, "config.yaml")
    try:
        config = bounded_yaml.load(text, str(config_path)) or {}
    except bounded_yaml.YamlRefused as error:
        raise ProblemError(str(error)) from None
    if not isinstance(config, dict):
        raise ProblemError(f"{config_path}: expected a mapping at the top level")
    read_statement(directory)
    return config, config_path


def read_statement(directory: Path) -> str | None:
    """The package's `statement.txt`, None when it has none; ProblemError when it leads
    outside the folder, is not a regular file or is over `STATEMENT_LIMIT` bytes."""
    path = directory / "statement.txt"
    if not os.path.lexists(path):
        return None
    return read_bounded(directory, path, STATEMENT_LIMIT, "statement")
