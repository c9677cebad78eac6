"""The tttd objective: adaptive β and leave-one-out entropic advantages (pure math)."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from reef.core.batches import StepScheduling, TrainingBatch, TrajectoryItem
from reef.train.algos.registry import resolve_objective

from tttd.objective import (
    BETA_CAP,
    TTTDObjective,
    adaptive_beta,
    entropic_advantages,
    kl_from_uniform,
)
from tttd.recipe import OBJECTIVE_REFERENCE

LN2 = math.log(2.0)


def reference_kl(rewards: list[float], beta: float) -> float:
    """KL(q‖uniform) straight from the definition, in log space: Σ q_i ln(n q_i)."""
    logits = [beta * reward for reward in rewards]
    top = max(logits)
    log_z = top + math.log(sum(math.exp(logit - top) for logit in logits))
    total = 0.0
    for logit in logits:
        log_q = logit - log_z
        total += math.exp(log_q) * (log_q + math.log(len(rewards)))
    return total


def reference_advantages(rewards: list[float], beta: float) -> list[float]:
    """The formula of docs/training.md ("How the tttd method works") written out literally, as
    an independent check."""
    n = len(rewards)
    top = max(rewards)
    e = [math.exp(beta * (reward - top)) for reward in rewards]
    total = sum(e)
    return [e[i] / ((total - e[i]) / (n - 1) + 1e-12) - 1 for i in range(n)]


def test_hand_computed_advantages_for_a_given_beta():
    # β = ln 2 on rewards 0, 1, 2: weights 1/4, 1/2, 1.
    advantages = entropic_advantages([0.0, 1.0, 2.0], beta=LN2)
    assert advantages == pytest.approx([0.25 / 0.75 - 1, 0.5 / 0.625 - 1, 1 / 0.375 - 1], abs=1e-9)
    assert advantages == pytest.approx([-2 / 3, -0.2, 5 / 3], abs=1e-9)


def test_two_member_group_gets_the_extreme_but_finite_advantages():
    # With n = 2 the KL only approaches ln 2 as β grows; β stops where the loser's weight is
    # negligible in double precision, so the loser gets −1 and the winner 1/1e-12 − 1.
    beta = adaptive_beta([0.0, 1.0])
    assert 30 < beta < BETA_CAP
    assert kl_from_uniform([0.0, 1.0], beta) == pytest.approx(LN2, abs=1e-15)
    loser, winner = entropic_advantages([0.0, 1.0])
    assert loser == pytest.approx(-1.0, abs=1e-12)
    assert winner == pytest.approx(1e12 - 1, rel=1e-5)


@pytest.mark.parametrize(
    "rewards",
    [
        [0.0, 0.0, 0.0, 1.0],
        [1.0, 2.0, 3.0, 4.0, 5.0],
        [27.8, 31.2, 0.0, 29.9, 30.0, 0.0, 12.5, 33.3],
        [-5.0, 3.0, 0.25, 0.26],
        [0.0, 1e-3, 2e-3],
        [0.0] * 15 + [1.0],
    ],
)
def test_beta_solves_kl_equals_ln2(rewards):
    beta = adaptive_beta(rewards)
    assert 0 < beta < BETA_CAP
    assert abs(reference_kl(rewards, beta) - LN2) < 1e-9
    assert abs(kl_from_uniform(rewards, beta) - LN2) < 1e-9


@pytest.mark.parametrize(
    "rewards",
    [
        [0.0, 1.0, 2.0],
        [0.0, 0.0, 0.0, 1.0],
        [27.8, 31.2, 0.0, 29.9, 30.0, 0.0, 12.5, 33.3],
        [-5.0, 3.0, 0.25, 0.26, 1.0, 1.0],
    ],
)
def test_leave_one_out_formula_matches_an_independent_implementation(rewards):
    beta = adaptive_beta(rewards)
    assert list(entropic_advantages(rewards)) == pytest.approx(
        reference_advantages(rewards, beta), rel=1e-9, abs=1e-9
    )


@settings(max_examples=60, deadline=None)
@given(
    rewards=st.lists(st.integers(min_value=0, max_value=100), min_size=3, max_size=16),
    shift=st.floats(min_value=-1e3, max_value=1e3, allow_nan=False),
    scale=st.floats(min_value=1e-2, max_value=1e2, allow_nan=False),
)
def test_advantages_are_invariant_to_reward_shift_and_positive_scaling(rewards, shift, scale):
    top = max(rewards)
    # The KL can reach ln 2 only when fewer than half the rollouts share the maximum.
    assume(2 * rewards.count(top) < len(rewards))
    base = entropic_advantages([float(reward) for reward in rewards])
    moved = entropic_advantages([reward * scale + shift for reward in rewards])
    assert list(moved) == pytest.approx(list(base), rel=1e-6, abs=1e-6)


def test_one_member_group_gets_beta_zero_and_advantage_zero():
    assert adaptive_beta([42.0]) == 0.0
    assert entropic_advantages([42.0]) == (0.0,)


def test_constant_group_gets_zero_advantages():
    advantages = entropic_advantages([7.0, 7.0, 7.0, 7.0])
    assert advantages == pytest.approx([0.0] * 4, abs=1e-11)


@pytest.mark.parametrize(
    "rewards",
    [
        [0.0, 5e5, 1e6, 1e6 - 1.0],
        [-1e6, 0.0, 1e6, 3.0, 3.0],
        [0.0] * 7 + [1e9],
        [1e300, 1e300, 1e300],
        [3.0, 3.0, 3.0, 3.0, 3.0, 3.0],
    ],
)
def test_extreme_rewards_stay_finite(rewards):
    advantages = entropic_advantages(rewards)
    assert all(math.isfinite(advantage) for advantage in advantages)
    assert all(advantage >= -1.0 for advantage in advantages)


def test_non_finite_reward_is_refused():
    with pytest.raises(ValueError, match="rewards must be finite"):
        entropic_advantages([0.0, math.nan, 1.0])


def sample(reward: float, group: str) -> TrajectoryItem:
    return TrajectoryItem(
        {
            "schema_version": "ATIF-v1.7",
            "agent": {"name": "test", "version": "0"},
            "steps": [{"step_id": 1, "source": "agent", "message": "guidance"}],
            "extra": {"reef": {"reward": reward}},
        },
        group_id=group,
    )


def test_objective_prepares_one_advantage_per_rollout_group_by_group():
    groups = {"g0": [0.0, 10.0, 20.0, 20.5], "g1": [3.0, 1.0, 2.0, 9.0]}
    batch = TrainingBatch(
        "s:tttd:0", tuple(sample(r, g) for g, rewards in groups.items() for r in rewards)
    )
    signal = TTTDObjective().prepare(batch, {"steps": 4})
    assert signal.action == "train"
    assert signal.next_algorithm_state == {"steps": 5}
    expected = [*entropic_advantages(groups["g0"]), *entropic_advantages(groups["g1"])]
    assert list(signal.advantages) == pytest.approx(expected)
    assert signal.metrics["groups"] == 2


def test_objective_is_registered_as_tttd_and_resolves_from_its_reference():
    objective = resolve_objective("tttd")
    assert isinstance(objective, TTTDObjective)
    assert resolve_objective(OBJECTIVE_REFERENCE) is objective
    assert objective.loss_family == "tttd"


def test_objective_refuses_multi_epoch_schedules():
    objective = resolve_objective("tttd")
    objective.validate_scheduling(StepScheduling(unit="sample", batch_size="actual"))
    with pytest.raises(ValueError, match="does not support StepScheduling"):
        objective.validate_scheduling(StepScheduling(epochs=2))
