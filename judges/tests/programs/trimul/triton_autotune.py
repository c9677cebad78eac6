"""An honest candidate as kernel authors write them: the triangle contraction as a Triton
batched product tuned by `@triton.autotune` over several tile configurations (tuned in the
untimed first call of each shape), the projections, norms and gates in PyTorch. Off the GPU
the contraction is PyTorch's."""

import torch
import torch.nn.functional as F

KERNEL = None


def _kernel():
    import triton
    import triton.language as tl

    configs = [
        triton.Config({"BM": bm, "BN": bn, "BK": bk}, num_warps=w, num_stages=s)
        for bm, bn, bk, w, s in ((64, 64, 32, 4, 3), (128, 64, 32, 4, 3), (64, 128, 32, 4, 3),
                                 (128, 128, 32, 8, 3), (64, 64, 64, 4, 4))
    ]  # fmt: skip

    @triton.autotune(configs=configs, key=["M", "N", "K"])
    @triton.jit
    def contract(a, b, c, M, N, K, sab, sam, sak, sbb, sbn, sbk, scb, scm, scn,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):  # fmt: skip
        """c[z] = a[z] @ b[z]^T for a [Z, M, K], b [Z, N, K], c [Z, M, N]."""
        pm, pn, z = tl.program_id(0), tl.program_id(1), tl.program_id(2)
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        pa = a + z * sab + rm[:, None] * sam + rk[None, :] * sak
        pb = b + z * sbb + rn[None, :] * sbn + rk[:, None] * sbk
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            ta = tl.load(pa, mask=(rm[:, None] < M) & (rk[None, :] + k < K), other=0.0)
            tb = tl.load(pb, mask=(rk[:, None] + k < K) & (rn[None, :] < N), other=0.0)
            acc += tl.dot(ta, tb)
            pa += BK * sak
            pb += BK * sbk
        pc = c + z * scb + rm[:, None] * scm + rn[None, :] * scn
        tl.store(pc, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))

    def run(left, right):
        z, m, k = left.shape
        n = right.shape[1]
        out = torch.empty((z, m, n), device=left.device, dtype=torch.float32)
        grid = lambda meta: (triton.cdiv(m, meta["BM"]), triton.cdiv(n, meta["BN"]), z)  # noqa: E731
        contract[grid](left, right, out, m, n, k, *left.stride(), *right.stride(), *out.stride())
        return out

    return run


def custom_kernel(data):
    global KERNEL
    x, mask, w, config = data
    dim, hidden = config["dim"], config["hidden_dim"]
    batch, n = x.shape[0], x.shape[1]
    z = F.layer_norm(x, (dim,), w["norm.weight"], w["norm.bias"])
    keep = mask.to(torch.float32).unsqueeze(-1)
    left = F.linear(z, w["left_proj.weight"]) * keep
    left = left * torch.sigmoid(F.linear(z, w["left_gate.weight"]))
    right = F.linear(z, w["right_proj.weight"]) * keep
    right = right * torch.sigmoid(F.linear(z, w["right_gate.weight"]))
    # t[b, i, j, h] = sum_k left[b, i, k, h] * right[b, j, k, h]: per (b, h), left @ right^T
    lt = left.permute(0, 3, 1, 2).reshape(batch * hidden, n, n).contiguous()
    rt = right.permute(0, 3, 1, 2).reshape(batch * hidden, n, n).contiguous()
    if x.device.type == "cuda":
        KERNEL = KERNEL or _kernel()
        t = KERNEL(lt, rt)
    else:
        t = torch.bmm(lt, rt.transpose(1, 2))
    t = t.view(batch, hidden, n, n).permute(0, 2, 3, 1)
    t = F.layer_norm(t, (hidden,), w["to_out_norm.weight"], w["to_out_norm.bias"])
    return F.linear(t * torch.sigmoid(F.linear(z, w["out_gate.weight"])), w["to_out.weight"])
