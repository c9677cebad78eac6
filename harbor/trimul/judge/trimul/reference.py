"""TriMul's input generator and reference forward pass, run only by the judge's trusted process.

The outgoing Triangle Multiplicative Update of AlphaFold3 (GPU MODE leaderboard 496), forward
pass only. For x of shape [B, N, N, C], a 0/1 mask [B, N, N] and hidden width H:

    z      = LayerNorm_C(x)                              (weight norm.weight, bias norm.bias)
    left   = (z W_lp^T) * mask * sigmoid(z W_lg^T)       [B, N, N, H]
    right  = (z W_rp^T) * mask * sigmoid(z W_rg^T)
    t[b,i,j,h] = sum_k left[b,i,k,h] * right[b,j,k,h]
    out    = (LayerNorm_H(t) * sigmoid(z W_og^T)) W_o^T  [B, N, N, C]

computed in float32 with TF32 off. The judge package's generic GPU kind calls
`generate_input(device, **case)` for each case of cases.yaml and `ref_kernel(data)` for the
expected output; this file is never mounted where a candidate runs.

Inputs follow GPU MODE's generator (github.com/gpu-mode/reference-kernels,
problems/bioml/trimul/reference.py): a normal input, or a Cauchy(0, 2) one; a random 0/1 mask
unless `nomask` (then a mask of ones, float32; the random mask is int64 as GPU MODE draws it);
weights drawn from a standard normal, the five input projections scaled by 1/sqrt(H) and the
output projection by 1/sqrt(C), the norms' weights and biases unscaled. Unlike GPU MODE, every
tensor is drawn from one generator seeded with the case's seed, in a fixed order (input, mask,
then the weights in the order below), so a case is the same on every run (GPU MODE draws the
Cauchy input and the weights from the process-wide generator): docs/differences.md.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

#: The weights in the order they are drawn: (name, shape as (rows, cols) in terms of C and H,
#: scale). "C" is `dim`, "H" is `hidden_dim`.
WEIGHTS = (
    ("norm.weight", ("C",), None),
    ("norm.bias", ("C",), None),
    ("left_proj.weight", ("H", "C"), "H"),
    ("right_proj.weight", ("H", "C"), "H"),
    ("left_gate.weight", ("H", "C"), "H"),
    ("right_gate.weight", ("H", "C"), "H"),
    ("out_gate.weight", ("H", "C"), "H"),
    ("to_out_norm.weight", ("H",), None),
    ("to_out.weight", ("C", "H"), "C"),
    ("to_out_norm.bias", ("H",), None),
)
CAUCHY_SCALE = 2.0


def generate_input(
    device: torch.device | str,
    *,
    seqlen: int,
    bs: int,
    dim: int,
    hiddendim: int,
    seed: int,
    nomask: bool,
    distribution: str,
) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor], dict[str, int]]:
    """One case's data `(input, mask, weights, config)`, drawn from a generator seeded with
    `seed` on `device`."""
    if distribution not in ("normal", "cauchy"):
        raise ValueError(f"distribution {distribution!r} is not 'normal' or 'cauchy'")
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    shape = (bs, seqlen, seqlen, dim)
    if distribution == "normal":
        x = torch.randn(shape, device=device, dtype=torch.float32, generator=gen)
    else:  # Cauchy(0, s) by its inverse distribution function: s * tan(pi * (u - 1/2))
        u = torch.rand(shape, device=device, dtype=torch.float32, generator=gen)
        x = CAUCHY_SCALE * torch.tan(math.pi * (u - 0.5))
    if nomask:
        mask = torch.ones((bs, seqlen, seqlen), device=device, dtype=torch.float32)
    else:
        mask = torch.randint(0, 2, (bs, seqlen, seqlen), device=device, generator=gen)
    sizes = {"C": dim, "H": hiddendim}
    weights = {}
    for name, dims, scale in WEIGHTS:
        value = torch.randn(
            tuple(sizes[d] for d in dims), device=device, dtype=torch.float32, generator=gen
        )
        weights[name] = value / math.sqrt(sizes[scale]) if scale else value
    return x, mask, weights, {"dim": dim, "hidden_dim": hiddendim}


def ref_kernel(data: tuple[Any, ...]) -> torch.Tensor:
    """The expected output [B, N, N, C] in float32 (TF32 off for matrix products)."""
    x, mask, weights, config = data
    dim, hidden = config["dim"], config["hidden_dim"]
    matmul_tf32 = torch.backends.cuda.matmul.allow_tf32
    cudnn_tf32 = torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        z = F.layer_norm(x, (dim,), weights["norm.weight"], weights["norm.bias"])
        keep = mask.unsqueeze(-1).to(torch.float32)
        left = F.linear(z, weights["left_proj.weight"]) * keep
        right = F.linear(z, weights["right_proj.weight"]) * keep
        left = left * torch.sigmoid(F.linear(z, weights["left_gate.weight"]))
        right = right * torch.sigmoid(F.linear(z, weights["right_gate.weight"]))
        t = torch.einsum("bikh,bjkh->bijh", left, right)
        t = F.layer_norm(t, (hidden,), weights["to_out_norm.weight"], weights["to_out_norm.bias"])
        t = t * torch.sigmoid(F.linear(z, weights["out_gate.weight"]))
        return F.linear(t, weights["to_out.weight"])
    finally:
        torch.backends.cuda.matmul.allow_tf32 = matmul_tf32
        torch.backends.cudnn.allow_tf32 = cudnn_tf32


def minimum_work(*, seqlen: int, bs: int, dim: int, hiddendim: int, **_: Any) -> dict[str, int]:
    """What every correct kernel must at least do on a case, for the judge's hardware floor
    (judges/gpu/limits.py): read the float32 input once and write the output at 2 bytes an
    element at the least (mask and weights left out), and the triangle contraction's
    multiply-adds, 2 B N^3 H FLOPs (the projections left out). A lower bound by design."""
    elements = bs * seqlen * seqlen * dim
    return {"bytes": elements * 4 + elements * 2, "flops": 2 * bs * seqlen**3 * hiddendim}


def custom_kernel(data: tuple[Any, ...]) -> torch.Tensor:
    """The reference under the candidates' entry point, so that it can itself be submitted and
    timed like any candidate (docs/task.md records its figure)."""
    return ref_kernel(data)
