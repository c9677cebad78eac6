"""Is an output the reference output? GPU MODE's rule, on every element, in the trusted process.

An element is wrong when |got - expected| > atol + rtol * |expected| (both in float32), or when
exactly one of the two is NaN, or +inf, or -inf (so NaN and infinities must sit where the
reference has them). The shape must be the reference's. This is the rule of GPU MODE's
`verbose_allclose` (github.com/gpu-mode/reference-kernels, problems/bioml/trimul/utils.py);
the message names how many elements are wrong and the first few, with their values.

On a CUDA device the count of wrong elements and the largest finite error come from one fused
pass over both tensors (`judges.gpu.fused_compare`); elsewhere, or where that kernel cannot
run, from the same rule in torch. Either way, only a failing output is read a second time, to
name its first wrong elements.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from judges.gpu import fused_compare as fused

SHOWN = 3


@dataclass(frozen=True)
class Comparison:
    """The verdict on one output: whether it matches, the largest finite error, and why not."""

    ok: bool
    max_error: float
    detail: str


@torch.no_grad()
def compare(got: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float) -> Comparison:
    """Compare every element of `got` with `expected` (module docstring)."""
    if tuple(got.shape) != tuple(expected.shape):
        return Comparison(
            False,
            float("nan"),
            f"shape {list(got.shape)} is not the expected {list(expected.shape)}",
        )
    found = fused.counts(got, expected, rtol, atol)
    count, max_error = found if found is not None else _counts(got, expected, rtol, atol)
    if count == 0:
        return Comparison(True, max_error, f"max abs error {max_error:.3e}")
    got = got.to(torch.float32)
    expected = expected.to(torch.float32)
    wrong = _wrong(got, expected, rtol, atol)[0]
    shown = []
    for index in torch.nonzero(wrong)[:SHOWN].tolist():
        at = tuple(index)
        shown.append(f"at {at}: got {got[at].item():.6g}, expected {expected[at].item():.6g}")
    return Comparison(
        False, max_error, f"{count} of {wrong.numel()} elements differ ({'; '.join(shown)})"
    )


def _wrong(
    got: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(which elements are wrong, their absolute differences), both in float32."""
    diff = (got - expected).abs()
    wrong = diff > atol + rtol * expected.abs()
    wrong |= torch.isnan(got) ^ torch.isnan(expected)
    wrong |= torch.isposinf(got) ^ torch.isposinf(expected)
    wrong |= torch.isneginf(got) ^ torch.isneginf(expected)
    return wrong, diff


def _counts(
    got: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float
) -> tuple[int, float]:
    """(wrong elements, the largest finite difference) in torch, read back in one copy."""
    wrong, diff = _wrong(got.to(torch.float32), expected.to(torch.float32), rtol, atol)
    largest = torch.where(torch.isfinite(diff), diff, torch.zeros_like(diff)).amax()
    pair = torch.stack([wrong.count_nonzero().to(torch.float64), largest.to(torch.float64)])
    count, max_error = pair.tolist()
    return int(count), float(max_error)
