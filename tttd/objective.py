"""The tttd objective: adaptive-β leave-one-out entropic advantages (pure math, no torch).

For a comparison group with rewards r_1..r_n, β ≥ 0 is chosen so that the tilted distribution
q_β ∝ exp(β·r) sits at KL(q_β ‖ uniform) = ln 2 from uniform. Each rollout's advantage compares
its weight with the mean weight of the *other* rollouts:

    e_i = exp(β·(r_i − max r)),   A_i = e_i / ((Σ_{j≠i} e_j)/(n−1) + 1e-12) − 1.

Because β adapts to the spread of the group, the advantages are invariant to shifting and to
positive scaling of the rewards. The objective hands one advantage per rollout to the backend;
the frozen-base KL term is per token and lives in the Slime loss family (``tttd.slime``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from reef.core.batches import TrainingBatch, trajectory_groups
from reef.core.trajectories import trajectory_reward
from reef.train.algos import StepSignal, TrainingObjective
from reef.train.algos.helpers import next_steps
from reef.train.algos.registry import register_objective

#: The KL from uniform the tilted distribution is tuned to.
TARGET_KL = math.log(2.0)
#: The bracket search doubles β from 1 up to this cap.
BETA_CAP = 1e6
BISECTION_ITERATIONS = 60
#: Keeps a leave-one-out mean of zero weights from dividing by zero.
LOO_EPSILON = 1e-12


def _checked(rewards: Sequence[float]) -> list[float]:
    values = [float(reward) for reward in rewards]
    if not values:
        raise ValueError("a comparison group needs at least one reward")
    bad = [value for value in values if not math.isfinite(value)]
    if bad:
        raise ValueError(f"rewards must be finite, got {bad[0]!r} in {values}")
    return values


def kl_from_uniform(rewards: Sequence[float], beta: float) -> float:
    """KL(q_β ‖ uniform) for q_β ∝ exp(β·r), computed stably on rewards shifted by their max.

    ``KL = ln n + Σ q_i ln q_i``; with ``s_i = r_i − max r`` and ``ln q_i = β s_i − ln Z`` it is
    ``ln n + β Σ q_i s_i − ln Z``, where every exponent is ≤ 0 so nothing overflows.
    """
    values = _checked(rewards)
    top = max(values)
    shifted = [beta * (value - top) for value in values]
    weights = [math.exp(exponent) for exponent in shifted]
    total = math.fsum(weights)
    log_total = math.log(total)
    expected = math.fsum(
        weight * exponent for weight, exponent in zip(weights, shifted, strict=True)
    )
    kl = math.log(len(values)) + expected / total - log_total
    return max(kl, 0.0)


def adaptive_beta(rewards: Sequence[float]) -> float:
    """The β ≥ 0 with KL(q_β ‖ uniform) = ln 2 for one group's rewards.

    Starts at hi = 1 and doubles until the KL reaches ln 2 or hi reaches 1e6, then bisects
    [0, hi] for 60 iterations. A one-member group gets β = 0. A group whose KL never reaches
    ln 2 (all rewards equal, or n = 2 where ln 2 is only the limit) ends at the cap's bracket.
    """
    values = _checked(rewards)
    if len(values) == 1:
        return 0.0
    hi = 1.0
    while kl_from_uniform(values, hi) < TARGET_KL and hi < BETA_CAP:
        hi = min(hi * 2.0, BETA_CAP)
    lo = 0.0
    for _ in range(BISECTION_ITERATIONS):
        mid = (lo + hi) / 2.0
        if kl_from_uniform(values, mid) < TARGET_KL:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def entropic_advantages(rewards: Sequence[float], beta: float | None = None) -> tuple[float, ...]:
    """Leave-one-out entropic advantages of one comparison group, in reward order.

    ``beta`` defaults to :func:`adaptive_beta`. A one-member group has no other rollout to
    compare with and gets advantage 0. The leave-one-out sums add the other weights directly
    (no ``total − e_i`` cancellation), so a dominant weight does not wipe out the rest.
    """
    values = _checked(rewards)
    if len(values) == 1:
        return (0.0,)
    chosen = adaptive_beta(values) if beta is None else beta
    top = max(values)
    weights = [math.exp(chosen * (value - top)) for value in values]
    advantages = []
    for index, weight in enumerate(weights):
        others = math.fsum(weights[:index] + weights[index + 1 :])
        advantages.append(weight / (others / (len(values) - 1) + LOO_EPSILON) - 1.0)
    return tuple(advantages)


@register_objective
class TTTDObjective(TrainingObjective):
    """Adaptive-β leave-one-out entropic advantages per comparison group (``group_id``).

    Trains on the Slime loss family ``tttd`` (un-clipped importance sampling plus the centred
    frozen-base KL). The loss is only valid on-policy, so multi-epoch schedules are refused.
    """

    name = "tttd"
    loss_family = "tttd"
    supports_multiple_epochs = False

    def prepare(self, batch: TrainingBatch, state: Mapping[str, Any]) -> StepSignal:
        """One advantage per trajectory, in batch order, and per-step metrics.

        Always trains: a step of one constant group is a zero-advantage step, which the run
        controller still expects to complete.
        """
        advantages: list[float] = []
        betas: list[float] = []
        for group in trajectory_groups(batch):
            rewards = [trajectory_reward(sample) for sample in group]
            beta = adaptive_beta(rewards)
            betas.append(beta)
            advantages.extend(entropic_advantages(rewards, beta))
        if not betas:
            raise ValueError(f"tttd batch {batch.batch_id} holds no comparison group")
        steps = next_steps(state)
        signal = tuple(advantages)
        metrics = {
            "steps": steps,
            "groups": len(betas),
            "beta_mean": math.fsum(betas) / len(betas),
            "beta_max": max(betas),
            "advantage_min": min(signal),
            "advantage_max": max(signal),
            "advantages": signal,
        }
        return StepSignal("train", {"steps": steps}, metrics, signal)
