"""Whose process listens on a loopback port: a run talks only to the Reef it started.

A `/healthz` answer says that *a* Reef is up, not that it is this run's: with two runs on one
host, one run's `reef serve` can die with "address already in use" while the other's answers
its health check, and the guidance calls and reports would then land in the other run's
records. So a run confirms, before its episode and on every start, that the socket listening on
its port belongs to the `reef serve` it spawned (that process or one of its descendants, from
`/proc/net/tcp*` and the processes' descriptors), and before it starts anything it refuses a
port another process already listens on, naming the port and that process.

    python -m harness.adapters.reef.ownership URL PID   # exit 0: URL's port is PID's; 1: not

Linux only (`/proc`); the listener's socket inode is matched against `/proc/<pid>/fd`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

PROC = Path("/proc")
_LISTEN = "0A"


@dataclass(frozen=True)
class Listener:
    """A listening TCP socket: its inode and the uid that owns it."""

    inode: int
    uid: int


def listeners(port: int) -> list[Listener]:
    """The listening TCP sockets (IPv4 and IPv6, any address) on `port`."""
    found = []
    for table in ("tcp", "tcp6"):
        try:
            lines = (PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _LISTEN:
                continue
            if int(fields[1].rsplit(":", 1)[1], 16) == port:
                found.append(Listener(inode=int(fields[9]), uid=int(fields[7])))
    return found


def _socket_inodes(pid: int) -> set[int]:
    inodes = set()
    try:
        descriptors = list((PROC / str(pid) / "fd").iterdir())
    except OSError:
        return inodes
    for fd in descriptors:
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def _parents() -> dict[int, int]:
    parents = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return parents


def process_tree(root: int) -> set[int]:
    """`root` and every living descendant of it."""
    children: dict[int, list[int]] = {}
    for pid, parent in _parents().items():
        children.setdefault(parent, []).append(pid)
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in tree:
            tree.add(pid)
            todo.extend(children.get(pid, []))
    return tree


def _holders(inodes: set[int], pids: Iterable[int]) -> list[int]:
    return [pid for pid in pids if _socket_inodes(pid) & inodes]


def owned_by(port: int, root: int) -> bool:
    """Whether a socket listens on `port` and every one that does belongs to `root`'s tree."""
    found = listeners(port)
    if not found:
        return False
    inodes = {listener.inode for listener in found}
    held: set[int] = set()
    for pid in process_tree(root):
        held |= _socket_inodes(pid) & inodes
    return held == inodes


def describe_owner(port: int) -> str | None:
    """Who listens on `port` — `pid N (command)`, or the uid when the process is another
    user's — or None when nothing does."""
    found = listeners(port)
    if not found:
        return None
    inodes = {listener.inode for listener in found}
    pids = sorted(int(p.name) for p in PROC.iterdir() if p.name.isdigit())
    for pid in _holders(inodes, pids):
        try:
            raw = (PROC / str(pid) / "cmdline").read_bytes()
        except OSError:
            raw = b""
        command = raw.replace(b"\0", b" ").decode(errors="replace").strip()
        command = command if len(command) <= 120 else command[:117] + "..."
        return f"pid {pid} ({command or '?'})"
    return f"a process of uid {found[0].uid} (its pid is not visible to this user)"


def port_of(url: str) -> int:
    """The port of an http(s) URL (its scheme's default when none is written)."""
    parts = urlsplit(url)
    return parts.port or (443 if parts.scheme == "https" else 80)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m harness.adapters.reef.ownership URL PID", file=sys.stderr)
        return 2
    url, pid = argv[0], int(argv[1])
    if owned_by(port_of(url), pid):
        return 0
    owner = describe_owner(port_of(url)) or "nothing"
    print(
        f"run.sh: {url} answers, but its port {port_of(url)} is held by {owner}, not by the "
        f"reef serve this run started (pid {pid}); this run talks to no other run's Reef: stop "
        "that process or give this run a free port (--set reef.port=PORT)",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
