"""Preflight rows of a run on Reef's Tinker backend (``serve-tinker.yaml``): SDK, key, model, cost.

They replace the GPU and model rows of a run on GPUs: Tinker trains and samples the guidance
model on its own machines. None of them calls Tinker — a live check needs the network and the
key — so each row says what it checked here and what only the run's first call can check:

- ``Tinker SDK``: the ``tinker`` package Reef's Tinker backend imports is installed, at the
  version Reef 0.1.3's ``[tinker]`` extra pins (``TINKER_SDK``);
- ``Tinker key``: the variable ``training.options.api-key-env`` names is set (the value is never
  printed or written);
- ``Tinker model``: the base model is one Tinker serves (``harness.settings.tinker.TINKER_MODELS``,
  tinker-cookbook's list), else the nearest names it serves;
- ``Tinker cost``: the most one step can cost at the prices in
  ``training.config.tinker.price_per_million_tokens`` (Tinker's published prices;
  ``serve-tinker.yaml`` holds Qwen/Qwen3-8B's), counting every rollout at its full token limits.
"""

from __future__ import annotations

import difflib
import importlib.metadata
from collections.abc import Callable, Mapping
from typing import Any

from harness.preflight.report import CheckResult, missing_check, ready_check
from harness.settings.run_settings import RunSettings
from harness.settings.tinker import DEFAULT_API_KEY_ENV, TINKER_MODELS

#: Where the prices are set, as the fix names it.
PRICE_KEY = "training.config.tinker.price_per_million_tokens"
#: What Tinker bills, in the order the cost row lists them.
BILLED = ("prefill", "sample", "train")
#: The Tinker SDK version Reef 0.1.3's ``[tinker]`` extra pins (this project's ``tinker`` extra).
TINKER_SDK = "0.33.1"
_NOT_ASKED = "is not asked here (that needs the network)"


def tinker_checks(
    settings: RunSettings, environ: Mapping[str, str]
) -> list[tuple[str, Callable[[], CheckResult]]]:
    """The Tinker rows of ``settings`` (a Tinker run's), in table order, for `run_preflight`."""
    tinker = settings.tinker or {}
    key_env = str(tinker.get("api_key_env") or DEFAULT_API_KEY_ENV)
    return [
        ("Tinker SDK", check_tinker_sdk),
        ("Tinker key", lambda: check_tinker_key(key_env, environ)),
        ("Tinker model", lambda: check_tinker_model(settings.model)),
        ("Tinker cost", lambda: check_tinker_cost(settings)),
    ]


def check_tinker_sdk() -> CheckResult:
    """The ``tinker`` package is installed at the pinned version."""
    fix = (
        f"./run.sh --config serve-tinker.yaml sets it up, or pip install -e '.[tinker]' in this "
        f"checkout (tinker {TINKER_SDK})"
    )
    try:
        version = importlib.metadata.version("tinker")
    except importlib.metadata.PackageNotFoundError:
        return missing_check(
            "Tinker SDK", "the tinker package is not installed; Reef's Tinker backend needs it", fix
        )
    if version != TINKER_SDK:
        return missing_check(
            "Tinker SDK",
            f"tinker {version} is installed; Reef 0.1.3's Tinker backend is built for {TINKER_SDK}",
            fix,
        )
    return ready_check("Tinker SDK", f"tinker {version}")


def check_tinker_key(key_env: str, environ: Mapping[str, str]) -> CheckResult:
    """The Tinker key's variable is set and not blank; its value is never shown."""
    if environ.get(key_env, "").strip():
        return ready_check(
            "Tinker key",
            f"{key_env} is set (value not shown); whether Tinker accepts it {_NOT_ASKED}: the "
            "run's first Tinker call checks it",
        )
    return missing_check(
        "Tinker key",
        f"{key_env} is not set in this environment (training.options.api-key-env names it)",
        f"export {key_env}=<your Tinker API key> in the shell that starts the run; the key is "
        "read from the environment only, never from a settings file",
    )


def check_tinker_model(model: str) -> CheckResult:
    """``model`` is one of the base models Tinker serves; else the nearest names it serves."""
    if model in TINKER_MODELS:
        return ready_check(
            "Tinker model",
            f"{model} is in Tinker's model list (tinker-cookbook model_info); whether Tinker "
            f"has capacity for it now (ServiceClient.get_server_capabilities) {_NOT_ASKED}",
        )
    return missing_check(
        "Tinker model",
        f"{model!r} is not a model Tinker serves (tinker-cookbook model_info)",
        f"set training.config.model to one it serves, e.g. {', '.join(nearest_models(model))} "
        "(inference.model-path follows it)",
    )


def nearest_models(model: str, count: int = 3) -> list[str]:
    """The ``count`` names Tinker serves that are closest to ``model`` (case ignored)."""
    by_lower = {name.lower(): name for name in TINKER_MODELS}
    close = difflib.get_close_matches(model.lower(), list(by_lower), n=count, cutoff=0.0)
    return [by_lower[name] for name in close]


def step_tokens(settings: RunSettings) -> dict[str, int]:
    """The most tokens one step bills, by kind: G·R rollouts, each a prompt of at most
    ``context_length − max_response_len`` tokens (prefill) and at most ``max_response_len``
    sampled; the frozen base's log-probs of every rollout (prefill, when the KL coefficient is
    set); one training pass over every rollout (train)."""
    rollouts = settings.rollouts_per_step
    context, response = settings.sequence_length, settings.guidance_max_tokens
    kl = bool((settings.tinker or {}).get("kl_coef"))
    return {
        "prefill": rollouts * (context - response) + (rollouts * context if kl else 0),
        "sample": rollouts * response,
        "train": rollouts * context,
    }


def check_tinker_cost(settings: RunSettings) -> CheckResult:
    """The most one step costs at the configured prices; without prices, how to set them.
    Informational: ready either way."""
    tokens = step_tokens(settings)
    prices: Mapping[str, Any] = (settings.tinker or {}).get("price_per_million_tokens") or {}
    counted = [kind for kind in BILLED if prices.get(kind) is not None]
    volume = ", ".join(f"{kind} ≤ {tokens[kind]:,}" for kind in BILLED)
    grid = f"{settings.groups_per_step}×{settings.rollouts_per_group} rollouts"
    if not counted:
        return ready_check(
            "Tinker cost",
            f"not estimated: set {PRICE_KEY} (prefill, sample, train: Tinker's published "
            f"prices for {settings.model}) to estimate cost; one step bills at most {volume} "
            f"tokens ({grid})",
        )
    per_step = sum(tokens[kind] * float(prices[kind]) / 1e6 for kind in counted)
    rates = ", ".join(f"{kind} ${float(prices[kind]):g}/M" for kind in counted)
    unpriced = [kind for kind in BILLED if kind not in counted]
    left_out = f"; {', '.join(unpriced)} not priced, not counted" if unpriced else ""
    return ready_check(
        "Tinker cost",
        f"at most ${per_step:,.2f} per step, ${per_step * settings.steps:,.2f} for "
        f"{settings.steps} step(s) ({grid}; {volume} tokens at {rates}{left_out})",
    )
