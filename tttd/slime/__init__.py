"""The tttd Slime loss family, driver side (no torch).

Reef's Slime driver resolves the family name ``tttd`` through the lazy reference that
``tttd/__init__.py`` registers, imports this module, and validates the backend arguments with
``TTTDAlgorithm``. The Megatron workers then import ``tttd.slime.objective`` (torch), whose
``@objective`` hooks Slime calls:

- ``tttd_advantages`` (Slime's advantage pass): Reef's per-rollout advantages plus the centred
  frozen-base token KL, ``A_t += kl_coef · mask_t · (mean_diff − (logp_rollout − logp_ref)_t)``;
- ``tttd_loss`` (Slime's loss): the un-clipped importance-sampling surrogate
  ``−Σ_t exp(logp_t − logp_rollout_t) · A_t``, reporting ``importance_ratio`` and ``ppo_kl``.

The ratio is un-clipped, which is only valid on-policy: one optimizer pass per batch.
"""

from __future__ import annotations

import math
from argparse import Namespace

from reef.train.slime_backend.algorithm import SlimeAlgorithm, register_loss_family

__all__ = ["TTTDAlgorithm"]


@register_loss_family
class TTTDAlgorithm(SlimeAlgorithm):
    """Un-clipped importance sampling on Reef's tttd advantages plus the centred base KL."""

    loss_family = "tttd"
    loss_type = "custom_loss"
    # The ratio's denominator is the rollout engine's own log-prob of each sampled token.
    requires_rollout_logprobs = True
    # One entropic advantage per rollout comes from Reef's tttd objective.
    advantages = "required"
    # Slime's advantage pass computes the frozen base's log-probs and calls tttd_advantages.
    allows_slime_advantage_computation = True
    required_objective_hooks = ("custom_loss_function_path", "custom_advantage_function_path")
    external_batch_keys = ("rollout_log_probs",)

    def validate_specific_args(self, args: Namespace, source: str) -> None:
        """Refuse arguments under which the tttd loss would train something else, naming the fix."""
        kl_coef = getattr(args, "kl_coef", None)
        if not isinstance(kl_coef, int | float) or not math.isfinite(kl_coef) or kl_coef <= 0:
            raise RuntimeError(
                f"{source} folds the frozen-base KL into the advantages and needs --kl-coef > 0 "
                f"(tttd uses 0.1), got {kl_coef!r}"
            )
        if getattr(args, "use_kl_loss", False):
            raise RuntimeError(
                f"{source} adds the KL to the advantages, not to the loss; remove --use-kl-loss"
            )
        if not getattr(args, "compute_advantages_and_returns", True):
            raise RuntimeError(
                f"{source} adds the KL in Slime's advantage pass; remove "
                "--disable-compute-advantages-and-returns"
            )
        steps = int(getattr(args, "num_steps_per_rollout", None) or 1)
        if steps != 1:
            raise RuntimeError(
                f"{source} requires --num-steps-per-rollout=1: the un-clipped importance ratio "
                f"is only valid on-policy, got {steps} passes per batch"
            )
        if getattr(args, "calculate_per_token_loss", False):
            raise RuntimeError(
                f"{source} is a token sum scaled against Slime's per-sample division; remove "
                "--calculate-per-token-loss"
            )
        entropy = getattr(args, "entropy_coef", 0) or 0
        if entropy != 0:
            raise RuntimeError(
                f"{source} has no entropy term; set --entropy-coef 0 (got {entropy!r}) instead "
                "of having it silently ignored"
            )
