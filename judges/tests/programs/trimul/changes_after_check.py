"""Attack: an output that is right only at the moment the judge copies it. After each call a
thread of the candidate waits until the judge has the output described, then until the judge
has copied and compared it — which it knows for every call but the last, since the judge arms
the next call only after that (the worker says ARMED) — and learns from those calls how long
the judge takes. When no newer call comes within several times that (at least 20 ms, at most
40 ms: the judge pauses 50 ms before its second look), it overwrites the output memory the
judge reads with zeros: every per-call check sees the right values, and only a second look at
the last call's output finds them gone. It spoils only a call that follows three quick calls
(a benchmark's timed loop), never a test case's single call, whose next call comes only after
the judge's pause between cases. Expected verdict: Wrong Answer ("the last timed call's
output changed after it was checked"). (A fixed 15 ms wait lost the race on a loaded CI host:
the judge copied later, and its per-call check caught the zeros instead.)"""

import gc
import threading
import time

import torch
import torch.nn.functional as F

ARMED, DESCRIBED = 1, 5


def _find(kind):
    for item in gc.get_objects():
        if type(item).__name__ == kind:
            return item
    return None


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


_GAPS = []  # seconds from DESCRIBED to the next ARMED: the judge's copy and compare
QUICK = 0.025  # shorter than the 50 ms pause between cases: the same case's next call


def _spoil(block, seq, target):
    deadline = time.monotonic() + 5
    while block.get(DESCRIBED) != seq and time.monotonic() < deadline:
        time.sleep(0.0002)
    described = time.monotonic()
    recent = _GAPS[-3:]
    in_loop = len(recent) == 3 and max(recent) < QUICK
    wait = min(max(4 * max(recent, default=0.0), 0.02), 0.04)
    while block.get(ARMED) == seq and time.monotonic() < described + wait:
        time.sleep(0.0002)
    if not in_loop:  # learn this call's gap, however long, and leave its output alone
        while block.get(ARMED) == seq and time.monotonic() < described + 5:
            time.sleep(0.0002)
    if block.get(ARMED) != seq:  # a newer call: the judge has compared this one
        _GAPS.append(time.monotonic() - described)
        return
    if not in_loop:
        return
    if target.is_cuda:  # no newer call: spoil what the judge would read again
        with torch.cuda.stream(torch.cuda.Stream()):
            target.zero_()
        torch.cuda.synchronize()
    else:
        target.zero_()


def custom_kernel(data):
    block = _find("Control")
    out = _compute(*data)
    if block is not None:
        seq = block.get(ARMED)
        arena = getattr(_find("CpuTransport"), "_arena", None)  # the stand-in's output copy
        target = out if out.is_cuda or arena is None else arena
        threading.Thread(target=_spoil, args=(block, seq, target), daemon=True).start()
    return out
