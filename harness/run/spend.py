"""The spend limit: `max_cost_usd` and/or `max_tokens` from serve.yaml, checked at step boundaries.

Before each step the run adds up what its committed rollouts used (the tokens every entry
records, priced with the run's price table, `harness.observe.cost`) and what the preflight's
real calls used before each launch (`preflight_usage` events, `record_preflight_usage`). When a
limit is reached, or the next step would cross it (what was spent plus the mean cost of the
committed steps), the run stops before the next step with `SpendLimitReached`, one line naming
the limit, what was spent, the projection and how to raise it for the command that started the
run (`spend_advice`: a `--set` flag of `guidance-ttt run` or ./run.sh, the plan file of an
experiment); a step in progress always completes, so raising the limit and running the same
command again resumes. When the spend first passes 50 % and 80 % of a limit, a
`spend_warning` event tells the live display.

A cost limit needs a price for every model that used tokens: a run with `max_cost_usd` whose
models are unpriced is refused before its first step (an unknown price must not read as free).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness.observe.cost import (
    PREFLIGHT_USAGE_EVENT,
    PriceTable,
    StepUsage,
    Usage,
    preflight_usage,
    total_usage,
    usage_by_step,
)
from harness.observe.events import EventSink, read_events
from harness.state import LibraryEntry
from harness.storage.run_files import event_log_path, preflight_usage_path
from harness.storage.state_files import StateFileError, exists, read_json_object

log = logging.getLogger(__name__)

#: The fractions of a limit at which the live display warns.
WARN_AT = (0.5, 0.8)


class SpendLimitReached(RuntimeError):
    """The run spent its limit; it stopped at a step boundary and resumes once it is raised."""


@dataclass(frozen=True)
class Spent:
    """What a run's rollouts used so far: tokens (both models) and dollars (None: unpriced)."""

    tokens: int
    usd: float | None
    unpriced: tuple[str, ...] = ()
    steps: int = 0


@dataclass
class SpendLimit:
    """The limits of one run and the models whose usage they price."""

    max_cost_usd: float | None
    max_tokens: int | None
    prices: PriceTable
    guidance_model: str
    executor_model: str
    #: What the preflight's real calls used (every launch so far): counted with the rollouts.
    preflight: StepUsage = field(default_factory=lambda: StepUsage(-1))
    #: How to raise a limit for the command that started the run (`spend_advice`), given the
    #: limit's name and a value that would allow the next step.
    advice: Callable[[str, str], str] | None = None
    _warned: set[tuple[str, float]] = field(default_factory=set)

    @property
    def active(self) -> bool:
        return self.max_cost_usd is not None or self.max_tokens is not None

    def require_prices(self, guided: bool) -> None:
        """Refuse a cost limit when a model the run calls has no price (before any step)."""
        if self.max_cost_usd is None:
            return
        models = [self.executor_model] + ([self.guidance_model] if guided else [])
        missing = [
            m
            for m in models
            if (p := self.prices.prices.get(m)) is None
            or p.input_per_mtok is None
            or p.output_per_mtok is None
        ]
        if missing:
            raise SpendLimitReached(
                f"max_cost_usd is {self.max_cost_usd} but {', '.join(missing)} has no price, so "
                "the spend cannot be counted; add its price (harness/observe/pricing.yaml, "
                "--pricing or GUIDANCE_TTT_PRICING) or set max_tokens instead"
            )

    def spent(self, entries: Iterable[LibraryEntry]) -> Spent:
        """The tokens and cost of `entries` (rollout entries; the seed is skipped)."""
        by_step = usage_by_step(entries)
        total: StepUsage = total_usage(by_step.values()) + self.preflight
        estimate = self.prices.estimate(total.by_model(self.guidance_model, self.executor_model))
        tokens = total.executor.total_tokens + total.guidance.total_tokens
        usd = None if estimate.unpriced else estimate.usd
        return Spent(tokens, usd, estimate.unpriced, len(by_step))

    def per_step(self, entries: Iterable[LibraryEntry]) -> Spent | None:
        """The mean tokens and cost of one committed step (None before the first)."""
        by_step = usage_by_step(entries)
        if not by_step:
            return None
        total = total_usage(by_step.values())
        estimate = self.prices.estimate(total.by_model(self.guidance_model, self.executor_model))
        tokens = total.executor.total_tokens + total.guidance.total_tokens
        usd = None if estimate.unpriced else estimate.usd / len(by_step)
        return Spent(round(tokens / len(by_step)), usd, estimate.unpriced, len(by_step))

    def check(
        self, entries: Iterable[LibraryEntry], step: int, events: EventSink, *, stop: bool = True
    ) -> None:
        """Raise `SpendLimitReached` when a limit is reached before `step`, or `step` would
        cross it at the mean cost of the committed steps (only with `stop`); emit a
        `spend_warning` the first time the spend passes 50 % or 80 % of a limit."""
        if not self.active:
            return
        entries = list(entries)
        spent = self.spent(entries)
        if stop and self.max_cost_usd is not None and spent.usd is None:
            raise SpendLimitReached(
                f"max_cost_usd is {self.max_cost_usd} but {', '.join(spent.unpriced)} has no "
                "price, so the spend cannot be counted; add its price (harness/observe/"
                "pricing.yaml, --pricing or GUIDANCE_TTT_PRICING) or set max_tokens instead"
            )
        step_cost = dict(
            (name, value) for name, _, value, _ in self._measures(self.per_step(entries))
        )
        for name, limit, value, unit in self._measures(spent):
            next_step = step_cost.get(name, 0.0)
            if stop and (value >= limit or value + next_step > limit):
                events.emit(
                    "spend_limit_reached", step=step, limit=name, value=value, maximum=limit
                )
                needed = _amount(value + 2 * next_step if next_step else 2 * value, unit, bare=True)
                fix = (self.advice or default_advice)(name, needed)
                if value >= limit:
                    raise SpendLimitReached(
                        f"spend limit reached before step {step}: {name} is {limit:g} and the "
                        f"run has spent {_amount(value, unit)}; {fix}"
                    )
                raise SpendLimitReached(
                    f"spend limit reached before step {step}: {name} is {limit:g}, the run has "
                    f"spent {_amount(value, unit)} and a step costs about "
                    f"{_amount(next_step, unit)} (the mean of its committed steps), so step "
                    f"{step} would cross it; {fix}"
                )
            for fraction in WARN_AT:
                if value >= fraction * limit and (name, fraction) not in self._warned:
                    self._warned.add((name, fraction))
                    events.emit(
                        "spend_warning",
                        step=step,
                        limit=name,
                        fraction=fraction,
                        value=value,
                        maximum=limit,
                    )

    def _measures(self, spent: Spent | None) -> list[tuple[str, float, float, str]]:
        measures: list[tuple[str, float, float, str]] = []
        if spent is None:
            return measures
        if self.max_tokens is not None:
            measures.append(("max_tokens", float(self.max_tokens), float(spent.tokens), "tokens"))
        if self.max_cost_usd is not None and spent.usd is not None:
            measures.append(("max_cost_usd", self.max_cost_usd, spent.usd, "usd"))
        return measures


def _amount(value: float, unit: str, bare: bool = False) -> str:
    """`value` for a person (`bare`: as a settings value, e.g. 12000 or 0.25)."""
    if bare:
        return f"{math.ceil(value * 100) / 100:g}" if unit == "usd" else str(math.ceil(value))
    return f"${value:,.4f}" if unit == "usd" else f"{int(value):,} tokens"


def default_advice(name: str, needed: str) -> str:
    """How to raise a limit when the command that started the run is not known."""
    return (
        f"raise {name} (harness.spend_limit.{name} in the run's settings file; `guidance-ttt "
        f"rehearse --{name.replace('_', '-')}`) and run the same command again to resume"
    )


def spend_advice(experiment: str | None, environ: Mapping[str, str]) -> Callable[[str, str], str]:
    """How to raise a limit for the command that started the run: an experiment's plan file,
    else the `--set` flag of the `guidance-ttt run` or ./run.sh command that was typed
    (`GUIDANCE_TTT_COMMAND`, which `guidance-ttt run` gives its stack), else `default_advice`."""
    command = environ.get("GUIDANCE_TTT_COMMAND", "").strip()

    def advice(name: str, needed: str) -> str:
        if experiment:
            return (
                f"raise spend_limit.{name} in experiment {experiment}'s plan file (a limit per "
                "run) and run the same `guidance-ttt experiment` command again to resume"
            )
        if command:
            return (
                f"raise it with --set harness.spend_limit.{name}=N to resume, e.g. {command} "
                f"--set harness.spend_limit.{name}={needed}"
            )
        return default_advice(name, needed)

    return advice


def record_preflight_usage(state_dir: Path, events: EventSink) -> StepUsage:
    """What the preflight's real calls used over every launch of the run in `state_dir`: the
    `preflight_usage` events already in its event log, plus this launch's, which the preflight
    left in `preflight-usage.json` and which is logged here as a `preflight_usage` event (and
    the file removed, so the next launch does not count it again). The event log is for people,
    so a damaged one only loses its earlier counts (logged)."""
    try:
        total = preflight_usage(read_events(event_log_path(state_dir)))
    except StateFileError as exc:
        log.warning("earlier preflight usage not counted: %s", exc)
        total = StepUsage(-1)
    path = preflight_usage_path(state_dir)
    if not exists(path):
        return total
    try:
        left = read_json_object(path)
    except StateFileError as exc:
        log.warning("the preflight's usage is not counted: %s", exc)
        left = {}
    guidance = Usage.from_openai(left.get("guidance")) or Usage()
    executor = Usage.from_openai(left.get("executor")) or Usage()
    if guidance.calls or executor.calls:
        events.emit(PREFLIGHT_USAGE_EVENT, guidance=guidance.to_dict(), executor=executor.to_dict())
    path.unlink(missing_ok=True)
    return total + StepUsage(-1, executor, guidance)
