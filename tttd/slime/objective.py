"""The tttd Slime worker hooks (torch; Megatron and Slime are imported where a hook runs).

Reef's worker initialization imports this module (``<family module>.objective``) and points
Slime's ``--custom-advantage-function-path`` and ``--custom-loss-function-path`` at the two
``@objective`` functions below. They only adapt Slime's per-sample lists to the tensor math in
``tttd.slime.terms``; these adapters need a GPU stack and are not run on CPU.
"""

from __future__ import annotations

from argparse import Namespace
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from reef.train.slime_backend.algorithm import objective

from tttd.slime.terms import centred_kl_advantages, importance_sampling_loss


def _data_parallel_sum() -> Callable[[torch.Tensor], None]:
    """Sum a tensor over the data-parallel (with context-parallel) group, in place."""
    from megatron.core import mpu

    group = mpu.get_data_parallel_group(with_context_parallel=True)

    def reduce(values: torch.Tensor) -> None:
        if dist.is_initialized():
            dist.all_reduce(values, op=dist.ReduceOp.SUM, group=group)

    return reduce


@objective("custom_advantage_function_path")
def tttd_advantages(args: Namespace, rollout_data: dict[str, Any]) -> None:
    """Slime's advantage pass: Reef's advantages plus the centred frozen-base KL, in place.

    Sets ``rollout_data["advantages"]`` and ``rollout_data["returns"]`` as Slime requires.
    """
    advantages = rollout_data.get("advantages")
    if advantages is None:
        raise RuntimeError("the tttd family needs Reef's advantages in the rollout data")
    combined = centred_kl_advantages(
        advantages,
        rollout_data.get("rollout_log_probs"),
        rollout_data.get("ref_log_probs"),
        rollout_data["loss_masks"],
        float(args.kl_coef),
        _data_parallel_sum(),
    )
    rollout_data["advantages"] = combined
    rollout_data["returns"] = combined


@objective("custom_loss_function_path")
def tttd_loss(
    args: Namespace,
    batch: dict[str, Any],
    logits: torch.Tensor,
    sum_of_sample_mean: Callable[[torch.Tensor], torch.Tensor],
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Slime's custom loss: the un-clipped importance-sampling token sum of one micro-batch.

    Slime multiplies a returned loss by ``num_microbatches / step_global_batch_size · dp_size``
    and Megatron divides by the micro-batches and averages over ranks, so the sum is returned
    times the step's global batch size: the optimizer then sees the plain token sum of the step.
    """
    from slime.backends.megatron_utils.loss import get_log_probs_and_entropy

    _, outputs = get_log_probs_and_entropy(
        logits,
        args=args,
        unconcat_tokens=batch["unconcat_tokens"],
        total_lengths=batch["total_lengths"],
        response_lengths=batch["response_lengths"],
        with_entropy=False,
    )
    log_probs = torch.cat(outputs["log_probs"], dim=0)
    rollout = batch.get("rollout_log_probs")
    terms = importance_sampling_loss(
        log_probs,
        None if rollout is None else torch.cat(list(rollout), dim=0),
        torch.cat(list(batch["advantages"]), dim=0),
        torch.cat(list(batch["loss_masks"]), dim=0),
    )
    step_batch_size = batch.get("step_global_batch_size") or args.global_batch_size
    loss = terms.loss * float(step_batch_size)
    if log_probs.numel() == 0:
        # Keep every parameter in the graph when a rank holds no response token.
        loss = loss + 0 * logits.sum()
    metrics = {
        "loss": terms.loss.detach().clone(),
        "importance_ratio": sum_of_sample_mean(terms.ratio),
        "ppo_kl": sum_of_sample_mean(terms.ppo_kl),
    }
    return loss, metrics
