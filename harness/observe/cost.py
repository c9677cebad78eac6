"""Token and cost accounting: what a run's models consumed, per step and per run, and what that
cost according to a per-model price table.

Sources, all read after the fact so accounting can never disturb a run:
- executor usage: each entry's `metadata.execution_response_usage` (the OpenAI `usage` object the
  executor returned, docs/design.md §6), summed over the entries of a step;
- guidance usage: the entry's `metadata.guidance_response_usage` when the rollout loop kept it,
  else Reef's stored inference record of the rollout's receipt (`payload.response.usage`, or
  the token counts of `payload.response.training`), fetched by `ReefRecordUsage`;
- the preflight's calls: one real request each to the guidance endpoint (frozen mode) and the
  executor before the run starts, logged as `preflight_usage` events (`preflight_usage`); they
  belong to no step but are part of the run's cost and spend;
- prices: `harness/observe/pricing.yaml`, overridden by the run settings' `harness.pricing`
  (read and checked by `harness.settings`)
  and by a YAML file (`--pricing FILE` or `GUIDANCE_TTT_PRICING`), model by model.

A model without a price is reported as unpriced, never guessed.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from harness.state import LibraryEntry

DEFAULT_PRICING = Path(__file__).with_name("pricing.yaml")
PRICING_ENV = "GUIDANCE_TTT_PRICING"
EXECUTOR_USAGE_KEY = "execution_response_usage"
GUIDANCE_USAGE_KEY = "guidance_response_usage"
RECEIPT_KEY = "agent_record_id"
#: The event the run logs for the preflight's real calls (fields `guidance`, `executor`: usage).
PREFLIGHT_USAGE_EVENT = "preflight_usage"


class PricingError(ValueError):
    """A price table that cannot be used (unreadable, wrong shape, negative price)."""


@dataclass(frozen=True)
class Usage:
    """Token counts of some model calls. `calls` counts the calls whose usage was known, so a
    total over calls that reported nothing is distinguishable from a true zero."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.calls + other.calls,
        )

    def to_dict(self) -> dict[str, int]:
        """The JSON form used in events, status and runs.json."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "calls": self.calls,
        }

    @classmethod
    def from_openai(cls, raw: Any) -> Usage | None:
        """One call's usage from an OpenAI-style `usage` object (`prompt_tokens`,
        `completion_tokens`; a missing count is 0; a `calls` key, as in `to_dict`, is kept).
        None when `raw` carries no count at all."""
        if not isinstance(raw, Mapping):
            return None
        counts = [_count(raw.get(key)) for key in ("prompt_tokens", "completion_tokens")]
        if all(c is None for c in counts):
            return None
        calls = _count(raw.get("calls"))
        return cls(counts[0] or 0, counts[1] or 0, 1 if calls is None else calls)


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return max(int(value), 0)


@dataclass(frozen=True)
class Price:
    """Dollars per million prompt and completion tokens; None when the price is unknown."""

    input_per_mtok: float | None
    output_per_mtok: float | None

    def cost(self, usage: Usage) -> float | None:
        """The dollar cost of `usage`, or None if a needed price is unknown."""
        if usage.total_tokens == 0:
            return 0.0
        if self.input_per_mtok is None or self.output_per_mtok is None:
            return None
        return (
            usage.prompt_tokens * self.input_per_mtok
            + usage.completion_tokens * self.output_per_mtok
        ) / 1e6


@dataclass(frozen=True)
class CostEstimate:
    """A dollar estimate over several models: `usd` sums the priced ones; `unpriced` names the
    models that used tokens but have no price (their share is missing from `usd`)."""

    usd: float
    unpriced: tuple[str, ...] = ()

    def describe(self) -> str:
        """`$1.23`; `$1.23 + unknown (no price for z-ai/glm-5.2)` when part of the usage has no
        price; `unknown (no price for z-ai/glm-5.2)` when no priced model used any tokens."""
        text = f"${self.usd:,.2f}"
        if not self.unpriced:
            return text
        missing = f"unknown (no price for {', '.join(self.unpriced)})"
        return f"{text} + {missing}" if self.usd > 0 else missing

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: `usd` (null when a model that used tokens has no price: the total is
        not known, it is not 0), `priced_usd` (the priced models' share) and the unpriced model
        list."""
        return {
            "usd": None if self.unpriced else round(self.usd, 6),
            "priced_usd": round(self.usd, 6),
            "unpriced_models": list(self.unpriced),
        }


@dataclass(frozen=True)
class PriceTable:
    """Prices by model id (exactly as the service names the model)."""

    prices: Mapping[str, Price] = field(default_factory=dict)

    def estimate(self, usage_by_model: Mapping[str, Usage]) -> CostEstimate:
        """The cost of each model's usage, summed; unknown models and unknown prices are listed
        as unpriced instead of counted as free."""
        total, unpriced = 0.0, []
        for model, usage in usage_by_model.items():
            price = self.prices.get(model)
            cost = (
                price.cost(usage)
                if price is not None
                else (0.0 if not usage.total_tokens else None)
            )
            if cost is None:
                unpriced.append(model)
            else:
                total += cost
        return CostEstimate(total, tuple(sorted(unpriced)))

    def merged(self, overrides: Mapping[str, Price]) -> PriceTable:
        """A table where `overrides` replace this table's prices model by model."""
        return PriceTable({**self.prices, **overrides})


def parse_prices(data: Any, where: str) -> dict[str, Price]:
    """Read a `{model: {input_per_mtok, output_per_mtok}}` mapping; each price is a number ≥ 0
    or null. Raises `PricingError` naming the model and key."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise PricingError(f"{where}: expected a mapping of model id to prices")
    prices = {}
    for model, entry in data.items():
        if not isinstance(entry, Mapping) or set(entry) != {"input_per_mtok", "output_per_mtok"}:
            raise PricingError(
                f"{where}: {model!r} must have exactly input_per_mtok and output_per_mtok"
            )
        values = []
        for key in ("input_per_mtok", "output_per_mtok"):
            value = entry[key]
            ok = value is None or (
                isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
            )
            if not ok or (value is not None and not math.isfinite(value)):
                raise PricingError(f"{where}: {model}.{key} is {value!r}; use a number ≥ 0 or null")
            values.append(None if value is None else float(value))
        prices[str(model)] = Price(*values)
    return prices


def _read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise PricingError(f"cannot read price table {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise PricingError(f"price table {path} is not valid YAML: {exc}") from exc


def load_prices(
    path: Path | None = None,
    *,
    settings_prices: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> PriceTable:
    """The price table in force: the packaged defaults, then the run's settings' prices
    (`RunSettings.pricing`: serve.yaml's `training.config.harness.pricing`, or a frozen file's
    `recipe.config.guidance-ttt.harness.pricing`, checked by `harness.settings`), then the file
    `path` or `$GUIDANCE_TTT_PRICING`. Later sources replace earlier ones model by model."""
    table = PriceTable(parse_prices(_read_yaml(DEFAULT_PRICING), str(DEFAULT_PRICING)))
    if settings_prices:
        table = table.merged(parse_prices(settings_prices, "the settings' harness.pricing"))
    override = path or (environ if environ is not None else os.environ).get(PRICING_ENV)
    if override:
        table = table.merged(parse_prices(_read_yaml(Path(override)), str(override)))
    return table


# --- usage from the archive --------------------------------------------------------------------


@dataclass(frozen=True)
class StepUsage:
    """The tokens one step consumed: the executor's and the guidance model's."""

    step: int
    executor: Usage = Usage()
    guidance: Usage = Usage()

    def __add__(self, other: StepUsage) -> StepUsage:
        return StepUsage(self.step, self.executor + other.executor, self.guidance + other.guidance)

    def by_model(self, guidance_model: str, executor_model: str) -> dict[str, Usage]:
        """The usage keyed by model id, as `PriceTable.estimate` takes it (one key when both
        roles use the same model)."""
        out: dict[str, Usage] = {}
        for model, usage in ((guidance_model, self.guidance), (executor_model, self.executor)):
            out[model] = out.get(model, Usage()) + usage
        return out

    def to_dict(self) -> dict[str, Any]:
        """The JSON form used by events and records."""
        return {"executor": self.executor.to_dict(), "guidance": self.guidance.to_dict()}


def entry_usage(
    entry: LibraryEntry, guidance: Mapping[str, Usage] | None = None
) -> tuple[Usage, Usage]:
    """(executor, guidance) usage of one rollout entry. Guidance usage comes from the entry's
    metadata, else from `guidance` (receipt id → usage, e.g. fetched from Reef); missing is 0."""
    meta = entry.metadata
    executor = Usage.from_openai(meta.get(EXECUTOR_USAGE_KEY)) or Usage()
    found = Usage.from_openai(meta.get(GUIDANCE_USAGE_KEY))
    if found is None and guidance is not None:
        found = guidance.get(str(meta.get(RECEIPT_KEY)))
    return executor, found or Usage()


def usage_by_step(
    entries: Iterable[LibraryEntry], guidance: Mapping[str, Usage] | None = None
) -> dict[int, StepUsage]:
    """Usage summed per step (an entry of archive timestep t belongs to step t - 1; the seed at
    timestep 0 is skipped), in step order."""
    steps: dict[int, StepUsage] = {}
    for entry in entries:
        if entry.timestep < 1:
            continue
        step = entry.timestep - 1
        executor, guide = entry_usage(entry, guidance)
        steps[step] = steps.get(step, StepUsage(step)) + StepUsage(step, executor, guide)
    return dict(sorted(steps.items()))


def total_usage(steps: Iterable[StepUsage]) -> StepUsage:
    """The run total of per-step usage (its `step` is -1: it belongs to no single step)."""
    total = StepUsage(-1)
    for item in steps:
        total = total + StepUsage(-1, item.executor, item.guidance)
    return total


def preflight_usage(events: Iterable[Mapping[str, Any]]) -> StepUsage:
    """The tokens the preflight's real calls used, over every launch of the run: the sum of
    its `preflight_usage` events (step -1: they belong to no step)."""
    total = StepUsage(-1)
    for event in events:
        if event.get("event") == PREFLIGHT_USAGE_EVENT:
            executor = Usage.from_openai(event.get("executor")) or Usage()
            guidance = Usage.from_openai(event.get("guidance")) or Usage()
            total = total + StepUsage(-1, executor, guidance)
    return total


# --- guidance usage from Reef's records --------------------------------------------------------


def record_usage(record: Any) -> Usage | None:
    """The guidance call's usage from one stored Reef inference record: the response's `usage`,
    else the prompt and response lengths Reef kept for training. None if neither is present."""
    payload = record.get("payload") if isinstance(record, Mapping) else None
    response = payload.get("response") if isinstance(payload, Mapping) else None
    if not isinstance(response, Mapping):
        return None
    usage = Usage.from_openai(response.get("usage"))
    if usage is not None:
        return usage
    training = response.get("training")
    if isinstance(training, Mapping):
        prompt, completion = (_count(training.get(k)) for k in ("prompt_length", "response_length"))
        if prompt is not None or completion is not None:
            return Usage(prompt or 0, completion or 0, 1)
    return None


class ReefRecordUsage:
    """Reads guidance usage from Reef (`GET /reef/scenarios/{scenario}/records/{receipt}`) with
    the run's bearer token and a short timeout. Unreadable records are skipped and counted in
    `missing`, so a stopped Reef degrades the numbers, never the command."""

    def __init__(
        self, reef_url: str, scenario: str, *, token: str | None = None, timeout_s: float = 5.0
    ) -> None:
        headers = {"x-reef-scenario": scenario}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._base = f"{reef_url.rstrip('/')}/reef/scenarios/{scenario}/records/"
        self._client = httpx.Client(headers=headers, timeout=timeout_s)
        self.missing = 0

    def close(self) -> None:
        """Release the connection pool."""
        self._client.close()

    def __enter__(self) -> ReefRecordUsage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def fetch(self, receipts: Iterable[str]) -> dict[str, Usage]:
        """Usage by receipt for every record that could be read. After the first transport
        failure the remaining receipts are skipped (Reef is down; asking again only waits)."""
        found: dict[str, Usage] = {}
        pending = [r for r in dict.fromkeys(receipts) if r]
        for index, receipt in enumerate(pending):
            try:
                response = self._client.get(self._base + receipt)
            except httpx.TransportError:
                self.missing += len(pending) - index
                break
            try:
                usage = record_usage(response.json()) if response.status_code == 200 else None
            except ValueError:
                usage = None
            if usage is None:
                self.missing += 1
            else:
                found[receipt] = usage
        return found
