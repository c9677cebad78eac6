"""Service processes that die with the command that started them, whatever ends it.

`start_tied(command, ...)` is `subprocess.Popen` with two additions, for every local service a
command starts (the judge, `reef serve`, the guidance key forwarder):

- the child runs in a session of its own, so a Ctrl-C in the terminal reaches only the command,
  which stops its services in order (a judge hit by the terminal's SIGINT mid-step left the
  rollouts polling a judge that was gone);
- the kernel sends the child `death_signal` (SIGTERM by default: each service stops cleanly on
  it, `reef serve` its own services too) when the command dies, even by SIGKILL or by
  `os._exit` (Linux's parent-death signal, `prctl(PR_SET_PDEATHSIG)`, set between fork and exec;
  a child whose parent died before that exits at once).

The parent-death signal follows the *thread* that started the child: start services from a
thread that outlives them (the main thread, or a worker that stops them before it ends). Off
Linux there is no parent-death signal and only the session is new.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

PR_SET_PDEATHSIG = 1


def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl  # looked up before any fork
    except (OSError, AttributeError):
        return None


_PRCTL = _prctl()


def _tie_to(parent: int, death_signal: int) -> Callable[[], None]:
    prctl = _PRCTL

    def tie() -> None:  # runs in the child between fork and exec: no Python objects built
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, death_signal, 0, 0, 0)
        if os.getppid() != parent:  # the command died before the signal was set
            os._exit(1)

    return tie


def start_tied(
    command: Sequence[str], *, death_signal: int = signal.SIGTERM, **popen: Any
) -> subprocess.Popen[Any]:
    """Start `command` (Popen's keyword arguments in `popen`) in a session of its own, tied to
    this process by a parent-death signal (see the module docstring)."""
    popen.setdefault("start_new_session", True)
    return subprocess.Popen(
        list(command), preexec_fn=_tie_to(os.getpid(), int(death_signal)), **popen
    )
