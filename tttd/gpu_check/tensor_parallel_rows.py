"""The rows of the ``loss-tp2`` check, judged from every rank's figures (``tensor_parallel``).

Each rank returns the same figures for each case; a row holds when it holds on every rank, and
its detail shows the ranks side by side so that a rank-dependent fault (a reduction done on one
rank only, a shard read at the wrong offset) reads off the table.
"""

from __future__ import annotations

import math
from typing import Any

from tttd.gpu_check import CheckResult
from tttd.gpu_check.launcher import MULTICAST_OFF

#: The loss: relative difference to the full-vocabulary token sum (float32 log-probs).
LOSS_RTOL = 1e-5
#: Gradients: largest absolute difference relative to the largest entry (as the ``loss`` check).
GRAD_RTOL = 1e-4
#: Metric names the tttd loss reports.
METRIC_NAMES = ("train/loss", "train/importance_ratio", "train/ppo_kl")


def group_row(ranks: list[dict[str, Any]], device: str) -> CheckResult:
    """The process group and Megatron's parallel state as each rank saw them."""
    backend = "nccl" if device == "cuda" else "gloo"
    groups = [rank["group"] for rank in ranks]
    world = len(ranks)
    problems = []
    for index, group in enumerate(groups):
        expected = {
            "rank": index,
            "world_size": world,
            "backend": backend,
            "rank_sum": float(world * (world - 1) // 2),
            "tp_size": world,
            "tp_rank": index,
            "dp_size": 1,
            "environment": MULTICAST_OFF,
        }
        problems.extend(
            f"rank {index} {key}={group.get(key)!r} (expected {value!r})"
            for key, value in expected.items()
            if group.get(key) != value
        )
    versions = ranks[0]["versions"]
    described = ", ".join(f"{key} {value}" for key, value in versions.items())
    return CheckResult(
        "loss-tp2 two ranks at TP 2",
        not problems,
        "; ".join(problems)
        or f"{world} processes over {backend}, TP {world} × DP 1, multicast off; {described}",
        {"groups": groups, "versions": versions},
    )


def log_gate_row(gate: tuple[bool, str]) -> CheckResult:
    ok, detail = gate
    return CheckResult(
        "loss-tp2 Slime's train loop logs train/* on DP 0, TP 0 only (source read)",
        ok,
        detail or "the logging_utils.log call sits under the same test as the main-rank predicate",
    )


def _per_rank(values: list[float], form: str = "{:.6f}") -> str:
    return " / ".join(form.format(value) for value in values)


def case_rows(prefix: str, ranks: list[dict[str, Any]], args: Any) -> list[CheckResult]:
    """Rows for one case; ``ranks`` holds each rank's figures for it, in rank order."""
    token_sum = ranks[0]["token_sum"]
    propagated = [rank["propagated_loss"] for rank in ranks]
    loss_errors = [abs(value - token_sum) / max(abs(token_sum), 1e-12) for value in propagated]
    sums_agree = all(math.isclose(rank["token_sum"], token_sum, rel_tol=1e-9) for rank in ranks)
    rows = [
        CheckResult(
            f"{prefix} advantages = tttd terms",
            all(rank["advantage_max_abs_error"] < 1e-5 for rank in ranks),
            "max |Δ| per rank "
            + _per_rank([rank["advantage_max_abs_error"] for rank in ranks], "{:.2e}"),
        ),
        CheckResult(
            f"{prefix} loss after Slime's rescaling = full-vocabulary token sum, every rank",
            sums_agree and max(loss_errors) <= LOSS_RTOL,
            f"Megatron back-propagates {_per_rank(propagated)} (ranks 0 / 1), tttd terms on the "
            f"whole vocabulary give {token_sum:.6f}; relative Δ {max(loss_errors):.1e}",
            {"propagated": propagated, "token_sum": token_sum, "relative_error": max(loss_errors)},
        ),
        _gradient_row(
            f"{prefix} logits' gradient = token sum's on each vocabulary shard",
            ranks,
            "logits_grad_max_rel_error",
            "shards " + ", ".join(f"[{r['vocab_shard'][0]}, {r['vocab_shard'][1]})" for r in ranks),
        ),
        _hidden_row(prefix, ranks),
        _gradient_row(
            f"{prefix} output weight's gradient = token sum's rows on each rank",
            ranks,
            "weight_grad_max_rel_error",
            "ColumnParallelLinear shard",
        ),
        *_metric_rows(prefix, ranks, token_sum, int(args.n_samples_per_prompt)),
    ]
    return rows


def _gradient_row(name: str, ranks: list[dict[str, Any]], key: str, what: str) -> CheckResult:
    errors = [rank[key] for rank in ranks]
    return CheckResult(
        name,
        max(errors) < GRAD_RTOL,
        f"{what}: max relative |Δ| {_per_rank(errors, '{:.2e}')}",
        {"max_relative_error": errors},
    )


def _hidden_row(prefix: str, ranks: list[dict[str, Any]]) -> CheckResult:
    """The hidden-state gradient: Megatron sums the shards' parts over TP, once."""
    errors = [rank["hidden_grad_max_rel_error"] for rank in ranks]
    factors = [rank["hidden_grad_factor"] for rank in ranks]
    return CheckResult(
        f"{prefix} hidden-state gradient = token sum's (summed once over TP)",
        max(errors) < GRAD_RTOL and all(abs(factor - 1.0) < 1e-4 for factor in factors),
        f"‖got‖/‖token sum's‖ {_per_rank(factors, '{:.6f}')} (2 = summed twice); "
        f"max relative |Δ| {_per_rank(errors, '{:.2e}')}",
        {"factor": factors, "max_relative_error": errors},
    )


def _metric_rows(
    prefix: str, ranks: list[dict[str, Any]], token_sum: float, rollouts: int
) -> list[CheckResult]:
    metrics = [rank["metrics"] for rank in ranks]
    disagree = sorted(
        name
        for name in metrics[0]
        if any(
            not math.isclose(m.get(name, math.nan), metrics[0][name], rel_tol=1e-6) for m in metrics
        )
    )
    missing = [name for name in METRIC_NAMES if not math.isfinite(metrics[0].get(name, math.nan))]
    step_size = ranks[0]["step_global_batch_size"]
    loss_total = metrics[0].get("train/loss", math.nan) * step_size
    loss_ok = math.isclose(loss_total, token_sum, rel_tol=LOSS_RTOL)
    reporters = [index for index, rank in enumerate(ranks) if rank["captured"]]
    captured = ranks[reporters[0]]["captured"] if reporters else {}
    same_as_reduced = all(
        math.isclose(captured.get(name, math.nan), metrics[0][name], rel_tol=1e-9)
        for name in METRIC_NAMES
    )
    expected_batch = ranks[0]["retained_groups"] * rollouts
    logged_batch = captured.get("train/global_batch_size")
    return [
        CheckResult(
            f"{prefix} metrics agree across ranks, train/loss × step size = token sum",
            not disagree and not missing and loss_ok,
            ", ".join(f"{name}={metrics[0].get(name, math.nan):.4f}" for name in METRIC_NAMES)
            + f"; train/loss × {step_size} = {loss_total:.6f}"
            + (f"; differ across ranks: {disagree}" if disagree else "")
            + (f"; missing {missing}" if missing else ""),
            {"metrics": metrics[0]},
        ),
        CheckResult(
            f"{prefix} train/* reported once, by rank 0 (the rank Reef reads)",
            reporters == [0] and same_as_reduced,
            f"Reef's capture holds train/* on rank(s) {reporters}; main rank per Slime: "
            f"{[index for index, rank in enumerate(ranks) if rank['main_rank']]}",
            {"reporting_ranks": reporters, "captured": captured},
        ),
        CheckResult(
            f"{prefix} train/global_batch_size = retained groups × R",
            logged_batch == expected_batch,
            f"{logged_batch} (gate expects {expected_batch})",
        ),
    ]
