"""The tttd loss family on Reef's Tinker backend (no torch, no Tinker SDK).

Tinker computes the loss on its side. Its built-in ``importance_sampling`` loss is
``−Σ_t exp(logp_t − logp_sampled_t) · A_t`` over the positions of a datum, un-clipped, which is
exactly the tttd surrogate once the per-token advantages ``A_t`` carry the loss mask and the
centred frozen-base KL. So tttd trains on that built-in loss and only shapes its inputs here:

    d_t = logp_rollout_t − logp_base_t,   d̄ = Σ mask_t d_t / Σ mask_t   (every row of the batch),
    A_t = mask_t · A + kl_coef · mask_t · (d̄ − d_t),

with ``A`` the row's leave-one-out entropic advantage from ``tttd.objective``. This is the
arithmetic of ``tttd.slime.terms.centred_kl_advantages`` and of TTT-Discover's own
``incorporate_kl_penalty`` (docs/training.md, "tttd on Tinker"; docs/differences.md lists where
they differ). Reef's Tinker client fetches the frozen base's log-probs (``needs_base_logprobs``)
and sends the inputs with ``forward_backward(..., loss_fn="importance_sampling")``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reef.train.tinker_backend.losses import TinkerLoss, TokenRow

from tttd.objective import entropic_advantages


def _check_kl_coef(kl_coef: float) -> None:
    if isinstance(kl_coef, bool) or not math.isfinite(kl_coef) or kl_coef <= 0:
        raise ValueError(
            f"the tttd loss folds the frozen-base KL into the advantages and needs kl-coef > 0 "
            f"(tttd uses 0.1), got {kl_coef!r}; set the Tinker backend's kl_coef"
        )


def kl_folded_advantages(
    advantages: Sequence[float],
    masks: Sequence[Sequence[int]],
    rollout_logprobs: Sequence[Sequence[float]],
    base_logprobs: Sequence[Sequence[float]],
    kl_coef: float,
) -> list[list[float]]:
    """Per-response-token advantages of every row: the masked row advantage plus the centred KL.

    One entry per row in each argument; within a row, masks and both log-prob lists have one
    value per response token. ``d̄`` is the mask-weighted mean over all rows together (0 when no
    token is selected). Raises ``ValueError`` for ``kl_coef ≤ 0`` or lists that do not line up.
    """
    _check_kl_coef(kl_coef)
    counts = {len(advantages), len(masks), len(rollout_logprobs), len(base_logprobs)}
    if len(counts) != 1:
        raise ValueError(
            f"the tttd Tinker loss needs one advantage, mask, rollout and base log-prob list per "
            f"row, got {len(advantages)}, {len(masks)}, {len(rollout_logprobs)} and "
            f"{len(base_logprobs)}"
        )
    diffs: list[list[float]] = []
    for index, (mask, rollout, base) in enumerate(
        zip(masks, rollout_logprobs, base_logprobs, strict=True)
    ):
        if not len(mask) == len(rollout) == len(base):
            raise ValueError(
                f"row {index} has {len(mask)} mask values, {len(rollout)} rollout log-probs and "
                f"{len(base)} base log-probs; each needs one per response token"
            )
        diffs.append([float(r) - float(b) for r, b in zip(rollout, base, strict=True)])
    selected = math.fsum(float(value) for mask in masks for value in mask)
    weighted = math.fsum(
        float(value) * diff
        for mask, row in zip(masks, diffs, strict=True)
        for value, diff in zip(mask, row, strict=True)
    )
    mean_diff = weighted / selected if selected > 0 else 0.0
    return [
        [
            float(value) * (float(advantage) + kl_coef * (mean_diff - diff))
            for value, diff in zip(mask, row, strict=True)
        ]
        for advantage, mask, row in zip(advantages, masks, diffs, strict=True)
    ]


class TTTDTinkerLoss(TinkerLoss):
    """tttd on Tinker's built-in ``importance_sampling`` loss with the centred base KL folded in.

    Registered for ``backend="tinker"`` under the family name ``tttd`` (``tttd/__init__.py``);
    Reef's Tinker client resolves it, fetches the frozen base's log-probs and calls
    :meth:`inputs` once per optimizer batch (the whole step for the tttd recipe).
    """

    loss_fn = "importance_sampling"
    needs_base_logprobs = True

    def check_kl_coef(self, kl_coef: float) -> None:
        """Refuse a KL coefficient the tttd objective does not define (it needs one > 0)."""
        _check_kl_coef(kl_coef)

    def inputs(
        self, rows: Sequence[TokenRow], base_logprobs: Sequence[Sequence[float]], *, kl_coef: float
    ) -> list[dict[str, list[Any]]]:
        """The ``loss_fn_inputs`` of each row: target tokens, rollout log-probs, advantages."""
        if len(base_logprobs) != len(rows):
            raise ValueError(
                f"the tttd Tinker loss needs the frozen base's log-probs for every row, got "
                f"{len(base_logprobs)} lists for {len(rows)} rows; set the backend's kl_coef > 0 "
                "so Reef fetches them"
            )
        per_token = kl_folded_advantages(
            [row.advantage for row in rows],
            [row.mask for row in rows],
            [row.logprobs for row in rows],
            base_logprobs,
            kl_coef,
        )
        return [row.inputs(values) for row, values in zip(rows, per_token, strict=True)]


@dataclass(frozen=True)
class RecordedRollout:
    """One captured rollout: all tokens (prompt then response), and per response token its loss
    mask, the rollout engine's log-prob and the frozen base's log-prob; and its reward."""

    tokens: tuple[int, ...]
    mask: tuple[int, ...]
    rollout_logprobs: tuple[float, ...]
    base_logprobs: tuple[float, ...]
    reward: float


def recorded_batch_inputs(
    groups: Sequence[Sequence[RecordedRollout]], kl_coef: float
) -> list[dict[str, list[Any]]]:
    """The ``importance_sampling`` inputs tttd sends for a recorded batch, group-major.

    Each group's advantages come from :func:`tttd.objective.entropic_advantages` (adaptive β),
    as ``TTTDObjective.prepare`` computes them, and go through :class:`TTTDTinkerLoss`.
    """
    rows: list[TokenRow] = []
    base: list[tuple[float, ...]] = []
    for group in groups:
        advantages = entropic_advantages([rollout.reward for rollout in group])
        for rollout, advantage in zip(group, advantages, strict=True):
            rows.append(TokenRow(rollout.tokens, rollout.mask, rollout.rollout_logprobs, advantage))
            base.append(rollout.base_logprobs)
    return TTTDTinkerLoss().inputs(rows, base, kl_coef=kl_coef)
