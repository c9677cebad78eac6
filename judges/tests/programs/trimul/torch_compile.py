"""An honest candidate as executor models write them: the PyTorch forward under
`torch.compile` (Inductor's Triton kernels, compiled in the untimed first call of a shape and
cached in the sandbox's private /tmp). Off the GPU the forward runs eagerly."""

import torch
import torch.nn.functional as F


def _forward(x, mask, w, dim: int, hidden: int):
    z = F.layer_norm(x, (dim,), w["norm.weight"], w["norm.bias"])
    keep = mask.to(torch.float32).unsqueeze(-1)
    left = F.linear(z, w["left_proj.weight"]) * keep
    left = left * torch.sigmoid(F.linear(z, w["left_gate.weight"]))
    right = F.linear(z, w["right_proj.weight"]) * keep
    right = right * torch.sigmoid(F.linear(z, w["right_gate.weight"]))
    t = torch.einsum("bikh,bjkh->bijh", left, right)
    t = F.layer_norm(t, (hidden,), w["to_out_norm.weight"], w["to_out_norm.bias"])
    return F.linear(t * torch.sigmoid(F.linear(z, w["out_gate.weight"])), w["to_out.weight"])


COMPILED = torch.compile(_forward)


def custom_kernel(data):
    x, mask, w, config = data
    forward = COMPILED if x.device.type == "cuda" else _forward
    return forward(x, mask, w, config["dim"], config["hidden_dim"])
