"""The judge's own Ray cluster (`--ray local`) listens on loopback only, with token authentication.

The real judge is started with `--ray local` (a private Ray cluster on this host: GCS, raylet,
workers, the dashboard agent, the runtime-env agent) and judges one program, so that Ray
workers exist. Then every listening TCP socket of the judge's process tree is found the way
`ss -ltnp` finds them: the socket inodes of each process's descriptors (`/proc/<pid>/fd`)
matched with the listening entries of `/proc/net/tcp` and `/proc/net/tcp6`. All must be on a
loopback address (127.0.0.0/8, ::1, or ::ffff:127.x), and the Ray components must be among
them (else the test proves nothing). The cluster's processes carry Ray's token authentication
settings in their environment, and no token file is written.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import time
from pathlib import Path

import httpx
import pytest

from judges.problems.polyomino.generator import write_suite
from judges.service.process import JudgeProcess

pytest.importorskip("ray", reason="Ray is not installed (.[cluster])")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

PROGRAMS = Path(__file__).parent / "programs"
RAY_COMPONENTS = ("gcs_server", "raylet")


def listening_sockets() -> dict[int, tuple[str, int]]:
    """Socket inode -> (address, port) of every listening TCP socket of this network namespace."""
    found = {}
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        with open(table) as rows:
            next(rows)
            for row in rows:
                fields = row.split()
                if fields[3] != "0A":  # TCP_LISTEN
                    continue
                hex_address, hex_port = fields[1].split(":")
                raw = bytes.fromhex(hex_address)
                # The kernel prints each 32-bit word in host (little-endian) order.
                raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
                found[int(fields[9])] = (socket.inet_ntop(family, raw), int(hex_port, 16))
    return found


def process_tree(root: int) -> list[int]:
    """`root` and all its descendants (from each process's parent in /proc/<pid>/stat)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
    tree, at = [root], 0
    while at < len(tree):
        tree += children.get(tree[at], [])
        at += 1
    return tree


def sockets_of(pid: int) -> set[int]:
    inodes = set()
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for name in names:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[len("socket:[") : -1]))
    return inodes


def is_loopback(address: str) -> bool:
    parsed = ipaddress.ip_address(address)
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        parsed = parsed.ipv4_mapped
    return parsed.is_loopback


def listeners_of_tree(root: int) -> list[tuple[int, str, str, int]]:
    """(pid, command name, address, port) of every listening socket of the tree."""
    table = listening_sockets()
    found = []
    for pid in process_tree(root):
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        for inode in sockets_of(pid):
            if inode in table:
                found.append((pid, name, *table[inode]))
    return found


def test_ray_local_listens_on_loopback_only(tmp_path: Path) -> None:
    write_suite(tmp_path / "problems" / "0", seed=2, cases=2)
    token_file = Path.home() / ".ray" / "auth_token"
    token_before = token_file.stat().st_mtime_ns if token_file.exists() else None
    flags = ["--problems", str(tmp_path / "problems"), "--ray", "local"]
    with JudgeProcess(tmp_path / "state", *flags, startup_timeout=300) as judge:
        code = (PROGRAMS / "shelf_packer.cpp").read_text()
        files = {"code": ("solution.cpp", code.encode(), "text/x-c++src")}
        sid = httpx.post(
            f"{judge.url}/submit", data={"pid": "0", "lang": "cpp"}, files=files, timeout=30
        ).json()["sid"]
        record: dict = {"status": "queued"}
        deadline = time.monotonic() + 300
        while record["status"] == "queued" and time.monotonic() < deadline:
            time.sleep(0.2)  # polling the judge, bounded by the deadline
            record = httpx.get(f"{judge.url}/result/{sid}", timeout=10).json()
        assert record["status"] == "done", record
        assert judge.process is not None
        listeners = listeners_of_tree(judge.process.pid)
        environments = [
            Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            for pid, name, _, _ in listeners
            if name in RAY_COMPONENTS
        ]
    names = {name for _, name, _, _ in listeners}
    assert set(RAY_COMPONENTS) <= names, listeners
    assert any(name.startswith("ray::") for name in names), listeners  # workers or agents
    exposed = [entry for entry in listeners if not is_loopback(entry[2])]
    assert not exposed, f"listening off loopback: {exposed}"
    assert environments and all(b"RAY_AUTH_MODE=token" in env for env in environments)
    assert all(any(item.startswith(b"RAY_AUTH_TOKEN=") for item in env) for env in environments)
    token_after = token_file.stat().st_mtime_ns if token_file.exists() else None
    assert token_after == token_before, "a Ray token file was written"
