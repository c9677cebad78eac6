"""Check ``loss-tp2``: the ``loss`` check's tttd loss path at Megatron tensor-parallel 2.

``serve.yaml`` trains with Megatron TP 2. There the logits are split over the vocabulary:
Megatron's output layer is a ``ColumnParallelLinear`` with ``gather_output=False``, so each of
the two ranks holds the logits of every position for half the vocabulary. Slime computes each
token's log-probability from its shard with vocabulary-parallel reductions over the
tensor-parallel group (a max and two sums), and the output layer's backward sums the
hidden-state gradient over that group. A hook that assumed whole-vocabulary logits, a reduction
done twice or a loss scaled twice shows here.

Two ranks (``tttd.gpu_check.launcher``: NCCL on two GPUs, gloo on CPU) with Megatron's parallel
state at TP 2 (DP 1); each rank installs Reef's worker hooks and, for the full 2×4 step and for
the step with a constant group dropped (the ``loss`` check's inputs and builders):

- replicated hidden states go through a real Megatron ``ColumnParallelLinear`` holding the
  rank's rows of one output weight, transposed to ``[1, T, V/2]`` as ``GPTModel`` returns; the
  packed sequence is padded to a multiple of TP × ``data-pad-size-multiplier`` as Slime's
  ``get_batch`` pads it (``get_batch`` itself puts ``cu_seqlens`` on CUDA, so it is not called);
- Slime's advantage pass, then per micro-batch Megatron's ``forward_step_calc_loss`` around
  Slime's Reef-wrapped ``loss_function``, back-propagated;
- independently, the same hidden states and the whole weight give full-vocabulary logits, plain
  ``log_softmax`` log-probs and the token sum of ``tttd.slime.terms.importance_sampling_loss``;
- Slime's ``reduce_train_step_metrics``; then the rank Slime's main-rank predicate selects (DP 0,
  TP 0, last pipeline stage: the test its train loop applies before ``logging_utils.log``) logs
  the step through Reef's metric capture, and each rank drains what Reef captured.

Rows: on every rank, what Megatron back-propagates = the full-vocabulary token sum; the logits'
gradient = the token sum's on that rank's vocabulary shard; the hidden-state gradient = the
token sum's (summed once over TP); the weight shard's gradient = the token sum's rows; the
metrics agree across ranks and only rank 0 (the rank Reef reads metrics from) reports them.
"""

from __future__ import annotations

import inspect
import math
from pathlib import Path
from typing import Any

import torch

from tttd.gpu_check import CheckResult
from tttd.gpu_check import loss_path as lp
from tttd.gpu_check.launcher import probe, run_ranks
from tttd.gpu_check.tensor_parallel_rows import case_rows, group_row, log_gate_row

TP_SIZE = 2
HIDDEN = 64
CASES = (("full batch", lp.FULL_STEP), ("constant group dropped", lp.DROPPED_STEP))


def _output_weight(vocab: int, seed: int) -> torch.Tensor:
    """One ``[V, H]`` output weight, the same on every rank; logits come out with std ≈ 2."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(vocab, HIDDEN, generator=generator) * (2.0 / math.sqrt(HIDDEN))


def _inputs(args: Any, data: dict[str, Any], weight: torch.Tensor, device: str, seed: int) -> None:
    """Per micro-batch hidden states ``[T_pad, 1, H]``; rollout/reference log-probs near them."""
    generator = torch.Generator().manual_seed(seed + 1)
    half = len(data["tokens"]) // 2
    data["micro_batches"] = [range(0, half), range(half, len(data["tokens"]))]
    pad_to = TP_SIZE * int(args.data_pad_size_multiplier)
    data["hidden"], rollout, reference = [], [], []
    for rows in data["micro_batches"]:
        length = sum(data["total_lengths"][index] for index in rows)
        padded = -(-length // pad_to) * pad_to
        hidden = torch.randn(padded, 1, HIDDEN, generator=generator)
        base = (hidden @ weight.t()).transpose(0, 1)
        near = base + 0.05 * torch.randn(base.shape, generator=generator)
        far = base + 0.3 * torch.randn(base.shape, generator=generator)
        data["hidden"].append(hidden.to(device))
        rollout.extend(lp._split(lp.response_log_probs(near.to(device), data, rows), data, rows))
        reference.extend(lp._split(lp.response_log_probs(far.to(device), data, rows), data, rows))
    data["rollout_log_probs"], data["ref_log_probs"] = rollout, reference


def _output_layer(weight: torch.Tensor, rank: int, device: str) -> torch.nn.Module:
    """Megatron's ``ColumnParallelLinear`` (vocab-parallel, not gathered) holding rank's rows."""
    from megatron.core.model_parallel_config import ModelParallelConfig
    from megatron.core.tensor_parallel.layers import ColumnParallelLinear

    config = ModelParallelConfig(
        tensor_model_parallel_size=TP_SIZE,
        use_cpu_initialization=True,
        perform_initialization=False,
        params_dtype=torch.float32,
    )
    vocab = weight.shape[0]
    layer = ColumnParallelLinear(
        HIDDEN, vocab, config=config, init_method=None, bias=False, gather_output=False
    )
    rows = vocab // TP_SIZE
    with torch.no_grad():
        layer.weight.copy_(weight[rank * rows : (rank + 1) * rows])
    return layer.to(device)


def _relative(got: torch.Tensor, want: torch.Tensor) -> float:
    scale = float(want.abs().max()) or 1.0
    return float((got - want).abs().max()) / scale


def _tp_step(args: Any, data: dict[str, Any], weight: torch.Tensor, rank: int) -> dict[str, Any]:
    """Megatron's TP-2 path and the full-vocabulary token sum, side by side, on one rank."""
    from slime.backends.megatron_utils import loss as slime_loss

    from tttd.slime.terms import importance_sampling_loss

    rollout_data, advantage_error = lp.advantage_pass(args, data)
    device = data["hidden"][0].device
    layer = _output_layer(weight, rank, str(device.type))
    whole = weight.to(device).clone().requires_grad_(True)
    lo, hi = rank * (weight.shape[0] // TP_SIZE), (rank + 1) * (weight.shape[0] // TP_SIZE)
    store: list[dict[str, Any]] = []
    propagated = token_sum = 0.0
    logits_error = hidden_error = 0.0
    hidden_norms = [0.0, 0.0]
    for rows, hidden in zip(data["micro_batches"], data["hidden"], strict=True):
        ours_hidden = hidden.clone().requires_grad_(True)
        shard, _ = layer(ours_hidden)
        logits = shard.transpose(0, 1).contiguous().float()  # [1, T, V/TP], as GPTModel
        logits.retain_grad()
        output, batch = lp.micro_batch_loss(
            args, data, rollout_data, rows, logits, slime_loss.loss_function, store
        )
        output.backward()
        propagated += float(output.detach().double())
        reference_hidden = hidden.clone().requires_grad_(True)
        full = (reference_hidden @ whole.t()).transpose(0, 1)
        full.retain_grad()
        reference = importance_sampling_loss(
            lp.response_log_probs(full, data, rows),
            torch.cat(batch["rollout_log_probs"]),
            torch.cat(batch["advantages"]),
            torch.cat(batch["loss_masks"]),
        ).loss
        reference.backward()
        token_sum += float(reference.detach().double())
        logits_error = max(logits_error, _relative(logits.grad, full.grad[..., lo:hi]))
        hidden_error = max(hidden_error, _relative(ours_hidden.grad, reference_hidden.grad))
        hidden_norms[0] += float(ours_hidden.grad.double().pow(2).sum())
        hidden_norms[1] += float(reference_hidden.grad.double().pow(2).sum())
    metrics = lp.step_metrics(args, data, store)
    return {
        "advantage_max_abs_error": advantage_error,
        "propagated_loss": propagated,
        "token_sum": token_sum,
        "vocab_shard": [lo, hi],
        "logits_grad_max_rel_error": logits_error,
        "hidden_grad_max_rel_error": hidden_error,
        "hidden_grad_factor": math.sqrt(hidden_norms[0] / (hidden_norms[1] or 1.0)),
        "weight_grad_max_rel_error": _relative(layer.weight.grad, whole.grad[lo:hi]),
        "step_global_batch_size": data["step_sizes"][0],
        "retained_groups": data["retained_groups"],
        "metrics": metrics,
        **_log_step(args, metrics, data["step_sizes"][0]),
    }


def _log_step(args: Any, metrics: dict[str, float], step_size: int) -> dict[str, Any]:
    """Log as Slime's train loop does (main rank only, through Reef's capture); drain it."""
    from reef.train.slime_backend.reef_adapters.worker_hooks import drain_worker_metrics
    from slime.backends.megatron_utils import model as slime_model
    from slime.utils import logging_utils

    main_rank = not slime_model._disable_tqdm_for_non_main_rank()
    if main_rank:
        record = {**metrics, "train/global_batch_size": step_size, "train/step": 0}
        logging_utils.log(args, record, step_key="train/step")
    drained = drain_worker_metrics()
    captured = {key: value for key, value in drained.items() if key.startswith("train/")}
    return {"main_rank": main_rank, "captured": captured}


def loss_rank(rank: int, world_size: int, device: str, args: Any, vocab: int) -> dict[str, Any]:
    """One rank of the check (run by ``launcher.run_ranks``); returns its figures as JSON."""
    from megatron.core import parallel_state as mpu
    from reef.train.slime_backend.reef_adapters.worker_hooks import _install_metric_capture

    group = probe(rank, world_size, device)
    mpu.initialize_model_parallel(tensor_model_parallel_size=TP_SIZE)
    group.update(
        tp_size=mpu.get_tensor_model_parallel_world_size(),
        tp_rank=mpu.get_tensor_model_parallel_rank(),
        dp_size=mpu.get_data_parallel_world_size(with_context_parallel=True),
    )
    lp.install_reef_worker_hooks(args)
    _install_metric_capture()
    cases = {}
    for seed, (case, rewards) in enumerate(CASES):
        data = lp.build_step(rewards, vocab, device)
        weight = _output_weight(vocab, seed=100 + seed)
        _inputs(args, data, weight, device, seed=10 * seed)
        cases[case] = _tp_step(args, data, weight, rank)
    return {"group": group, "cases": cases, "versions": _versions(device)}


def _versions(device: str) -> dict[str, Any]:
    versions: dict[str, Any] = {"torch": torch.__version__}
    if device == "cuda":
        versions.update(
            cuda=torch.version.cuda,
            nccl=".".join(str(part) for part in _as_tuple(torch.cuda.nccl.version())),
            devices=[torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
        )
    return versions


def _as_tuple(version: Any) -> tuple[Any, ...]:
    return tuple(version) if isinstance(version, tuple | list) else (version,)


def slime_logs_on_the_main_rank_only() -> tuple[bool, str]:
    """Read Slime's train loop: its ``logging_utils.log`` call sits under DP 0 and TP 0 tests."""
    from slime.backends.megatron_utils import model as slime_model

    source = inspect.getsource(slime_model.train)
    call = source.find("logging_utils.log(args, log_dict")
    gate = source.rfind("if (", 0, call)
    needles = (
        "get_data_parallel_rank(with_context_parallel=True) == 0",
        "get_tensor_model_parallel_rank() == 0",
    )
    predicate = inspect.getsource(slime_model._disable_tqdm_for_non_main_rank)
    missing = [
        needle
        for needle in needles
        if call < 0 or gate < 0 or needle not in source[gate:call] or needle not in predicate
    ]
    return not missing, ("missing " + ", ".join(missing)) if missing else ""


def check_tensor_parallel_loss(
    serve_yaml: Path, work_dir: Path, device: str, args: Any = None, timeout_s: float = 900.0
) -> list[CheckResult]:
    """Rows of the TP-2 loss path; skipped (one row saying so) on fewer than two GPUs."""
    if device == "cuda" and (visible := torch.cuda.device_count()) < TP_SIZE:
        return [
            CheckResult(
                "loss-tp2",
                True,
                f"skipped: {visible} GPU{'' if visible == 1 else 's'} visible, TP {TP_SIZE} needs "
                f"{TP_SIZE} "
                "(a host of two GPUs, e.g. nvidia-h200-x2)",
                skipped=True,
            )
        ]
    if args is None:
        args = lp.parsed_namespace(serve_yaml, work_dir)
    if int(args.tensor_model_parallel_size) != TP_SIZE:
        raise ValueError(
            f"serve.yaml trains with tensor-model-parallel-size {args.tensor_model_parallel_size};"
            f" this check is written for {TP_SIZE}"
        )
    # Qwen3's vocabulary as Megatron pads it (serve.yaml's model) on GPUs; a small one on CPU.
    vocab = int(args.padded_vocab_size) if device == "cuda" else 512
    if vocab % TP_SIZE:
        raise ValueError(f"padded vocabulary {vocab} does not split over TP {TP_SIZE}")
    ranks = run_ranks(
        loss_rank, TP_SIZE, device, timeout_s=timeout_s, keywords={"args": args, "vocab": vocab}
    )
    rows = [group_row(ranks, device), log_gate_row(slime_logs_on_the_main_rank_only())]
    for case, _ in CASES:
        rows.extend(case_rows(f"loss-tp2[{case}]", [rank["cases"][case] for rank in ranks], args))
    return rows
