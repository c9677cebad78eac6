"""The tttd loss terms on plain tensors (torch, no Megatron or Slime).

The worker hooks in ``tttd.slime.objective`` gather Slime's per-sample tensors and call these
functions, so the arithmetic is tested on CPU with ordinary tensors.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

#: Sums a ``[2]`` tensor across the data-parallel group in place (identity on one rank).
AllReduce = Callable[[torch.Tensor], None]


def require_rollout_log_probs(
    rollout_log_probs: Sequence[torch.Tensor] | None, lengths: Sequence[int]
) -> list[torch.Tensor]:
    """The rollout engine's log-probs, one tensor per sample matching its response length.

    Raises ``ValueError`` naming the fix when they are missing or do not line up: the
    importance ratio and the KL term are both defined against them.
    """
    if rollout_log_probs is None:
        raise ValueError(
            "the tttd loss needs rollout_log_probs (the sampling engine's log-prob of each "
            "response token): serve the guidance model through Reef's training SGLang path and "
            "set --use-rollout-logprobs"
        )
    values = list(rollout_log_probs)
    if len(values) != len(lengths):
        raise ValueError(
            f"the tttd loss needs one rollout_log_probs tensor per sample, got {len(values)} for "
            f"{len(lengths)} samples"
        )
    for index, (value, length) in enumerate(zip(values, lengths, strict=True)):
        if value.numel() != length:
            raise ValueError(
                f"sample {index} has {value.numel()} rollout log-probs for {length} response "
                f"tokens; the rollout log-probs are missing or truncated"
            )
    return values


def centred_kl_advantages(
    advantages: Sequence[torch.Tensor],
    rollout_log_probs: Sequence[torch.Tensor] | None,
    ref_log_probs: Sequence[torch.Tensor] | None,
    loss_masks: Sequence[torch.Tensor],
    kl_coef: float,
    all_reduce: AllReduce | None = None,
) -> list[torch.Tensor]:
    """Per-token advantages with the centred frozen-base KL folded in.

    ``A_t + kl_coef · mask_t · (mean_diff − d_t)`` with ``d_t = logp_rollout_t − logp_ref_t``
    and ``mean_diff`` the mask-weighted mean of ``d`` over every sample of the data-parallel
    group (``all_reduce`` sums the numerator and denominator across ranks). The added term has
    zero mask-weighted mean, so it reshapes the per-token signal without shifting its level.
    Raises ``ValueError`` for ``kl_coef ≤ 0`` and for missing rollout or reference log-probs.
    """
    if isinstance(kl_coef, bool) or not math.isfinite(kl_coef) or kl_coef <= 0:
        raise ValueError(f"the tttd KL term needs kl_coef > 0 (tttd uses 0.1), got {kl_coef!r}")
    lengths = [advantage.numel() for advantage in advantages]
    rollout = require_rollout_log_probs(rollout_log_probs, lengths)
    if ref_log_probs is None or len(ref_log_probs) != len(lengths):
        raise ValueError(
            "the tttd KL term needs the frozen base's log-probs (ref_log_probs) for every sample; "
            "set training.options.ref-load to the base model"
        )
    masks = [mask.to(torch.float64) for mask in loss_masks]
    diffs = [
        (current.to(torch.float64) - reference.to(torch.float64))
        for current, reference in zip(rollout, ref_log_probs, strict=True)
    ]
    device = advantages[0].device if advantages else torch.device("cpu")
    totals = torch.zeros(2, dtype=torch.float64, device=device)
    for mask, diff in zip(masks, diffs, strict=True):
        totals[0] += (mask * diff).sum()
        totals[1] += mask.sum()
    if all_reduce is not None:
        all_reduce(totals)
    mean_diff = totals[0] / totals[1] if totals[1] > 0 else totals.new_zeros(())
    return [
        (advantage.to(torch.float64) + kl_coef * mask * (mean_diff - diff)).to(advantage.dtype)
        for advantage, mask, diff in zip(advantages, masks, diffs, strict=True)
    ]


@dataclass(frozen=True)
class ImportanceSamplingTerms:
    """The surrogate of one micro-batch and the per-token quantities it reports.

    ``loss`` is ``−Σ_t mask_t · ratio_t · A_t`` (a sum, differentiable in the log-probs);
    ``ratio`` is ``exp(logp − logp_rollout)`` and ``ppo_kl`` is ``logp_rollout − logp``, both
    detached and per token.
    """

    loss: torch.Tensor
    ratio: torch.Tensor
    ppo_kl: torch.Tensor


def importance_sampling_loss(
    log_probs: torch.Tensor,
    rollout_log_probs: torch.Tensor | None,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
) -> ImportanceSamplingTerms:
    """The un-clipped importance-sampling surrogate over concatenated response tokens.

    Its gradient in ``log_probs`` is ``−mask_t · ratio_t · A_t``: ``−A_t`` when the current and
    rollout log-probs agree. Raises ``ValueError`` when the rollout log-probs are missing or a
    tensor does not line up with ``log_probs``.
    """
    rollout = require_rollout_log_probs(
        None if rollout_log_probs is None else [rollout_log_probs], [log_probs.numel()]
    )[0]
    for name, value in (("advantages", advantages), ("loss_mask", loss_mask)):
        if value.numel() != log_probs.numel():
            raise ValueError(
                f"{name} has {value.numel()} entries for {log_probs.numel()} response tokens"
            )
    ratio = torch.exp(log_probs - rollout.to(log_probs.dtype))
    mask = loss_mask.to(log_probs.dtype)
    loss = -(mask * ratio * advantages.to(log_probs.dtype)).sum()
    return ImportanceSamplingTerms(
        loss=loss,
        ratio=ratio.detach(),
        ppo_kl=(rollout.to(log_probs.dtype) - log_probs).detach(),
    )
