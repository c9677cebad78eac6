"""Attack: an output that is right only at the moment the judge copies it. After each call of
a benchmark's timed loop (the third call or later in one case: the worker keeps one case's
layout, so the case is known by it; a test case has a single call), a thread of the candidate
waits until the judge has the output described, then for a newer call, which the judge arms
only after it has copied and compared this one (the worker says ARMED). When none comes within
40 ms (the judge pauses 50 ms before its second look), it overwrites the output memory the
judge reads with zeros: every per-call check sees the right values, and only a second look at
the last call's output finds them gone. Expected verdict: Wrong Answer ("the last timed call's
output changed after it was checked"). (Waits guessed from time alone lost the race on a
loaded CI host: a test case's output was spoiled before its check, or a benchmark's never.)"""

import sys
import threading
import time

import torch
import torch.nn.functional as F

ARMED, DESCRIBED = 1, 5


def _worker_local(name):
    """An object of the judge's worker, found by its local name in the caller frames (the
    worker's call holds `block`, the control block, and `share`, its transport)."""
    frame = sys._getframe(1)
    while frame is not None and name not in frame.f_locals:
        frame = frame.f_back
    return None if frame is None else frame.f_locals[name]


def _compute(x, mask, w, config):
    dim, hidden = config["dim"], config["hidden_dim"]
    z = F.layer_norm(x, (dim,), w["norm.weight"], w["norm.bias"])
    keep = mask.float().unsqueeze(-1)
    left = F.linear(z, w["left_proj.weight"]) * keep
    left = left * F.linear(z, w["left_gate.weight"]).sigmoid()
    right = F.linear(z, w["right_proj.weight"]) * keep
    right = right * F.linear(z, w["right_gate.weight"]).sigmoid()
    t = left.permute(0, 3, 1, 2) @ right.permute(0, 3, 2, 1)
    t = F.layer_norm(
        t.permute(0, 2, 3, 1), (hidden,), w["to_out_norm.weight"], w["to_out_norm.bias"]
    )
    return F.linear(t * F.linear(z, w["out_gate.weight"]).sigmoid(), w["to_out.weight"])


WAIT = 0.04  # seconds after DESCRIBED with no newer call: the judge has compared it
_CASE = {"layout": None, "calls": 0}  # the current case's layout (kept: compared by identity)


def _calls_in_case():
    """How many calls the current case has had, this one included: the worker's loop holds the
    case's layout (`tree`), a new object for every case."""
    frame = sys._getframe(1)
    while frame is not None and "tree" not in frame.f_locals:
        frame = frame.f_back
    layout = frame.f_locals["tree"] if frame is not None else None
    if layout is not _CASE["layout"]:
        _CASE.update(layout=layout, calls=0)
    _CASE["calls"] += 1
    return _CASE["calls"]


def _spoil(block, seq, target):
    deadline = time.monotonic() + 5
    while block.get(DESCRIBED) != seq and time.monotonic() < deadline:
        time.sleep(0.0002)
    described = time.monotonic()
    while block.get(ARMED) == seq and time.monotonic() < described + WAIT:
        time.sleep(0.0002)
    if block.get(ARMED) != seq:  # a newer call: the judge has compared this one
        return
    if target.is_cuda:  # no newer call: spoil what the judge would read again
        with torch.cuda.stream(torch.cuda.Stream()):
            target.zero_()
        torch.cuda.synchronize()
    else:
        target.zero_()


def custom_kernel(data):
    block = _worker_local("block")
    out = _compute(*data)
    if block is not None and _calls_in_case() >= 3:
        seq = block.get(ARMED)
        arena = getattr(_worker_local("share"), "_arena", None)  # the stand-in's output copy
        target = out if out.is_cuda or arena is None else arena
        threading.Thread(target=_spoil, args=(block, seq, target), daemon=True).start()
    return out
