"""`guidance-ttt estimate`: the expected tokens and cost of the configured run, before it starts.

It reads the settings file (the grid, STEPS, the guidance token limit, the arm, the executor
backend), builds the run's real first prompts from the task and its seed (the guidance prompt
and the executor prompt the seed's parent gets), and prices the expected usage with the price
table (`harness.observe.cost`). The assumptions it uses are printed with the figures:

- prompt tokens ≈ characters / 4 of the prompts built from the seed (later parents are
  programs of about the seed's size);
- guidance completion = `GUIDANCE_FRACTION` of `max_response_len` (the limit is the upper
  bound); the arms without a guidance model make no guidance call;
- executor completion = `--executor-completion-tokens` (default `EXECUTOR_COMPLETION`), the
  executor backends here set no token limit of their own;
- every one of the STEPS × G × R rollouts makes one call of each; failed calls are not
  discounted (an upper-leaning estimate).

It needs no endpoint: the settings file's required endpoint variables (`${VAR:?}`, e.g.
`GUIDANCE_TTT_GUIDANCE_URL` in serve-frozen.yaml) that are not set stand for nothing in an
estimate, which calls nothing; an unset model name is said to be unset, and a model without a
price is named with the exact key that prices it in that settings file (`price_hint`).

After a few steps `guidance-ttt status` projects the total from what was actually spent.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from harness.arms import UNGUIDED_INSTRUCTION
from harness.cli.views import price_hint
from harness.contract import load_contract
from harness.observe.cost import PriceTable, Usage, load_prices
from harness.prompts import executor_prompt, guidance_prompt
from harness.run.services import executor_backend
from harness.settings.document import UNSET, estimate_environment
from harness.settings.run_settings import DEFAULT_SERVE_YAML, RunSettings
from harness.settings.task_dirs import bundled_task_dir
from harness.storage.run_files import load_seed

CHARS_PER_TOKEN = 4
GUIDANCE_FRACTION = 0.5
EXECUTOR_COMPLETION = 8000


@dataclass(frozen=True)
class Estimate:
    rollouts: int
    guidance: Usage
    executor: Usage
    usd: float | None
    unpriced: tuple[str, ...]
    assumptions: tuple[str, ...]

    @property
    def tokens(self) -> int:
        return self.guidance.total_tokens + self.executor.total_tokens


def _tokens(text: str) -> int:
    return max(1, len(text) // CHARS_PER_TOKEN)


def estimate(
    settings: RunSettings,
    prices: PriceTable,
    task_dir: Path,
    executor_completion: int = EXECUTOR_COMPLETION,
) -> Estimate:
    """The expected usage and cost of `settings`' whole run (all STEPS)."""
    contract = load_contract(task_dir)
    problem = (task_dir / "instruction.md").read_text(encoding="utf-8")
    seed = load_seed(task_dir, settings.seed_file)
    rollouts = settings.steps * settings.rollouts_per_step
    guided = settings.arm_spec.guided
    guide_prompt = guidance_prompt(contract, problem, seed)
    guidance_completion = int(settings.guidance_max_tokens * GUIDANCE_FRACTION)
    typical_guidance = "x" * (CHARS_PER_TOKEN * min(guidance_completion, 400))
    instruction = typical_guidance if guided else UNGUIDED_INSTRUCTION
    exec_prompt = executor_prompt(contract, problem, seed, instruction)
    per_guidance = _tokens("".join(m["content"] for m in guide_prompt.messages()))
    per_executor = _tokens("".join(m["content"] for m in exec_prompt.messages()))
    calls = rollouts if guided else 0
    guidance = Usage(per_guidance * calls, guidance_completion * calls, calls)
    executor = Usage(per_executor * rollouts, executor_completion * rollouts, rollouts)
    backend = executor_backend(settings)
    cost = prices.estimate({settings.model: guidance, backend.model: executor})
    assumptions = (
        f"{settings.steps} steps × {settings.groups_per_step}×{settings.rollouts_per_group} = "
        f"{rollouts} rollouts, arm {settings.arm_spec.label()}",
        f"prompt tokens ≈ characters / {CHARS_PER_TOKEN} of the first prompts built from the "
        f"seed: guidance {per_guidance}, executor {per_executor} per call",
        (
            f"guidance completion {guidance_completion} tokens a call ({GUIDANCE_FRACTION:.0%} "
            f"of max_response_len {settings.guidance_max_tokens}, the upper bound)"
            if guided
            else "no guidance calls (this arm calls no guidance model)"
        ),
        f"executor completion {executor_completion} tokens a call "
        "(--executor-completion-tokens; the backend sets no limit)",
        "every rollout makes its calls; failures are not discounted",
    )
    return Estimate(
        rollouts,
        guidance,
        executor,
        None if cost.unpriced else cost.usd,
        cost.unpriced,
        assumptions,
    )


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    estimate = subparsers.add_parser(
        "estimate",
        help="expected tokens and cost of the configured run, before it starts",
        description="Expected tokens and cost of the configured run, before it starts: per "
        "step and in all, from the grid, the prompt sizes and the price table.",
    )
    estimate.add_argument(
        "--config", type=Path, help="the settings file (default: the project's serve.yaml)"
    )
    estimate.add_argument("--pricing", type=Path, help="price table YAML (default: as for status)")
    estimate.add_argument(
        "--executor-completion-tokens",
        type=int,
        metavar="N",
        default=8000,
        help="assumed executor completion tokens per call (default: %(default)s)",
    )


def cost_text(result: Estimate, mode: str, config: Path) -> str:
    """`$1.23`, or what keeps the cost unknown: a model variable that is not set, or a model
    without a price with the exact key that prices it in `config`."""
    if result.usd is not None:
        return f"${result.usd:,.2f}"
    unset = [m[len(UNSET) :] for m in result.unpriced if m.startswith(UNSET)]
    priced = [m for m in result.unpriced if not m.startswith(UNSET)]
    parts = [f"model not set ({', '.join(unset)}): set it to price its calls"] if unset else []
    if priced:
        parts.append(f"no price for {', '.join(priced)}: {price_hint(priced, mode, config)}")
    return "unknown (" + "; ".join(parts) + ")"


def run(args: argparse.Namespace, console: Console | None = None) -> int:
    console = console or Console()
    config = Path(args.config) if args.config else DEFAULT_SERVE_YAML
    environ, unset = estimate_environment(config, os.environ)
    settings = RunSettings.load(config, environ=environ)
    prices = load_prices(args.pricing, settings_prices=settings.pricing)
    result = estimate(
        settings,
        prices,
        bundled_task_dir(settings.task),
        getattr(args, "executor_completion_tokens", None) or EXECUTOR_COMPLETION,
    )
    usd = cost_text(result, settings.mode, config)
    console.print(
        f"estimate for {config}: {result.tokens:,} tokens (guidance "
        f"{result.guidance.total_tokens:,} in {result.guidance.calls} calls, executor "
        f"{result.executor.total_tokens:,} in "
        f"{result.executor.calls} calls), cost {usd}",
        markup=False,
        soft_wrap=True,
    )
    limits = [
        f"max_tokens {settings.max_tokens:,}" if settings.max_tokens else "",
        f"max_cost_usd {settings.max_cost_usd}" if settings.max_cost_usd else "",
    ]
    if any(limits):
        console.print(f"spend limit: {', '.join(x for x in limits if x)}", markup=False)
    if unset:
        console.print(
            f"not set, and not needed for an estimate: {', '.join(unset)}",
            markup=False,
            soft_wrap=True,
        )
    console.print("assumptions:", markup=False)
    for line in result.assumptions:
        console.print(f"  - {line}", markup=False, soft_wrap=True)
    return 0
