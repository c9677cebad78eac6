"""Attack: keep GPU work running beside the calls. A thread started at import launches large
products on a stream of its own, keeping up to about 50 of them queued, and never stops; each
call is the honest arithmetic. The judge charges GPU work found running before or after a call
to that call, and beyond its limit for work outside the calls ends the trial. Expected verdict:
Time Limit Exceeded (naming that limit) well before the trial's limit. Off the GPU the thread
is not started (the CPU stand-in has no GPU probes) and the candidate is honest."""

import threading

import torch
import torch.nn.functional as F


def _busy():
    stream = torch.cuda.Stream()
    a = torch.randn(4096, 4096, device="cuda")
    with torch.cuda.stream(stream):
        while True:
            for _ in range(50):
                a = (a @ a).tanh_()
            stream.synchronize()


if torch.cuda.is_available():
    threading.Thread(target=_busy, daemon=True).start()


def custom_kernel(data):
    x, mask, w, config = data
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
