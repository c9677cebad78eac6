"""Attack: an output that is right only at the moment the judge copies it. After each call a
thread of the candidate waits until the judge has the output described (and copied it, a few
microseconds later), then overwrites the output memory the judge reads with zeros, unless a
newer call is already under way: every per-call check sees the right values, and only a second
look at the last call's output finds them gone. Expected verdict: Wrong Answer ("the last timed
call's output changed after it was checked")."""

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


def _spoil(block, seq, target):
    deadline = time.monotonic() + 5
    while block.get(DESCRIBED) != seq and time.monotonic() < deadline:
        time.sleep(0.0002)
    time.sleep(0.015)  # the judge has copied and compared by now
    if block.get(ARMED) == seq:  # no newer call: spoil what the judge would read again
        if target.is_cuda:
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
