"""SIGINT (Ctrl-C), SIGTERM and SIGHUP as one clean, bounded stop for the commands that start
services (`run`, `rehearse`, `experiment`, `reevaluate`).

Python's default for SIGTERM and SIGHUP ends the process at once, without unwinding, and its
SIGINT is a `KeyboardInterrupt` that a worker pool may swallow or print as a traceback. Inside
`stopping_on_signals(resume)` the first of these signals

1. writes one line to stderr — `<command>: stopping (SIGINT): the step in progress is kept in
   the journal; resume with: <resume>` — at once, from the handler;
2. raises `Terminated` in the main thread, so every `with` block that started a process stops it
   on the way out (Reef, the judge, the key forwarder; the step's pool stops starting rollouts
   and does not wait for those in flight: what they finished is journaled, the rest runs again
   on resume);

and the command then ends with `exit_now(128 + signal)` — 130 for Ctrl-C, as a shell reports it
— without waiting for rollout threads still blocked in a model or judge call. A second signal
while stopping ends the process at once (`os._exit`) with the same status, still without a
traceback: the journal loses nothing (every journal line is appended durably; a torn last line
is dropped on resume), and every service dies with the command through its parent-death signal
(`harness.adapters.child_process`).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import sys
from collections.abc import Iterator
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Terminated(SystemExit):
    """The command was asked to stop by a signal; its exit status is 128 + the signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum

    def __str__(self) -> str:
        return f"stopped by {signal.Signals(self.signum).name}"


KEPT = "the step in progress is kept in the journal"


def stopping_line(command: str, signum: int, resume: str, kept: str = KEPT) -> str:
    """The one line a stop prints."""
    return f"{command}: stopping ({signal.Signals(signum).name}): {kept}; resume with: {resume}"


def resume_command(name: str) -> str:
    """The exact command that resumes this one: `guidance-ttt` and the arguments it was given
    (`./run.sh` and its arguments when ./run.sh started `guidance-ttt run`: it sets
    `GUIDANCE_TTT_FRONT_COMMAND`)."""
    arguments = sys.argv[1:]
    if name in arguments:  # started as `python -m harness.cli...` or through a wrapper
        arguments = arguments[arguments.index(name) :]
    front = os.environ.get("GUIDANCE_TTT_FRONT_COMMAND", "").strip()
    if name == "run" and front and arguments[:1] == ["run"]:
        return shlex.join([front, *arguments[1:]])
    return shlex.join(["guidance-ttt", *arguments])


def exit_now(code: int) -> None:
    """End the process with `code` once everything it started is stopped: flush what was
    printed, then `os._exit`, so that no rollout thread still blocked in a call keeps it alive
    (their finished work is journaled; the rest runs again on resume)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _write_stderr(data: bytes) -> None:
    """os.write to stderr (safe inside a handler, unlike print); a closed stderr is ignored."""
    with contextlib.suppress(OSError):
        os.write(2, data)


@contextlib.contextmanager
def stopping_on_signals(
    command: str = "guidance-ttt", resume: str = "", kept: str = KEPT
) -> Iterator[None]:
    """Turn SIGINT, SIGTERM and SIGHUP into `Terminated` for the duration of the block (see the
    module docstring); `command` names the command in the stopping line, `resume` is the exact
    command that resumes (default: this process's own command line), `kept` what is kept."""
    resume = resume or " ".join(sys.argv)
    stopping: list[int] = []
    announced: list[bool] = []
    # Made before any signal: a second signal's handler may run inside the first one's at any
    # Python call, so the first does nothing but mark, write and raise (no call in between).
    lines = {sig: (stopping_line(command, sig, resume, kept) + "\n").encode() for sig in SIGNALS}

    def handle(signum: int, frame: FrameType | None) -> None:
        if stopping:  # a second signal while stopping: at once, the line written once
            if not announced:
                _write_stderr(lines[stopping[0]])
            os._exit(128 + stopping[0])
        stopping.append(signum)
        _write_stderr(lines[signum])
        announced.append(True)
        raise Terminated(signum)

    previous = {sig: signal.signal(sig, handle) for sig in SIGNALS}
    try:
        yield
    finally:
        if not stopping:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
