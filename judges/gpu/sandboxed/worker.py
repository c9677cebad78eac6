"""The candidate's process: import the candidate, then call it whenever the trusted side says go.

    python3 -I -B /box/judge/worker.py CONTROL_FD SOCKET_FD BACKEND ENTRY

Runs inside the sandbox with the control block and the channel inherited as descriptors. It
imports `/box/submission.py`, reports `ready` (or `import_failed` with the traceback), then
serves messages: `case` (map the case's input pool; the layout says where each tensor is),
`arm` (spin on GO, then make the call), `release` (unmap the pool), `exit`.

A call rebuilds the data from the pool (fresh tensor objects every time), calls the entry,
synchronises the whole device (every stream of this process), exports the output's memory and
writes its descriptor, then DONE. Everything here runs in the candidate's process and may be
patched by it; that is why the clock and the check are in the trusted process and why the
trusted side verifies what arrives (docs/judge.md, "What the candidate cannot do").
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script's folder out
import channel
import control
import layout
import transport

SPIN_TIMEOUT = 30.0  # seconds the worker spins for GO after being armed


def main(argv: list[str]) -> int:
    control_fd, socket_fd, backend, entry_name = int(argv[1]), int(argv[2]), argv[3], argv[4]
    import socket

    block = control.Control(control_fd)
    link = channel.Channel(socket.socket(fileno=socket_fd))
    share = transport.make(backend)
    sys.path.insert(0, "/box")
    try:
        module = importlib.import_module("submission")
        entry = getattr(module, entry_name)
        if not callable(entry):
            raise TypeError(f"{entry_name} is not a function")
    except BaseException:
        link.send({"op": "import_failed", "error": channel.clip(traceback.format_exc())})
        return 3
    import torch

    link.send({"op": "ready", "torch": torch.__version__})
    pool = token = None
    tree: dict | None = None
    while True:
        message, fds = link.receive()
        op = message["op"]
        if op == "case":
            pool, token = share.open_pool(message["pool"], fds)
            tree = message["layout"]
            link.send({"op": "case_ready"})
        elif op == "arm":
            seq = int(message["seq"])
            block.set(control.ARMED, seq)
            if not block.wait(control.GO, seq, SPIN_TIMEOUT):
                link.send({"op": "go_missing", "seq": seq})
                continue
            error = call(block, share, entry, tree, pool, seq)
            if error is not None:
                link.send({"op": "call_error", "seq": seq, "error": error})
        elif op == "release":
            if token is not None:
                share.close_pool(token)
            pool = token = tree = None
            link.send({"op": "released"})
        elif op == "exit":
            return 0


def call(block, share, entry, tree, pool, seq: int) -> str | None:
    """One timed call; the error text when the candidate failed (DONE is written either way)."""
    error = None
    try:
        output = entry(layout.rebuild(tree, pool))
        share.synchronize()
        block.write_output(share.export_output(output, pool))
        block.set(control.STATUS, control.OK)
    except BaseException:
        error = channel.clip(traceback.format_exc())
        block.set(control.STATUS, control.FAILED)
    block.set(control.DONE, seq)
    return error


if __name__ == "__main__":
    sys.exit(main(sys.argv))
