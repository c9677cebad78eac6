"""The qualification gate (docs/design.md §7): after Reef reports a step trained, check that the
training really happened before the step is committed.

`qualify_step` is a pure function of the step's outcome, the bridge's health snapshot and the
checkpoint marker's existence. It fails closed: every check raises `QualificationError` naming the
value, and nothing is committed. The run controller (`harness.run.controller`) calls it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from harness.storage.resume_state import RunIdentity, StepOutcome


class QualificationError(RuntimeError):
    """A trained step failed the qualification gate; it is not committed."""


def qualify_step(
    outcome: StepOutcome,
    health: Mapping[str, Any],
    identity: RunIdentity,
    expected_completed: int,
    checkpoint_marker: Path,
    recovered: bool = False,
) -> dict[str, Any]:
    """The qualification gate (fail closed): every check raises `QualificationError` naming the
    value. Returns the step's train metrics. A degenerate step (every group constant) skips the
    gradient checks; a recovered step whose metrics the restarted bridge no longer holds skips
    the metric checks and returns `{}` (the caller warns about it)."""
    g, r = identity.groups_per_step, identity.rollouts_per_group
    shape = [len(group) for group in outcome.group_rewards]
    if outcome.sampled_rollouts != g * r or shape != [r] * g:
        _fail(f"rollouts {outcome.sampled_rollouts} (groups {shape}) != G·R = {g}·{r}")
    if health.get("ok") is not True or health.get("phase") != "serving":
        _fail(f"bridge ok={health.get('ok')!r} phase={health.get('phase')!r}, need ok and serving")
    if health.get("completed_train_steps") != expected_completed:
        _fail(
            f"completed_train_steps {health.get('completed_train_steps')} != {expected_completed}"
        )
    last = health.get("last_train_rollout_id")
    if last != outcome.step and not (recovered and last is None):
        _fail(f"last_train_rollout_id {last!r} != step {outcome.step}")
    if not checkpoint_marker.is_file():
        _fail(f"checkpoint marker {checkpoint_marker} does not exist")
    metrics = health.get("last_train_metrics")
    if not isinstance(metrics, Mapping):
        _fail(f"last_train_metrics is {metrics!r}, not a mapping")
    if recovered and (last is None or not metrics):
        return {}
    degenerate = outcome.nonconstant_groups == 0
    retained = outcome.nonconstant_groups or 1
    batch = _metric(metrics, "train/global_batch_size")
    if batch != retained * r:
        _fail(f"train/global_batch_size {batch} != retained groups {retained} × R {r}")
    if not (value := _metric(metrics, "train/lora_trainable_parameters")) > 0:
        _fail(f"train/lora_trainable_parameters {value} is not > 0")
    if (value := _metric(metrics, "train/lora_base_trainable_parameters")) != 0:
        _fail(f"train/lora_base_trainable_parameters {value} != 0 (the base must stay frozen)")
    for key in ("train/grad_norm", "train/lora_b_l1"):
        value = _metric(metrics, key, required=not degenerate)
        if value is not None and not math.isfinite(value):
            _fail(f"{key} {value} is not finite")
        if not degenerate and not value > 0:
            _fail(f"{key} {value} is not > 0")
    if not degenerate and not (value := _metric(metrics, "train/lora_b_nonzero")) > 0:
        _fail(f"train/lora_b_nonzero {value} is not > 0")
    return dict(metrics)


def _metric(metrics: Mapping[str, Any], key: str, required: bool = True) -> Any:
    value = metrics.get(key)
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        _fail(f"train metric {key} is {value!r}, not a number")
    return value


def _fail(message: str) -> NoReturn:
    raise QualificationError(f"qualification failed: {message}")
