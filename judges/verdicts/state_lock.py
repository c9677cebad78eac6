"""One judge per state directory: an exclusive lock taken before anything there is touched.

`hold_state_dir` opens `<state>/judge.lock` (made, with the directory, when missing; never
through a symbolic link) and takes an exclusive `flock` on it without waiting. A second judge on
a directory in use is refused in one line naming the holder's pid, before it reads a submission
or writes a file there; two judges on one directory would judge each other's unfinished
submissions again and race on the same sids. The kernel releases the lock when its holder ends,
however it ends (SIGKILL included), so no stale lock is ever left to remove by hand. The file
holds the holder's pid for the refusal only; it is never trusted otherwise.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

from judges.verdicts.nofollow import refuse_links

LOCK_NAME = "judge.lock"
_HOLDER_BYTES = 64


class StateDirInUse(OSError):
    """Another judge holds the state directory; the message is the one-line refusal."""

    def __str__(self) -> str:
        return self.strerror or ""


class StateLock:
    """The held lock of one state directory; `release` (or the process's end) gives it up."""

    def __init__(self, fd: int, path: Path) -> None:
        self.fd = fd
        self.path = path

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        self.release()


def hold_state_dir(state_dir: Path) -> StateLock:
    """Take the judge's lock on `state_dir`; `StateDirInUse` at once, naming the holder's
    pid, when another process holds it; `SymlinkRefused` when the directory or the lock file
    is a symbolic link."""
    state_dir = Path(os.path.abspath(state_dir))
    path = state_dir / LOCK_NAME
    refuse_links(state_dir, path)
    state_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, _HOLDER_BYTES, 0).decode("ascii", "replace").strip() or "unknown"
        os.close(fd)
        raise StateDirInUse(
            errno.EBUSY,
            f"state directory {state_dir} is in use by another judge (pid {holder}); stop it "
            "or start this one with another --state-dir",
        ) from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return StateLock(fd, path)
