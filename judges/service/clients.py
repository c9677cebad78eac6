"""Who sent a request, for each client's share of the submission queue.

Off loopback a client is its remote address. On loopback every local user arrives from
127.0.0.1, so there a client is the user id that owns the connecting socket, read from the
kernel's socket tables (`/proc/net/tcp` and `/proc/net/tcp6`: the row whose local end is the
peer's address and port and whose remote end is this server's port). A client this cannot name
is "" and has no share of its own (the queue's bound still holds).

A client may hold at most `share(max_queue)` of the waiting submissions: three quarters of the
queue, so one client (a local user with the judge's token, or a run gone wrong) never fills it
and another always finds room.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
_ESTABLISHED = "01"


def share(max_queue: int) -> int:
    """The waiting submissions one client may hold: the queue less a quarter kept for others."""
    return max(1, max_queue - max_queue // 4)


def _decode(field: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    """An address of the socket tables: hex address (in 32-bit words of host byte order) and
    hex port."""
    address, port = field.split(":")
    raw = bytes.fromhex(address)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    if len(words) == 4:
        return ipaddress.IPv4Address(words), int(port, 16)
    decoded = ipaddress.IPv6Address(words)
    return decoded.ipv4_mapped or decoded, int(port, 16)


def loopback_uid(peer_host: str, peer_port: int, server_port: int) -> int | None:
    """The user id owning the local socket `peer_host:peer_port` connected to `server_port`."""
    want = ipaddress.ip_address(peer_host)
    if isinstance(want, ipaddress.IPv6Address) and want.ipv4_mapped:
        want = want.ipv4_mapped
    for table in TABLES:
        try:
            lines = table.read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 8 or fields[3] != _ESTABLISHED:
                continue
            try:
                local, remote = _decode(fields[1]), _decode(fields[2])
            except ValueError:
                continue
            if local == (want, peer_port) and remote[1] == server_port:
                return int(fields[7])
    return None


def client_of(peer: object, server: object) -> str:
    """The client of a connection from its `peername` and `sockname`: `uid N` on loopback,
    `address A` elsewhere, "" when unknown."""
    if not (isinstance(peer, tuple) and len(peer) >= 2 and isinstance(peer[0], str)):
        return ""
    host, port = peer[0], peer[1]
    try:
        address = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return ""
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    if not (mapped or address).is_loopback:
        return f"address {address}"
    if not (isinstance(server, tuple) and len(server) >= 2 and isinstance(port, int)):
        return ""
    uid = loopback_uid(host.split("%")[0], port, int(server[1]))
    return "" if uid is None else f"uid {uid}"
