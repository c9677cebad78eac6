"""An honest candidate with a Triton kernel (the final gate multiply), to show that Triton
compiles and runs inside the GPU sandbox. Off the GPU it uses PyTorch alone."""

import torch
import torch.nn.functional as F

KERNEL = None


def _gate_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def gate(t_ptr, g_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        inside = offsets < n
        t = tl.load(t_ptr + offsets, mask=inside)
        g = tl.load(g_ptr + offsets, mask=inside)
        tl.store(out_ptr + offsets, t * tl.sigmoid(g), mask=inside)

    return gate


def custom_kernel(data):
    global KERNEL
    x, mask, w, config = data
    dim, hidden = config["dim"], config["hidden_dim"]
    z = F.layer_norm(x, (dim,), w["norm.weight"], w["norm.bias"])
    keep = mask.to(torch.float32).unsqueeze(-1)
    left = (
        F.linear(z, w["left_proj.weight"])
        * keep
        * torch.sigmoid(F.linear(z, w["left_gate.weight"]))
    )
    right = (
        F.linear(z, w["right_proj.weight"])
        * keep
        * torch.sigmoid(F.linear(z, w["right_gate.weight"]))
    )
    t = torch.einsum("bikh,bjkh->bijh", left, right)
    t = F.layer_norm(t, (hidden,), w["to_out_norm.weight"], w["to_out_norm.bias"]).contiguous()
    g = F.linear(z, w["out_gate.weight"]).contiguous()
    if x.device.type != "cuda":
        gated = t * torch.sigmoid(g)
    else:
        KERNEL = KERNEL or _gate_kernel()
        gated = torch.empty_like(t)
        n = t.numel()
        KERNEL[((n + 1023) // 1024,)](t, g, gated, n, BLOCK=1024)
    return F.linear(gated, w["to_out.weight"])
