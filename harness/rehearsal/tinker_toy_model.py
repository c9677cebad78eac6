"""The deterministic toy arithmetic behind the Tinker stand-in: no model, only fixed numbers.

A model state is :class:`Weights`: a base model name and a version string. The version starts
as ``base`` (a new LoRA adapter leaves the base model unchanged, as LoRA's zero-initialised B
matrix does) and each optimizer step replaces it by a digest of the old version, the learning
rate and the losses accumulated since the last step. Every number follows from a hash:

    log p(y | x, weights) = −0.05 − (blake2b(base, version, x, y) mod 4000) / 1000

so log-probs lie in (−4.05, −0.05], change after every step that saw a loss, and are the same
on every machine. The two losses the stand-in computes from the sent inputs, over the positions
``t`` of a datum with targets ``y_t`` after tokens ``x_t``:

    cross_entropy:        ℓ_t = −w_t · log p(y_t | x_t)
    importance_sampling:  ℓ_t = −exp(log p(y_t | x_t) − q_t) · A_t

(``weights`` w, sampling log-probs q, ``advantages`` A), as Tinker documents them. Sampling
returns tokens from the same hash. Nothing here learns: a step only changes the numbers.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: The token ids the toy sampler draws from when no script gives the text.
TOY_VOCABULARY = 1000
#: The losses the stand-in computes, and the inputs each takes besides ``target_tokens``.
LOSS_INPUTS: Mapping[str, tuple[str, ...]] = {
    "cross_entropy": ("weights",),
    "importance_sampling": ("logprobs", "advantages"),
}


@dataclass(frozen=True)
class Weights:
    """One state of a model: its base model and the version its optimizer steps produced."""

    base_model: str
    version: str = "base"

    def logprob(self, previous: int, token: int) -> float:
        """The log-prob of ``token`` after ``previous`` under these weights (see the module)."""
        key = f"{self.base_model}|{self.version}|{previous}|{token}".encode()
        value = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big")
        return -0.05 - (value % 4000) / 1000

    def stepped(self, learning_rate: float, losses: Sequence[float]) -> Weights:
        """The weights after one optimizer step over ``losses``; unchanged when there were none
        (a step without gradients leaves LoRA's weights where they were)."""
        if not losses:
            return self
        key = f"{self.version}|{learning_rate!r}|{math.fsum(losses)!r}|{len(losses)}".encode()
        return Weights(self.base_model, hashlib.blake2b(key, digest_size=6).hexdigest())


def loss_terms(
    weights: Weights, loss_fn: str, tokens: Sequence[int], inputs: Mapping[str, Sequence[float]]
) -> tuple[list[float], list[float]]:
    """``(logprobs, elementwise_loss)`` of one datum, one value per input token.

    ``inputs`` are the datum's ``loss_fn_inputs`` as flat lists. Raises ``ValueError`` naming
    the loss, the input and the fix when the loss is not one the stand-in computes, an input is
    missing or extra, or an input's length differs from the datum's token count.
    """
    if loss_fn not in LOSS_INPUTS:
        raise ValueError(
            f"loss_fn {loss_fn!r}: the Tinker stand-in computes {' and '.join(LOSS_INPUTS)} only"
        )
    wanted = ("target_tokens", *LOSS_INPUTS[loss_fn])
    if set(inputs) != set(wanted):
        raise ValueError(
            f"{loss_fn} takes loss_fn_inputs {', '.join(wanted)}; got {', '.join(sorted(inputs))}"
        )
    for name in wanted:
        if len(inputs[name]) != len(tokens):
            raise ValueError(
                f"loss_fn_inputs[{name!r}] has {len(inputs[name])} values for a model input of "
                f"{len(tokens)} tokens; send one per input token"
            )
    logprobs = [
        weights.logprob(int(x), int(y))
        for x, y in zip(tokens, inputs["target_tokens"], strict=True)
    ]
    if loss_fn == "cross_entropy":
        losses = [-w * lp for w, lp in zip(inputs["weights"], logprobs, strict=True)]
    else:
        losses = [
            -math.exp(lp - q) * a
            for lp, q, a in zip(logprobs, inputs["logprobs"], inputs["advantages"], strict=True)
        ]
    return logprobs, losses


def prompt_logprobs(weights: Weights, prompt: Sequence[int]) -> list[float | None]:
    """Each prompt token's log-prob after the one before it; ``None`` for the first."""
    return [None] + [weights.logprob(x, y) for x, y in itertools.pairwise(prompt)]


def toy_completion(weights: Weights, prompt: Sequence[int], seed: int | None) -> list[int]:
    """Between 1 and 8 token ids in ``[0, TOY_VOCABULARY)``, fixed by the prompt and the seed."""
    key = f"{weights.base_model}|{weights.version}|{seed}|{list(prompt)}".encode()
    digest = hashlib.blake2b(key, digest_size=16).digest()
    return [value * 7 % TOY_VOCABULARY for value in digest[: 1 + digest[0] % 8]]
