"""An honest candidate with a CUDA kernel of its own, built by
`torch.utils.cpp_extension.load_inline` (nvcc and ninja, in the sandbox's private /tmp) in the
untimed first call: the output gate, `t * sigmoid(g)`, fused into one kernel; the rest is
PyTorch. Off the GPU the gate is PyTorch's."""

import torch
import torch.nn.functional as F

CUDA_SOURCE = r"""
#include <torch/extension.h>

__global__ void gate_kernel(const float* t, const float* g, float* out, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = t[i] / (1.0f + __expf(-g[i]));
}

torch::Tensor gate(torch::Tensor t, torch::Tensor g) {
    auto out = torch::empty_like(t);
    long n = t.numel();
    int threads = 256;
    long blocks = (n + threads - 1) / threads;
    gate_kernel<<<blocks, threads>>>(t.data_ptr<float>(), g.data_ptr<float>(),
                                     out.data_ptr<float>(), n);
    return out;
}
"""
CPP_SOURCE = "torch::Tensor gate(torch::Tensor t, torch::Tensor g);"
MODULE = None


def _gate(t, g):
    global MODULE
    if t.device.type != "cuda":
        return t * torch.sigmoid(g)
    if MODULE is None:
        from torch.utils.cpp_extension import load_inline

        MODULE = load_inline("trimul_gate", CPP_SOURCE, cuda_sources=CUDA_SOURCE,
                             functions=["gate"], extra_cuda_cflags=["-O3"])  # fmt: skip
    return MODULE.gate(t.contiguous(), g.contiguous())


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
    return F.linear(_gate(t, F.linear(z, w["out_gate.weight"])), w["to_out.weight"])
