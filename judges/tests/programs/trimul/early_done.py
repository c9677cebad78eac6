"""Attack: say DONE before doing the work. The candidate finds the worker's control block (it
runs in the candidate's process), writes the armed call's DONE itself as soon as it is called,
then computes and holds the call for HOLD_S more (standing for host-side work of that length,
which no GPU probe sees); the worker writes DONE again, exports and says DESCRIBED. The judge's
clock stops at the first DONE, so only the DONE -> DESCRIBED window, charged beyond its
calibrated allowance, pays for the work. Expected verdict: valid, every timed call charged at
least most of HOLD_S (whenever the judge saw DONE, the clock and the window together cover it)."""

import sys
import time

import torch.nn.functional as F


def _block():
    return _worker_local("block")


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


BLOCK = None
HOLD_S = 0.2


def custom_kernel(data):
    global BLOCK
    BLOCK = BLOCK or _block()
    if BLOCK is not None:
        armed = BLOCK.get(1)  # ARMED: the call now under way
        BLOCK.set(3, armed)  # DONE, before any work
    out = _compute(*data)
    if out.is_cuda:
        import torch

        torch.cuda.synchronize()
    time.sleep(HOLD_S)
    return out
