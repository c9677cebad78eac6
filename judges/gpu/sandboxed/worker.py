"""The candidate's process: import the candidate, then call it whenever the trusted side says go.

    python3 -I -B /box/judge/worker.py CONTROL_FD SOCKET_FD BACKEND ENTRY

Runs inside the sandbox with the control block and the channel inherited as descriptors. It
imports torch, makes its CUDA context, loads the common GPU kernels (`warm_up`), says `hello`
and serves messages: `import` (import `/box/submission.py`, then `ready` or `import_failed`
with what failed, `failure.describe`'s message; until then calls go to a one-kernel entry of
its own, a copy of the largest input, which the judge times to calibrate its overhead),
`case` (map the case's input pool; the layout says where each tensor is), `arm` (spin on GO,
then make the call; `call_error` with `failure.describe`'s message when it raised), `release`
(unmap the pool), `exit`. On a GPU it waits for each message awake (polling its channel for
up to `POLL_S`, then blocking), so that the next call does not start on a host path gone cold.

Armed, the worker rebuilds the data from the pool (fresh tensor objects every time, before the
clock starts: views only, no data is read), runs Python's cyclic garbage collector and freezes
what survives (`gc.freeze`: the judge's, torch's and the candidate's long-lived objects, a
compiled graph's too, are never scanned again, so a collection that falls inside a call scans
only that call's objects rather than pausing it for tens of milliseconds), says ARMED and
spins. A call then calls the entry,
synchronises the whole device (every stream of this process) and writes DONE; after it, it
exports the output's memory and writes its descriptor, STATUS and DESCRIBED. Everything here
runs in the candidate's process and may be patched by it; that is why the clock and the check
are in the trusted process and why the trusted side verifies what arrives (judges/README.md, "What
the candidate cannot do")."""

from __future__ import annotations

import gc
import importlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script's folder out
import channel
import control
import failure
import layout
import transport

SPIN_TIMEOUT = 30.0  # seconds the worker spins for GO after being armed
# On a GPU, seconds the worker polls for its next message before it blocks: a process that
# sleeps between calls starts the next with a cold host path (judges/MEASUREMENTS.md, 2026-12-07)
POLL_S = 0.5


def main(argv: list[str]) -> int:
    control_fd, socket_fd, backend, entry_name = int(argv[1]), int(argv[2]), argv[3], argv[4]
    import socket

    import torch

    block = control.Control(control_fd)
    link = channel.Channel(socket.socket(fileno=socket_fd))
    share = transport.make(backend)
    device = share.device

    def null_entry(data: object) -> torch.Tensor:
        """Our own call before the candidate is imported, the judge's calibration: a copy of
        the call's largest input, so that the case's memory is read and an output of its size
        written, as a real call does (the judge subtracts the copy's own kernel time)."""
        found = layout.largest(data)
        return torch.ones(16, device=device) if found is None else found.clone()

    entry = null_entry
    if device == "cuda":
        warm_up(torch, device)
    link.send({"op": "hello", "torch": torch.__version__})
    pool = token = None
    tree: dict | None = None
    while True:
        if device == "cuda":
            link.poll(POLL_S)
        message, fds = link.receive()
        op = message["op"]
        if op == "import":
            sys.path.insert(0, "/box")
            try:
                module = importlib.import_module("submission")
                entry = getattr(module, entry_name)
                if not callable(entry):
                    raise TypeError(f"{entry_name} is not a function")
            except BaseException as error:
                link.send({"op": "import_failed", "error": failure.describe(error)})
                return 3
            link.send({"op": "ready", "torch": torch.__version__})
        elif op == "case":
            pool, token = share.open_pool(message["pool"], fds)
            tree = message["layout"]
            link.send({"op": "case_ready"})
        elif op == "arm":
            seq = int(message["seq"])
            data = layout.rebuild(tree, pool)
            gc.collect()
            gc.freeze()
            block.set(control.ARMED, seq)
            if not block.wait(control.GO, seq, SPIN_TIMEOUT):
                link.send({"op": "go_missing", "seq": seq})
                continue
            error = call(block, share, entry, data, pool, seq)
            del data
            if error is not None:
                link.send(
                    {
                        "op": "call_error",
                        "seq": seq,
                        "error": failure.describe(error),
                        "kind": type(error).__name__,
                    }
                )
        elif op == "release":
            if token is not None:
                share.close_pool(token)
            pool = token = tree = None
            link.send({"op": "released"})
        elif op == "exit":
            return 0


def warm_up(torch, device: str) -> None:
    """Load what nearly every candidate's first call would otherwise load inside the judge's
    first test (the BLAS handles, the common kernels' modules): small products in float32,
    bfloat16 and float16, a batched one, a layer norm and a sigmoid, before the hello."""
    import torch.nn.functional as F

    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        a = torch.ones((64, 64), device=device, dtype=dtype)
        torch.sigmoid(F.layer_norm(a @ a, (64,)))
        torch.bmm(a[None], a[None])
    torch.cuda.synchronize()


def call(block, share, entry, data, pool, seq: int) -> BaseException | None:
    """One timed call; the error when the candidate (or its output) failed. DONE and
    DESCRIBED are written either way."""
    clock = time.perf_counter_ns
    error = output = None
    started = clock()
    try:
        output = entry(data)
        called = clock()
        share.synchronize()
    except BaseException as raised:
        called = clock()
        error = raised
    synced = clock()
    gc.disable()  # DONE to DESCRIBED is charged beyond its slack: no collector pause in it
    try:
        block.set(control.DONE, seq)
        if error is None:
            try:
                block.write_output(share.export_output(output, pool))
            except BaseException as raised:
                error = raised
        block.set(control.CALL_NS, called - started)
        block.set(control.SYNC_NS, synced - called)
        block.set(control.EXPORT_NS, clock() - synced)
        block.set(control.STATUS, control.OK if error is None else control.FAILED)
        block.set(control.DESCRIBED, seq)
    finally:
        gc.enable()
    return error


if __name__ == "__main__":
    sys.exit(main(sys.argv))
