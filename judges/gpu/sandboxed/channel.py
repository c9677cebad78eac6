"""The message channel between the trusted process and the worker: a Unix seqpacket socket.

One JSON object per packet (so no framing), with file descriptors passed alongside when a
message needs them (the CPU stand-in for CUDA IPC shares memory files that way). Messages are
small: layouts, commands, a traceback cut to 16 KiB.
"""

from __future__ import annotations

import json
import select
import socket
import time
from typing import Any

MAX_MESSAGE = 64 * 1024
MAX_FDS = 8
TEXT_CAP = 16 * 1024


class ChannelClosed(ConnectionError):
    """The other side closed the channel or sent something that is not a message."""


class Channel:
    """Send and receive JSON messages (and descriptors) over a SOCK_SEQPACKET socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    @staticmethod
    def pair() -> tuple[Channel, socket.socket]:
        """Our end, and the other end's socket (to be inherited by the worker)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        return Channel(ours), theirs

    def send(self, message: dict[str, Any], fds: list[int] | tuple[int, ...] = ()) -> None:
        data = json.dumps(message).encode()
        if len(data) > MAX_MESSAGE:
            raise ValueError(f"message of {len(data)} bytes exceeds {MAX_MESSAGE}")
        if fds:
            socket.send_fds(self.sock, [data], list(fds))
        else:
            self.sock.sendall(data)

    def receive(self, timeout: float | None = None) -> tuple[dict[str, Any], list[int]]:
        """The next message and its descriptors; TimeoutError after `timeout` seconds,
        ChannelClosed when the other side is gone or sent garbage."""
        if timeout is not None:
            ready, _, _ = select.select([self.sock], [], [], max(timeout, 0.0))
            if not ready:
                raise TimeoutError(f"no message within {timeout:g} s")
        data, fds, _, _ = socket.recv_fds(self.sock, MAX_MESSAGE, MAX_FDS)
        if not data:
            raise ChannelClosed("the other side closed the channel")
        try:
            message = json.loads(data)
        except ValueError:
            raise ChannelClosed(f"not a JSON message: {data[:80]!r}") from None
        if not isinstance(message, dict) or not isinstance(message.get("op"), str):
            raise ChannelClosed(f"not a message with an op: {str(message)[:80]}")
        return message, fds

    def poll(self, seconds: float) -> bool:
        """Whether a message (or the other side's close) is waiting, asking again and again for
        up to `seconds` rather than sleeping: the process stays running on its CPU."""
        deadline = time.monotonic() + seconds
        while True:
            if select.select([self.sock], [], [], 0)[0]:
                return True
            if time.monotonic() >= deadline:
                return False

    def close(self) -> None:
        self.sock.close()


def clip(text: str, limit: int = TEXT_CAP) -> str:
    """Text cut to `limit` characters, marked when cut (tracebacks sent to the trusted side)."""
    return text if len(text) <= limit else text[:limit] + "\n[... truncated]"
