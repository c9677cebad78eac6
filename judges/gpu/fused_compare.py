"""GPU MODE's comparison rule (`judges.gpu.compare`) as one Triton kernel, one pass over both.

The rule in torch takes about 25 passes over the output and the reference and a boolean-mask
copy, which on TriMul's largest outputs (1.6 GB each) cost 27–54 ms per call on an H200, more
than the candidate's own call; this kernel reads each element once and writes one count and
one maximum per block (1.1–2.1 ms, measured with planted NaN, ±inf and wrong elements: the same
counts and maxima as the torch rule). Floating-point contraction is off (`enable_fp_fusion`),
so `atol + rtol * |expected|` is rounded as torch rounds it, step by step.

`counts` answers None where the kernel does not apply — not CUDA, no Triton, another dtype
than float32/float16/bfloat16 for the output or float32 for the reference — or fails to
compile, and the caller uses the torch rule. Triton keeps its compiled kernels in
TRITON_CACHE_DIR, which the service points at a folder of its state directory that the
candidate's sandbox never sees. `warm` compiles (or loads) it before the first call is timed.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

log = logging.getLogger("judges.gpu.fused_compare")

BLOCK = 4096
OUTPUT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_kernel: Any = None  # the compiled kernel; False once it could not be made


def _make() -> Any:
    import triton
    import triton.language as tl

    @triton.jit
    def compare_blocks(got, expected, n, rtol, atol, counts, maxima, BLOCK: tl.constexpr):
        block = tl.program_id(0).to(tl.int64)
        offsets = block * BLOCK + tl.arange(0, BLOCK)
        inside = offsets < n
        g = tl.load(got + offsets, mask=inside, other=0.0).to(tl.float32)
        e = tl.load(expected + offsets, mask=inside, other=0.0).to(tl.float32)
        diff = tl.abs(g - e)
        infinity = float("inf")
        wrong = (
            (diff > atol + rtol * tl.abs(e))
            | ((g != g) != (e != e))
            | ((g == infinity) != (e == infinity))
            | ((g == -infinity) != (e == -infinity))
        ) & inside
        tl.store(counts + block, tl.sum(wrong.to(tl.int32), axis=0))
        finite = (diff == diff) & (diff != infinity) & inside
        tl.store(maxima + block, tl.max(tl.where(finite, diff, 0.0), axis=0))

    return compare_blocks


def _launch(got: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float) -> tuple:
    global _kernel
    if _kernel is None:
        _kernel = _make()
    got, expected = got.contiguous(), expected.contiguous()
    n = got.numel()
    blocks = max(1, -(-n // BLOCK))
    counts = torch.empty(blocks, dtype=torch.int32, device=got.device)
    maxima = torch.empty(blocks, dtype=torch.float32, device=got.device)
    _kernel[(blocks,)](
        got, expected, n, rtol, atol, counts, maxima, BLOCK=BLOCK, enable_fp_fusion=False
    )
    pair = torch.stack(
        [counts.sum(dtype=torch.int64).to(torch.float64), maxima.amax().to(torch.float64)]
    )
    count, largest = pair.tolist()
    return int(count), float(largest)


def counts(
    got: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float
) -> tuple[int, float] | None:
    """(wrong elements, the largest finite |got - expected|), or None (module docstring)."""
    global _kernel
    if _kernel is False or not (got.is_cuda and expected.is_cuda) or got.numel() == 0:
        return None
    if got.dtype not in OUTPUT_DTYPES or expected.dtype != torch.float32:
        return None
    if got.device != expected.device:
        return None
    try:
        return _launch(got, expected, rtol, atol)
    except Exception as error:  # no Triton, or it cannot build here: the torch rule then
        log.warning("the fused comparison is not available (%s); comparing in torch", error)
        _kernel = False
        return None


def warm(device: str) -> bool:
    """Compile (or load from Triton's cache) the kernel now, on a tiny pair; whether it runs."""
    if device != "cuda":
        return False
    probe = torch.zeros(8, device=device)
    return counts(probe, probe, 0.0, 0.0) == (0, 0.0)
