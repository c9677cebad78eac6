"""Seed for TriMul: the outgoing triangle multiplicative update in plain PyTorch, float32.

Layer norm over the channels, the five input projections as separate matrix products, mask and
sigmoid gates, the triangle contraction as one batched matrix product per (batch, hidden
channel), the output layer norm, the output gate and the final projection. No fusion, no lower
precision, no custom kernel: a first attempt with room to improve.
"""

import torch
import torch.nn.functional as F


def custom_kernel(data):
    x, mask, weights, config = data
    dim, hidden = config["dim"], config["hidden_dim"]
    batch, n = x.shape[0], x.shape[1]
    z = F.layer_norm(x, (dim,), weights["norm.weight"], weights["norm.bias"])
    keep = mask.to(torch.float32).unsqueeze(-1)
    left = z @ weights["left_proj.weight"].t() * keep
    right = z @ weights["right_proj.weight"].t() * keep
    left = left * torch.sigmoid(z @ weights["left_gate.weight"].t())
    right = right * torch.sigmoid(z @ weights["right_gate.weight"].t())
    # t[b, i, j, h] = sum_k left[b, i, k, h] * right[b, j, k, h]: per (b, h), L @ R^T
    lt = left.permute(0, 3, 1, 2).reshape(batch * hidden, n, n)
    rt = right.permute(0, 3, 1, 2).reshape(batch * hidden, n, n)
    t = torch.bmm(lt, rt.transpose(1, 2)).reshape(batch, hidden, n, n).permute(0, 2, 3, 1)
    t = F.layer_norm(t, (hidden,), weights["to_out_norm.weight"], weights["to_out_norm.bias"])
    t = t * torch.sigmoid(z @ weights["out_gate.weight"].t())
    return t @ weights["to_out.weight"].t()
