"""Check 3: one optimizer step of a tiny random-weight Qwen3 with LoRA through our tttd hooks.

What runs: transformers' ``Qwen3ForCausalLM`` built from a small ``Qwen3Config`` (random
weights, Qwen3's vocabulary on a GPU, nothing downloaded); peft LoRA on the Hugging Face
modules Reef maps Megatron's ``linear_qkv``/``linear_proj``/``linear_fc1``/``linear_fc2`` to
(Reef's ``sglang_lora_target_modules``), with the rank, alpha and dropout of the Slime namespace
parsed from ``serve.yaml``; each sample's forward, logits packed as Slime packs them; Slime's
advantage pass and its Reef-wrapped ``loss_function`` per micro-batch through Megatron's
``forward_step_calc_loss`` (``tttd.gpu_check.loss_path``); Megatron's ``get_grad_norm_fp32``
over the gradients; Adam with the namespace's lr, betas, eps and weight decay; Reef's
``collect_lora_train_metrics`` (peft's ``lora_A``/``lora_B`` read under Bridge's names
``adapter.linear_in``/``adapter.linear_out``); and the qualification gate on the result.

What does not run (see docs/training.md, "H200 runs"): Megatron's ``GPTModel`` with
Megatron-Bridge's LoRA (what Reef's ``apply_megatron_lora`` applies) and Slime's
``train_one_step`` with Megatron's DDP and distributed optimizer. Megatron-Bridge is not part of
Slime's pinned sources (it comes with Slime's base image), and Slime's packed-sequence (THD)
attention needs Transformer Engine or flash-attn, which the check machine lacks.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import torch

from tttd.gpu_check import CheckResult
from tttd.gpu_check import loss_path as lp

#: A tiny Qwen3 (two layers, GQA, q/k norms, SwiGLU, untied head); vocabulary set per device.
TINY_QWEN3 = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "max_position_embeddings": 512,
    "tie_word_embeddings": False,
}


class _BridgeNames(torch.nn.Module):
    """peft's LoRA parameters under Megatron-Bridge's names, for Reef's metric function."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def named_parameters(self, *args: Any, **kwargs: Any):  # type: ignore[override]
        for name, parameter in self.model.named_parameters(*args, **kwargs):
            renamed = name.replace(".lora_A.default.", ".adapter.linear_in.")
            yield renamed.replace(".lora_B.default.", ".adapter.linear_out."), parameter


def build_model(args: Any, vocab: int, device: str) -> torch.nn.Module:
    """The tiny Qwen3 with peft LoRA on Reef's Hugging Face targets, base frozen."""
    from peft import LoraConfig, get_peft_model
    from reef.train.slime_backend.reef_adapters.megatron.lora import sglang_lora_target_modules
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=vocab, **TINY_QWEN3)
    model = Qwen3ForCausalLM(config).to(device=device, dtype=torch.float32)
    lora = LoraConfig(
        r=int(args.megatron_lora_rank),
        lora_alpha=int(args.megatron_lora_alpha),
        lora_dropout=float(args.megatron_lora_dropout),
        target_modules=sglang_lora_target_modules(args),
        bias="none",
    )
    return get_peft_model(model, lora)


def packed_logits(model: torch.nn.Module, data: dict[str, Any], rows: range) -> torch.Tensor:
    """Each sample's own forward, concatenated along time: [1, Σ lengths, V], as Slime packs."""
    pieces = [model(input_ids=data["tokens"][i].long().unsqueeze(0)).logits for i in rows]
    return torch.cat(pieces, dim=1).float()


def _sampled_log_probs(model: torch.nn.Module, data: dict[str, Any], noise: float) -> None:
    """Rollout log-probs = the policy's own plus sampler noise; reference = the frozen base."""
    generator = torch.Generator().manual_seed(3)
    rollout, reference = [], []
    with torch.no_grad():
        for rows in data["micro_batches"]:
            current = lp.response_log_probs(packed_logits(model, data, rows), data, rows)
            jitter = noise * torch.randn(current.shape, generator=generator).to(current.device)
            rollout.extend(lp._split(current + jitter, data, rows))
            reference.extend(lp._split(current, data, rows))  # LoRA-B is 0: policy = base
    data["rollout_log_probs"], data["ref_log_probs"] = rollout, reference


def one_step(args: Any, device: str, vocab: int) -> dict[str, Any]:
    """Build, forward, back-propagate through Slime's loss path, step Adam; return figures."""
    from megatron.core.optimizer.clip_grads import get_grad_norm_fp32
    from reef.train.slime_backend.reef_adapters.megatron.lora import collect_lora_train_metrics
    from slime.backends.megatron_utils import loss as slime_loss

    model = build_model(args, vocab, device)
    model.train()
    data = lp.build_step(lp.FULL_STEP, vocab, device)
    half = len(data["tokens"]) // 2
    data["micro_batches"] = [range(0, half), range(half, len(data["tokens"]))]
    _sampled_log_probs(model, data, noise=0.01)
    before = {name: value.detach().clone() for name, value in model.named_parameters()}
    trainable = [value for value in model.parameters() if value.requires_grad]
    optimizer = torch.optim.Adam(
        trainable,
        lr=float(args.lr),
        betas=(float(args.adam_beta1), float(args.adam_beta2)),
        eps=float(args.adam_eps),
        weight_decay=float(args.weight_decay),
    )
    if device == "cuda":
        torch.cuda.synchronize()
    started = _now()
    rollout_data, _ = lp.advantage_pass(args, data)
    store: list[dict[str, Any]] = []
    propagated = 0.0
    for rows in data["micro_batches"]:
        logits = packed_logits(model, data, rows)
        output, _ = lp.micro_batch_loss(
            args, data, rollout_data, rows, logits, slime_loss.loss_function, store
        )
        output.backward()
        propagated += float(output.detach())
    grads = [value.grad for value in trainable if value.grad is not None]
    if device == "cuda":
        grad_norm = float(get_grad_norm_fp32(grads))
    else:  # Megatron's norm allocates on CUDA; the same L2 norm in torch
        grad_norm = float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads])))
    optimizer.step()
    if device == "cuda":
        torch.cuda.synchronize()
    elapsed = _now() - started
    after = dict(model.named_parameters())
    lora_b = [name for name in after if ".lora_B." in name]
    base = [name for name, value in after.items() if not value.requires_grad]
    metrics = {
        **lp.step_metrics(args, data, store),
        "train/grad_norm": grad_norm,
        "train/global_batch_size": data["step_sizes"][0],
        **collect_lora_train_metrics([_BridgeNames(model)]),
    }
    return {
        "lora_b_changed": sum(not torch.equal(before[n], after[n].detach()) for n in lora_b),
        "lora_b_tensors": len(lora_b),
        "base_changed": [n for n in base if not torch.equal(before[n], after[n].detach())],
        "base_tensors": len(base),
        "grad_norm": grad_norm,
        "propagated_loss": propagated,
        "step_seconds": elapsed,
        "metrics": metrics,
        "data": data,
    }


def _now() -> float:
    import time

    return time.perf_counter()


def check_optimizer_step(
    serve_yaml: Path, work_dir: Path, device: str, args: Any = None
) -> list[CheckResult]:
    """Rows: LoRA-B moved, base unchanged, grad norm finite > 0, gate accepts the metrics."""
    if args is None:
        args = lp.parsed_namespace(serve_yaml, work_dir)
    lp.init_parallel_state(device)
    lp.install_reef_worker_hooks(args)
    vocab = 151936 if device == "cuda" else 512
    figures = one_step(args, device, vocab)
    metrics = figures["metrics"]
    prefix = f"step[{device}]"
    return [
        CheckResult(
            f"{prefix} LoRA-B changed",
            figures["lora_b_changed"] == figures["lora_b_tensors"] > 0,
            f"{figures['lora_b_changed']}/{figures['lora_b_tensors']} LoRA-B tensors moved",
        ),
        CheckResult(
            f"{prefix} base weights unchanged",
            not figures["base_changed"] and figures["base_tensors"] > 0,
            f"{figures['base_tensors']} frozen tensors, changed: {figures['base_changed'][:3]}",
        ),
        CheckResult(
            f"{prefix} train/grad_norm finite > 0",
            math.isfinite(figures["grad_norm"]) and figures["grad_norm"] > 0,
            f"{figures['grad_norm']:.6g}; loss "
            f"{figures['propagated_loss']:.6g}; step {figures['step_seconds'] * 1000:.1f} ms",
            {"grad_norm": figures["grad_norm"], "step_seconds": figures["step_seconds"]},
        ),
        _gate_row(prefix, serve_yaml, metrics),
    ]


def _gate_row(prefix: str, serve_yaml: Path, metrics: dict[str, Any]) -> CheckResult:
    """The qualification gate itself reads the step's metrics."""
    from harness.run.qualification import QualificationError, qualify_step
    from harness.settings.run_settings import RunSettings
    from harness.storage.resume_state import RunIdentity, StepOutcome

    settings = RunSettings.load(serve_yaml, environ={}, base_dir=serve_yaml.parent)
    outcome = StepOutcome(
        step=0,
        elapsed_s=1.0,
        group_rewards=lp.FULL_STEP,
        valid_rollouts=sum(len(group) for group in lp.FULL_STEP),
        well_formed_guidance=sum(len(group) for group in lp.FULL_STEP),
        best_raw_score=max(max(group) for group in lp.FULL_STEP),
    )
    health = {
        "ok": True,
        "phase": "serving",
        "completed_train_steps": 1,
        "last_train_rollout_id": 0,
        "last_train_metrics": metrics,
    }
    with tempfile.TemporaryDirectory() as scratch:
        marker = Path(scratch) / "marker.json"
        marker.write_text("{}")
        try:
            qualify_step(outcome, health, RunIdentity(**settings.identity()), 1, marker)
            ok, detail = True, ""
        except QualificationError as error:
            ok, detail = False, str(error)
    names = sorted(key for key in metrics if key.startswith("train/lora"))
    return CheckResult(
        f"{prefix} qualification gate accepts the step's metrics",
        ok,
        detail or ", ".join(f"{name}={metrics[name]:.6g}" for name in names),
        {"metrics": metrics},
    )
