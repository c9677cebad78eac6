"""Attack: work on a side stream, and make every device synchronisation a no-op, so that the
call says it is done while the GPU is still computing. Expected verdict: the judge copies the
output out right after DONE, so the output is either caught half-written (Wrong Answer) or the
copy waits for the leftover work and that wait is charged (valid, timed like honest work)."""

import torch
import torch.nn.functional as F

STREAM = None
torch.cuda.synchronize = lambda device=None: None
torch.cuda.Stream.synchronize = lambda self: None
torch.cuda.Event.synchronize = lambda self: None


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
