"""The tttd loss terms with torch on CPU: the importance-sampling surrogate and the centred KL.

The Megatron/Slime adapters around these functions (``tttd.slime.objective``) need a GPU stack
and are not run here; the arithmetic they delegate to is.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tttd.slime.terms import centred_kl_advantages, importance_sampling_loss  # noqa: E402

pytestmark = pytest.mark.torch


def test_matching_log_probs_give_ratio_one_and_gradient_minus_advantage():
    log_probs = torch.tensor(
        [-0.7, -1.2, -0.1, -2.5, -0.05], dtype=torch.float64, requires_grad=True
    )
    advantages = torch.tensor([1.5, 1.5, -0.25, -0.25, 3.0], dtype=torch.float64)
    mask = torch.ones(5, dtype=torch.float64)
    terms = importance_sampling_loss(log_probs, log_probs.detach().clone(), advantages, mask)
    assert torch.equal(terms.ratio, torch.ones(5, dtype=torch.float64))
    assert torch.equal(terms.ppo_kl, torch.zeros(5, dtype=torch.float64))
    assert terms.loss.item() == pytest.approx(-advantages.sum().item())
    terms.loss.backward()
    assert torch.allclose(log_probs.grad, -advantages)


def test_gradient_is_ratio_weighted_and_masked_tokens_get_none():
    log_probs = torch.tensor([-1.0, -2.0, -3.0], requires_grad=True)
    rollout = torch.tensor([-1.5, -2.0, -2.0])
    advantages = torch.tensor([2.0, -1.0, 4.0])
    mask = torch.tensor([1.0, 1.0, 0.0])
    terms = importance_sampling_loss(log_probs, rollout, advantages, mask)
    terms.loss.backward()
    ratio = torch.exp(log_probs.detach() - rollout)
    assert torch.allclose(log_probs.grad, -mask * ratio * advantages)
    assert log_probs.grad[2].item() == 0.0
    # The ratio is not clipped: a token far above its rollout probability keeps its full weight.
    assert terms.ratio[0].item() == pytest.approx(torch.exp(torch.tensor(0.5)).item())


def test_missing_rollout_log_probs_are_refused():
    log_probs = torch.zeros(3)
    with pytest.raises(ValueError, match="needs rollout_log_probs"):
        importance_sampling_loss(log_probs, None, torch.ones(3), torch.ones(3))
    with pytest.raises(ValueError, match="missing or truncated"):
        importance_sampling_loss(log_probs, torch.zeros(0), torch.ones(3), torch.ones(3))


def kl_inputs() -> dict[str, list]:
    return {
        "advantages": [torch.full((3,), 0.5), torch.full((4,), -1.0)],
        "rollout_log_probs": [
            torch.tensor([-0.2, -1.0, -0.4]),
            torch.tensor([-2.0, -0.1, -0.3, -0.9]),
        ],
        "ref_log_probs": [torch.tensor([-0.3, -0.7, -0.4]), torch.tensor([-1.0, -0.6, -0.3, -2.0])],
        "loss_masks": [torch.tensor([1.0, 1.0, 0.0]), torch.tensor([1.0, 1.0, 1.0, 1.0])],
    }


def test_centred_kl_term_has_zero_mask_weighted_mean():
    inputs = kl_inputs()
    combined = centred_kl_advantages(**inputs, kl_coef=0.1)
    added = torch.cat([new - old for new, old in zip(combined, inputs["advantages"], strict=True)])
    mask = torch.cat(inputs["loss_masks"])
    assert (mask * added).sum().item() == pytest.approx(0.0, abs=1e-6)
    # A masked token's advantage is left as Reef sent it.
    assert combined[0][2].item() == pytest.approx(0.5)


def test_centred_kl_term_matches_the_formula():
    inputs = kl_inputs()
    combined = centred_kl_advantages(**inputs, kl_coef=0.1)
    diffs = [
        r - f for r, f in zip(inputs["rollout_log_probs"], inputs["ref_log_probs"], strict=True)
    ]
    mask = torch.cat(inputs["loss_masks"])
    mean_diff = (mask * torch.cat(diffs)).sum() / mask.sum()
    for new, old, diff, m in zip(
        combined, inputs["advantages"], diffs, inputs["loss_masks"], strict=True
    ):
        assert torch.allclose(new, old + 0.1 * m * (mean_diff - diff), atol=1e-6)


def test_centred_kl_mean_is_taken_over_the_data_parallel_group():
    # Two ranks: each all-reduce adds the other rank's [Σ mask·d, Σ mask] to this rank's sums.
    other_rank = torch.tensor([10.0, 5.0], dtype=torch.float64)
    inputs = kl_inputs()
    seen: list[torch.Tensor] = []

    def all_reduce(values: torch.Tensor) -> None:
        seen.append(values.clone())
        values += other_rank

    combined = centred_kl_advantages(**inputs, kl_coef=0.1, all_reduce=all_reduce)
    local_sum, local_count = seen[0].tolist()
    mean_diff = (local_sum + 10.0) / (local_count + 5.0)
    diff = inputs["rollout_log_probs"][1][0] - inputs["ref_log_probs"][1][0]
    assert combined[1][0].item() == pytest.approx(-1.0 + 0.1 * (mean_diff - diff.item()), abs=1e-6)


@pytest.mark.parametrize("kl_coef", [0.0, -0.1, float("nan")])
def test_non_positive_kl_coef_is_refused(kl_coef):
    with pytest.raises(ValueError, match="needs kl_coef > 0"):
        centred_kl_advantages(**kl_inputs(), kl_coef=kl_coef)


def test_missing_rollout_or_reference_log_probs_are_refused():
    inputs = kl_inputs()
    with pytest.raises(ValueError, match="needs rollout_log_probs"):
        centred_kl_advantages(**{**inputs, "rollout_log_probs": None}, kl_coef=0.1)
    with pytest.raises(ValueError, match="missing or truncated"):
        short = [inputs["rollout_log_probs"][0][:2], inputs["rollout_log_probs"][1]]
        centred_kl_advantages(**{**inputs, "rollout_log_probs": short}, kl_coef=0.1)
    with pytest.raises(ValueError, match="ref-load"):
        centred_kl_advantages(**{**inputs, "ref_log_probs": None}, kl_coef=0.1)
