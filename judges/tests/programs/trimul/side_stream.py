"""Attack: do the work on a side stream and return at once, so that timing events recorded
on the current stream alone see almost nothing. Here the judge synchronises the whole device
before the call counts as done: expected verdict valid, timed like the same work on the
default stream (judges/README.md records both)."""

import torch
import torch.nn.functional as F

STREAM = None


def _compute(x, mask, w, config):
    dim, hidden = config["dim"], config["hidden_dim"]
    z = F.layer_norm(x, (dim,), w["norm.weight"], w["norm.bias"])
    keep = mask.to(torch.float32).unsqueeze(-1)
    left = F.linear(z, w["left_proj.weight"]) * keep
    left = left * torch.sigmoid(F.linear(z, w["left_gate.weight"]))
    right = F.linear(z, w["right_proj.weight"]) * keep
    right = right * torch.sigmoid(F.linear(z, w["right_gate.weight"]))
    t = torch.einsum("bikh,bjkh->bijh", left, right)
    t = F.layer_norm(t, (hidden,), w["to_out_norm.weight"], w["to_out_norm.bias"])
    return F.linear(t * torch.sigmoid(F.linear(z, w["out_gate.weight"])), w["to_out.weight"])


def custom_kernel(data):
    global STREAM
    if data[0].device.type != "cuda":
        return _compute(*data)
    STREAM = STREAM or torch.cuda.Stream()
    STREAM.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(STREAM):
        out = _compute(*data)
    return out
