"""SIGTERM and SIGHUP as a clean stop for the commands that start services.

Python's default for SIGTERM and SIGHUP ends the process at once, without unwinding: the
`reef serve`, Reef service and judge processes a rehearsal started (each in a session of its
own, so a closed terminal does not reach them) would run on. Inside `stopping_on_signals()`
either signal raises `Terminated` in the main thread instead, so every `with` block that
started a process stops it on the way out, and the command exits with 128 + the signal's
number, as a shell reports a process ended by that signal.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType

SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Terminated(SystemExit):
    """The command was asked to stop by a signal; its exit status is 128 + the signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum

    def __str__(self) -> str:
        return f"stopped by {signal.Signals(self.signum).name}"


def _raise(signum: int, frame: FrameType | None) -> None:
    # Once the first signal unwinds, a second one must not interrupt the clean-up.
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    raise Terminated(signum)


@contextlib.contextmanager
def stopping_on_signals() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into `Terminated` for the duration of the block."""
    previous = {sig: signal.signal(sig, _raise) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
