"""Stands for a kernel whose result depends on more than its input (uninitialised memory read
by luck, the order of floating-point atomics): the right output plus noise far inside the
tolerance, different on every call. Expected verdict: valid, and with `determinism_check` the
record flags it (`determinism.identical` false), never failing it."""

import torch
import torch.nn.functional as F


def custom_kernel(data):
    x, mask, w, config = data
    dim, hidden = config["dim"], config["hidden_dim"]
    z = F.layer_norm(x, (dim,), w["norm.weight"], w["norm.bias"])
    keep = mask.float().unsqueeze(-1)
    left = F.linear(z, w["left_proj.weight"]) * keep
    left = left * F.linear(z, w["left_gate.weight"]).sigmoid()
    right = F.linear(z, w["right_proj.weight"]) * keep
    right = right * F.linear(z, w["right_gate.weight"]).sigmoid()
    t = torch.einsum("bikh,bjkh->bijh", left, right)
    t = F.layer_norm(t, (hidden,), w["to_out_norm.weight"], w["to_out_norm.bias"])
    out = F.linear(t * F.linear(z, w["out_gate.weight"]).sigmoid(), w["to_out.weight"])
    return out + 1e-4 * torch.rand(out.shape, device=out.device)
