"""Check 2: our tttd hooks inside Slime's own advantage and loss path.

The Slime namespace is the one check 1 parses from ``serve.yaml`` (2×4 grid). Megatron's
parallel state is initialised for one process (gloo on CPU, NCCL on a GPU), Reef's worker
init resolves the loss family's ``@objective`` paths and installs its wrapper around Slime's
``loss_function`` (the one that puts ``step_global_batch_size`` into the batch).

Inputs follow a real step: G groups of R samples with different prompt and response lengths,
loss masks with a few masked tokens, rollout and reference log-probs that differ from the
current policy, rewards turned into per-sample advantages by our tttd objective, constant
groups dropped by ``tttd.batches.select_training_groups``, rows shaped into Slime's rollout
data by Reef's ``build_policy_rollout_data`` and the step size taken from Reef's schedule
(``materialize_schedule`` with the recipe's ``StepScheduling``). Then, for the full batch and
for a batch with a constant group dropped:

1. Slime's ``compute_advantages_and_returns`` (calling ``tttd_advantages``) must give the
   advantages ``tttd.slime.terms.centred_kl_advantages`` gives;
2. each micro-batch goes through Megatron's ``forward_step_calc_loss`` with Slime's
   (Reef-wrapped) ``loss_function``; the sum of what Megatron back-propagates must equal the
   token sum of ``tttd.slime.terms.importance_sampling_loss`` on log-probs computed here
   independently (plain ``log_softmax``), and the logits' gradient must equal that sum's;
3. Slime's ``reduce_train_step_metrics`` must report the loss family's metrics by name, and
   the step size Slime logs as ``train/global_batch_size`` must be the retained groups × R
   that the qualification gate expects.

A last row calls Slime's ``loss_function`` without Reef's wrapper on the dropped-group batch
and reports the factor by which that step would be mis-scaled.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import torch

from tttd.gpu_check import CheckResult

#: Rewards of one 2×4 step: every group varies.
FULL_STEP = ((0.2, 0.5, 0.5, 0.9), (0.1, 0.4, 0.3, 0.0))
#: The same step with the second group constant (dropped before training).
DROPPED_STEP = ((0.2, 0.5, 0.5, 0.9), (0.3, 0.3, 0.3, 0.3))


def init_parallel_state(device: str) -> None:
    """Megatron's parallel state for one process (TP = PP = CP = DP = 1)."""
    import torch.distributed as dist
    from megatron.core import parallel_state as mpu

    if not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(_free_port()))
        backend = "nccl" if device == "cuda" else "gloo"
        if device == "cuda":
            torch.cuda.set_device(0)
        dist.init_process_group(backend, rank=0, world_size=1)
    if not mpu.model_parallel_is_initialized():
        mpu.initialize_model_parallel(1, 1)


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


#: Slime's own ``loss_function``, kept when Reef's wrapper is first installed in this process.
_SLIME_LOSS_FUNCTION: Any = None


def install_reef_worker_hooks(args: Any) -> Any:
    """Reef's worker init pieces the loss path needs; returns Slime's unwrapped loss_function."""
    from reef.train.slime_backend.algorithm import resolve_objective_paths
    from reef.train.slime_backend.reef_adapters import worker_hooks
    from slime.backends.megatron_utils import loss

    global _SLIME_LOSS_FUNCTION
    if _SLIME_LOSS_FUNCTION is None:
        if getattr(loss.loss_function, "_reef_step_batch_size", False):
            raise RuntimeError("Slime's loss_function was wrapped before this check saw it")
        _SLIME_LOSS_FUNCTION = loss.loss_function
    resolve_objective_paths(args)
    worker_hooks._install_step_batch_size()
    return _SLIME_LOSS_FUNCTION


def build_step(
    rewards: Sequence[Sequence[float]], vocab: int, device: str, seed: int = 0
) -> dict[str, Any]:
    """One step's retained samples as Slime rollout data, via tttd and Reef's own builders."""
    from reef.train.algos.schedule import materialize_schedule
    from reef.train.slime_backend.data_builder import build_policy_rollout_data
    from reef.train.slime_backend.loss_families import resolve_loss_family

    from tttd.batches import select_training_groups
    from tttd.objective import entropic_advantages
    from tttd.recipe import TTTDRecipe

    generator = torch.Generator().manual_seed(seed)
    selection = select_training_groups(0, rewards)
    rows, advantages, rollout_ids, prompts = [], [], [], []
    for group in selection.training_groups:
        group_advantages = entropic_advantages(rewards[group])
        for rollout, reward in enumerate(rewards[group]):
            prompt = 24 + 7 * group + 3 * rollout
            response = 11 + 13 * ((rollout * 5 + group * 3) % 7)
            tokens = torch.randint(0, vocab, (prompt + response,), generator=generator).tolist()
            mask = [1] * response
            if rollout % 2:
                mask[1] = mask[-2] = 0  # tokens the sampler forced: not trained
            rows.append([f"g{group}r{rollout}", tokens, mask, [-1.0] * response, float(reward)])
            advantages.append(group_advantages[rollout])
            rollout_ids.append(len(rollout_ids))
            prompts.append(prompt)
    schedule = materialize_schedule(rollout_ids, TTTDRecipe.training_spec().scheduling)
    payload = {
        "samples": rows,
        "rollout_ids": list(schedule.rollout_ids),
        "advantages": advantages,
        "external_step_sizes": list(schedule.step_sizes or ()),
    }
    data = build_policy_rollout_data(payload, rows, resolve_loss_family("tttd"))
    data["total_lengths"] = [len(tokens) for tokens in data["tokens"]]
    data["tokens"] = [torch.tensor(tokens, device=device) for tokens in data["tokens"]]
    for key in ("loss_masks", "advantages", "rollout_mask_sums"):
        dtype = torch.int if key == "loss_masks" else torch.float32
        data[key] = [torch.as_tensor(value, dtype=dtype, device=device) for value in data[key]]
    data["retained_groups"] = len(selection.training_groups)
    data["step_sizes"] = list(schedule.step_sizes or ())
    return data


def response_log_probs(logits: torch.Tensor, data: dict[str, Any], rows: range) -> torch.Tensor:
    """Each sampled response token's log-prob under ``logits`` ([1, T, V], packed rows)."""
    pieces, offset = [], 0
    for index in rows:
        total, response = data["total_lengths"][index], data["response_lengths"][index]
        end = offset + total
        window = torch.log_softmax(logits[0, end - response - 1 : end - 1].float(), dim=-1)
        target = data["tokens"][index][-response:].long().unsqueeze(-1)
        pieces.append(window.gather(-1, target).squeeze(-1))
        offset = end
    return torch.cat(pieces)


def _logits_and_log_probs(data: dict[str, Any], vocab: int, device: str, seed: int) -> None:
    """Packed micro-batch logits (two halves) and rollout/reference log-probs near them."""
    generator = torch.Generator().manual_seed(seed + 1)
    half = len(data["tokens"]) // 2
    data["micro_batches"] = [range(0, half), range(half, len(data["tokens"]))]
    data["logits"] = []
    rollout, reference = [], []
    for rows in data["micro_batches"]:
        length = sum(data["total_lengths"][index] for index in rows)
        base = torch.randn(1, length, vocab, generator=generator) * 2.0
        near = base + 0.05 * torch.randn(base.shape, generator=generator)
        far = base + 0.3 * torch.randn(base.shape, generator=generator)
        data["logits"].append(base.to(device))
        rollout.extend(_split(response_log_probs(near.to(device), data, rows), data, rows))
        reference.extend(_split(response_log_probs(far.to(device), data, rows), data, rows))
    data["rollout_log_probs"] = rollout
    data["ref_log_probs"] = reference


def _split(values: torch.Tensor, data: dict[str, Any], rows: range) -> list[torch.Tensor]:
    return list(values.split([data["response_lengths"][index] for index in rows]))


def advantage_pass(args: Any, data: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """Slime's ``compute_advantages_and_returns`` on the step; returns it and |Δ| vs our terms."""
    from slime.backends.megatron_utils import loss as slime_loss

    from tttd.slime.terms import centred_kl_advantages

    reef_advantages = [value.clone() for value in data["advantages"]]
    rollout_data = {
        key: data[key]
        for key in ("rollout_log_probs", "ref_log_probs", "rewards", "response_lengths")
    }
    rollout_data.update(
        loss_masks=data["loss_masks"],
        total_lengths=data["total_lengths"],
        advantages=[value.clone() for value in reef_advantages],
    )
    slime_loss.compute_advantages_and_returns(args, rollout_data)
    expected = centred_kl_advantages(
        reef_advantages,
        data["rollout_log_probs"],
        data["ref_log_probs"],
        data["loss_masks"],
        args.kl_coef,
    )
    error = max(
        float((got - want).abs().max())
        for got, want in zip(rollout_data["advantages"], expected, strict=True)
    )
    return rollout_data, error


def micro_batch_loss(
    args: Any,
    data: dict[str, Any],
    rollout_data: dict[str, Any],
    rows: range,
    logits: torch.Tensor,
    loss_function: Any,
    store: list[dict[str, Any]],
) -> tuple[torch.Tensor, dict[str, Any]]:
    """What Megatron's ``forward_step_calc_loss`` back-propagates for one micro-batch.

    Returns that tensor (not yet back-propagated) and the micro-batch as Slime's batch dict.
    """
    from megatron.core.pipeline_parallel.schedules import forward_step_calc_loss
    from megatron.core.transformer.transformer_config import TransformerConfig

    config = TransformerConfig(
        num_layers=1,
        hidden_size=64,
        num_attention_heads=4,
        calculate_per_token_loss=args.calculate_per_token_loss,
    )
    batch = {
        "unconcat_tokens": [data["tokens"][i] for i in rows],
        "total_lengths": [data["total_lengths"][i] for i in rows],
        "response_lengths": [data["response_lengths"][i] for i in rows],
        "loss_masks": [data["loss_masks"][i] for i in rows],
        "rollout_mask_sums": [data["rollout_mask_sums"][i] for i in rows],
        "advantages": [rollout_data["advantages"][i] for i in rows],
        "returns": [rollout_data["returns"][i] for i in rows],
        "rollout_log_probs": [data["rollout_log_probs"][i] for i in rows],
        "ref_log_probs": [data["ref_log_probs"][i] for i in rows],
    }
    micro_batches = len(data["micro_batches"])
    loss_func = partial(loss_function, args, batch, micro_batches, data["step_sizes"][0])
    output, _ = forward_step_calc_loss(
        None, logits, loss_func, config, None, False, micro_batches, store, 1, True
    )
    return output, batch


def step_metrics(args: Any, data: dict[str, Any], store: list[dict[str, Any]]) -> dict[str, float]:
    """Slime's ``reduce_train_step_metrics`` over the micro-batches, named as Slime logs them."""
    from megatron.core import parallel_state as mpu
    from slime.backends.megatron_utils.cp_utils import reduce_train_step_metrics

    metrics = reduce_train_step_metrics(
        store,
        calculate_per_token_loss=args.calculate_per_token_loss,
        step_global_batch_size=data["step_sizes"][0],
        cp_size=mpu.get_context_parallel_world_size(),
        dp_with_cp_group=mpu.get_data_parallel_group(with_context_parallel=True),
    )
    return {f"train/{key}": float(value) for key, value in metrics.items()}


def run_step(args: Any, data: dict[str, Any], loss_function: Any) -> dict[str, Any]:
    """The advantage pass, then each micro-batch through Megatron, beside our own token sum."""
    from tttd.slime.terms import importance_sampling_loss

    rollout_data, advantage_error = advantage_pass(args, data)
    store: list[dict[str, Any]] = []
    leaves = [logits.clone().requires_grad_(True) for logits in data["logits"]]
    references = [logits.clone().requires_grad_(True) for logits in data["logits"]]
    propagated = torch.zeros((), dtype=torch.float64, device=leaves[0].device)
    token_sum = torch.zeros((), dtype=torch.float64, device=leaves[0].device)
    for rows, leaf, reference in zip(data["micro_batches"], leaves, references, strict=True):
        output, batch = micro_batch_loss(args, data, rollout_data, rows, leaf, loss_function, store)
        output.backward()
        propagated += output.detach().double()
        ours = importance_sampling_loss(
            response_log_probs(reference, data, rows),
            torch.cat(batch["rollout_log_probs"]),
            torch.cat(batch["advantages"]),
            torch.cat(batch["loss_masks"]),
        ).loss
        ours.backward()
        token_sum += ours.detach().double()
    # Relative to the largest gradient entry: float32 logits, rescaled twice on Slime's path.
    scale = max(float(reference.grad.abs().max()) for reference in references) or 1.0
    gradient_error = max(
        float((leaf.grad - reference.grad).abs().max()) / scale
        for leaf, reference in zip(leaves, references, strict=True)
    )
    gradient_norm = math.sqrt(sum(float(leaf.grad.double().pow(2).sum()) for leaf in leaves))
    return {
        "advantage_max_abs_error": advantage_error,
        "propagated_loss": float(propagated),
        "token_sum": float(token_sum),
        "logits_grad_max_abs_error": gradient_error,
        "logits_grad_norm": gradient_norm,
        "step_global_batch_size": data["step_sizes"][0],
        "metrics": step_metrics(args, data, store),
    }


def parsed_namespace(serve_yaml: Path, work_dir: Path) -> Any:
    """The Slime namespace of ``serve.yaml``'s 2×4 grid, parsed as check 1 parses it."""
    from tttd.gpu_check.arguments import parse_slime_arguments, slime_command_line

    arguments, config, family, recipe = slime_command_line(serve_yaml, work_dir, "2x4")
    return parse_slime_arguments(arguments, config, family, recipe, work_dir)[0]


def check_loss_path(
    serve_yaml: Path, work_dir: Path, device: str, args: Any = None
) -> list[CheckResult]:
    """Rows for the full batch, the dropped-group batch and the unwrapped loss function.

    ``args`` is a Slime namespace parsed earlier (e.g. on a machine that has SGLang, whose
    ``ServerArgs`` Slime's parser imports); by default ``serve.yaml`` is parsed here.
    """
    vocab = 151936 if device == "cuda" else 512
    if args is None:
        args = parsed_namespace(serve_yaml, work_dir)
    rollouts = int(args.n_samples_per_prompt)
    init_parallel_state(device)
    unwrapped = install_reef_worker_hooks(args)
    from slime.backends.megatron_utils import loss as slime_loss

    rows: list[CheckResult] = []
    for case, rewards in (("full batch", FULL_STEP), ("constant group dropped", DROPPED_STEP)):
        data = build_step(rewards, vocab, device)
        _logits_and_log_probs(data, vocab, device, seed=len(rows))
        figures = run_step(args, data, slime_loss.loss_function)
        rows.extend(_case_rows(f"loss[{case}]", figures, data, rollouts))
    data = build_step(DROPPED_STEP, vocab, device)
    _logits_and_log_probs(data, vocab, device, seed=7)
    figures = run_step(args, data, unwrapped)
    factor = figures["propagated_loss"] / figures["token_sum"]
    intended = args.global_batch_size / figures["step_global_batch_size"]
    rows.append(
        CheckResult(
            "loss[without Reef's wrapper] dropped-group step mis-scaled",
            math.isclose(factor, intended, rel_tol=1e-4),
            f"Slime alone gives {factor:.4f}× the token sum (global-batch-size "
            f"{args.global_batch_size} / retained {figures['step_global_batch_size']}): "
            "the wrapper is required",
            {"factor": factor},
        )
    )
    return rows


def _case_rows(
    prefix: str, figures: dict[str, Any], data: dict[str, Any], rollouts: int
) -> list[CheckResult]:
    propagated, token_sum = figures["propagated_loss"], figures["token_sum"]
    tolerance = 1e-4 * max(1.0, abs(token_sum))
    metrics = figures["metrics"]
    names = ("train/loss", "train/importance_ratio", "train/ppo_kl")
    missing = [name for name in names if not math.isfinite(metrics.get(name, math.nan))]
    expected_batch = data["retained_groups"] * rollouts
    return [
        CheckResult(
            f"{prefix} advantages = tttd terms",
            figures["advantage_max_abs_error"] < 1e-5,
            f"max |Δ| {figures['advantage_max_abs_error']:.2e}",
            {"max_abs_error": figures["advantage_max_abs_error"]},
        ),
        CheckResult(
            f"{prefix} loss after Slime's rescaling = token sum",
            abs(propagated - token_sum) <= tolerance,
            f"Megatron back-propagates {propagated:.6f}, tttd terms give {token_sum:.6f}",
            {"propagated": propagated, "token_sum": token_sum},
        ),
        CheckResult(
            f"{prefix} gradient reaches the logits",
            figures["logits_grad_norm"] > 0 and figures["logits_grad_max_abs_error"] < 1e-4,
            f"‖∂L/∂logits‖ {figures['logits_grad_norm']:.4f}, max relative |Δ| vs the token sum's "
            f"{figures['logits_grad_max_abs_error']:.2e}",
            {"grad_norm": figures["logits_grad_norm"]},
        ),
        CheckResult(
            f"{prefix} loss metrics named",
            not missing,
            ", ".join(f"{name}={metrics[name]:.4f}" for name in names if name in metrics)
            + (f"; missing {missing}" if missing else ""),
            {"metrics": metrics},
        ),
        CheckResult(
            f"{prefix} train/global_batch_size = retained groups × R",
            figures["step_global_batch_size"] == expected_batch,
            f"{figures['step_global_batch_size']} (gate expects {expected_batch})",
        ),
    ]
