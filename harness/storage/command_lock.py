"""One command per state directory: the lock a command takes before it starts anything there.

`guidance-ttt run`, `rehearse` and `experiment` take an exclusive lock on their directory
(`<state>/guidance-run/command.lock` for a run, `<dir>/experiment.lock` for an experiment)
first, before any judge, `reef serve` or stand-in starts and before any file there is written;
a second command on a directory in use is refused in one line naming the holder's pid and
command. The lock is an `flock` on the open file: the kernel releases it when the holder
ends however it ends (SIGKILL included), so no stale lock is ever left to remove by hand. The
file holds the holder's pid and command for the refusal only; it is never trusted otherwise.

A command that takes the lock of a directory it already holds (the rehearsal's run inside
`rehearse`) takes it again without waiting: the lock is counted per process.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from harness.storage.atomic import open_nofollow
from harness.storage.run_files import RUN_DIR

#: A run's command lock, relative to its state directory.
RUN_LOCK = RUN_DIR / "command.lock"
#: An experiment directory's command lock.
EXPERIMENT_LOCK = Path("experiment.lock")
_HOLDER_BYTES = 4096

_held: dict[Path, int] = {}  # lock path -> how many blocks of this process hold it
_held_guard = threading.Lock()


class DirectoryInUse(RuntimeError):
    """Another command holds the directory's lock; the message is the one-line refusal."""


@contextlib.contextmanager
def holding(directory: Path, command: str, lock: Path = RUN_LOCK) -> Iterator[None]:
    """Hold the exclusive lock `directory/lock` (made, with its folders, when missing) for the
    block; `DirectoryInUse` at once, naming the holder, when another process holds it.
    `command` (e.g. `guidance-ttt rehearse`) names this command to a refused one."""
    directory = Path(os.path.abspath(directory))
    lock_path = directory / lock
    with _held_guard:
        if _held.get(lock_path):
            _held[lock_path] += 1
            again = True
        else:
            again = False
    if again:
        try:
            yield
        finally:
            with _held_guard:
                _held[lock_path] -= 1
        return
    fd = _take(directory, lock_path, command)
    with _held_guard:
        _held[lock_path] = 1
    try:
        yield
    finally:
        with _held_guard:
            del _held[lock_path]
        os.close(fd)  # releases the lock


def _take(directory: Path, lock_path: Path, command: str) -> int:
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = open_nofollow(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, _HOLDER_BYTES, 0).decode("utf-8", errors="replace").strip()
        os.close(fd)
        raise DirectoryInUse(
            f"{directory} is in use by {holder or 'another command'}: one command per "
            "directory; wait for it to end (or stop it), or name another directory"
        ) from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()} ({_command_line(command)})\n".encode(), 0)
    return fd


def _command_line(command: str) -> str:
    """`command` and this process's arguments after the subcommand's name, short enough for
    one line."""
    arguments = sys.argv[1:]
    name = command.split()[-1]
    arguments = arguments[arguments.index(name) + 1 :] if name in arguments else []
    line = shlex.join([*command.split(), *arguments])
    return line if len(line) <= 300 else line[:297] + "..."
