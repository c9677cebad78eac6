"""An honest mixed-precision candidate: the projections and the triangle contraction in
float16 under `torch.autocast` (float32 accumulation: reduced-precision reductions off), the
layer norms in float32 as autocast keeps them, a float16 output — within the task's tolerance.
Off the GPU it computes in float32."""

import torch
import torch.nn.functional as F


def _compute(x, mask, w, config):
    dim, hidden = config["dim"], config["hidden_dim"]
    z = F.layer_norm(x, (dim,), w["norm.weight"], w["norm.bias"])
    keep = mask.to(z.dtype).unsqueeze(-1)
    left = F.linear(z, w["left_proj.weight"]) * keep
    left = left * torch.sigmoid(F.linear(z, w["left_gate.weight"]))
    right = F.linear(z, w["right_proj.weight"]) * keep
    right = right * torch.sigmoid(F.linear(z, w["right_gate.weight"]))
    t = torch.einsum("bikh,bjkh->bijh", left, right)
    t = F.layer_norm(t, (hidden,), w["to_out_norm.weight"], w["to_out_norm.bias"])
    return F.linear(t * torch.sigmoid(F.linear(z, w["out_gate.weight"])), w["to_out.weight"])


def custom_kernel(data):
    if data[0].device.type != "cuda":
        return _compute(*data)
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    with torch.autocast("cuda", dtype=torch.float16):
        return _compute(*data)
