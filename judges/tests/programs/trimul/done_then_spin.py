"""Attack: write the armed call's DONE in the worker's control block (it runs in the
candidate's process), then keep computing on the CPU and never return. The judge's clock stops
at DONE; waiting for the output's description is bounded. Expected verdict: Time Limit Exceeded
within the judge's answer limit (20 s) of the DONE, the sandbox killed."""

import sys


def _block():
    return _worker_local("block")


def _worker_local(name):
    """An object of the judge's worker, found by its local name in the caller frames (the
    worker's call holds `block`, the control block, and `share`, its transport)."""
    frame = sys._getframe(1)
    while frame is not None and name not in frame.f_locals:
        frame = frame.f_back
    return None if frame is None else frame.f_locals[name]


def custom_kernel(data):
    block = _block()
    if block is not None:
        block.set(3, block.get(1))  # DONE of the armed call
    total = 0
    while True:
        total += 1
