"""Token and cost accounting: usage parsing, the price table and its override order, per-step
sums over a state directory made by the real store, and guidance usage read from a real
`reef serve` (record-only recipe, no GPU)."""

from __future__ import annotations

import math

import httpx
import pytest

from harness import results
from harness.observe.cost import (
    PRICING_ENV,
    CostEstimate,
    Price,
    PriceTable,
    PricingError,
    ReefRecordUsage,
    Usage,
    load_prices,
    record_usage,
    total_usage,
    usage_by_step,
)
from tests.reef_fixtures import free_port, running_reef
from tests.state_fixture import EXECUTOR_MODEL, GUIDANCE_MODEL, build_state_dir


def test_usage_reads_openai_counts_and_refuses_garbage():
    assert Usage.from_openai({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}) == (
        Usage(10, 5, 1)
    )
    assert Usage.from_openai({"completion_tokens": 7}) == Usage(0, 7, 1)
    assert Usage.from_openai({"prompt_tokens": "ten"}) is None
    assert Usage.from_openai(None) is None
    assert Usage.from_openai({"prompt_tokens": math.nan, "completion_tokens": 3}) == Usage(0, 3, 1)
    assert Usage(1, 2, 1) + Usage(3, 4, 2) == Usage(4, 6, 3)
    assert Usage.from_openai(Usage(5, 6, 9).to_dict()) == Usage(5, 6, 9)  # round trip


def test_estimate_sums_priced_models_and_names_unpriced_ones():
    table = PriceTable(
        {"exec": Price(0.5, 2.0), "guide": Price(0.0, 0.0), "mystery": Price(None, None)}
    )
    estimate = table.estimate(
        {
            "exec": Usage(2_000_000, 1_000_000, 10),
            "guide": Usage(5, 5, 1),
            "mystery": Usage(1, 1, 1),
            "unlisted": Usage(1, 0, 1),
            "idle": Usage(),  # no tokens: costs nothing even without a price
        }
    )
    assert estimate == CostEstimate(3.0, ("mystery", "unlisted"))
    assert estimate.describe() == "$3.00 + unknown (no price for mystery, unlisted)"
    assert CostEstimate(0.0, ("z-ai/glm-5.2",)).describe() == "unknown (no price for z-ai/glm-5.2)"
    assert CostEstimate(12.345).describe() == "$12.35"


def test_prices_merge_defaults_then_the_settings_then_override_file(tmp_path):
    override = tmp_path / "prices.yaml"
    override.write_text("extra/model: {input_per_mtok: 2.5, output_per_mtok: null}\n")
    defaults = load_prices(environ={})
    assert defaults.prices["openai/gpt-oss-120b"] == Price(0.0, 0.0)
    assert defaults.prices["z-ai/glm-5.2"] == Price(None, None)  # unknown, not guessed
    settings_prices = {
        "z-ai/glm-5.2": {"input_per_mtok": 0.4, "output_per_mtok": 1.6},
        "extra/model": {"input_per_mtok": 1, "output_per_mtok": 1},
    }
    merged = load_prices(settings_prices=settings_prices, environ={PRICING_ENV: str(override)})
    assert merged.prices["z-ai/glm-5.2"] == Price(0.4, 1.6)
    assert merged.prices["extra/model"] == Price(2.5, None)
    assert merged.prices["Qwen/Qwen3-8B"] == Price(0.0, 0.0)
    assert load_prices(override, environ={}).prices["extra/model"] == Price(2.5, None)


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("m: {input_per_mtok: -1, output_per_mtok: 1}", "m.input_per_mtok is -1"),
        ("m: {input_per_mtok: 1}", "'m' must have exactly"),
        ("m: {input_per_mtok: 1, output_per_mtok: yes}", "m.output_per_mtok is True"),
        ("- just a list", "expected a mapping"),
        ("m: {input_per_mtok: [1, output_per_mtok", "not valid YAML"),
    ],
)
def test_a_bad_price_table_is_refused_naming_the_value(tmp_path, text, named):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(PricingError, match=named.replace("[", r"\[")):
        load_prices(path, environ={})


def test_usage_per_step_matches_what_the_rollouts_consumed(tmp_path):
    fixture = build_state_dir(tmp_path / "state")
    view = results.load_run(fixture.state_dir)
    steps = results.run_usage(view)
    assert sorted(steps) == [0, 1, 2, 3]  # three committed steps and the in-flight one
    total = total_usage(steps.values())
    assert (total.executor.prompt_tokens, total.executor.completion_tokens) == (
        fixture.executor_tokens
    )
    assert (total.guidance.prompt_tokens, total.guidance.completion_tokens) == (
        fixture.guidance_tokens
    )
    committed = results.run_usage(view, in_flight=False)
    assert sorted(committed) == [0, 1, 2]
    assert committed[0].guidance.calls == fixture.groups * fixture.rollouts
    # Malformed guidance skips the executor: one call fewer per step than rollouts.
    assert committed[0].executor.calls == fixture.groups * fixture.rollouts - 1
    prices = PriceTable({GUIDANCE_MODEL: Price(0, 0), EXECUTOR_MODEL: Price(1.0, 3.0)})
    _, cost = results.run_cost(view, prices)
    expected = (fixture.executor_tokens[0] * 1.0 + fixture.executor_tokens[1] * 3.0) / 1e6
    assert cost.usd == pytest.approx(expected) and cost.unpriced == ()


def test_entries_without_guidance_usage_take_it_from_reef_receipts(tmp_path):
    fixture = build_state_dir(tmp_path / "state", committed_steps=1, in_flight_slots=0)
    view = results.load_run(fixture.state_dir)
    entries = []
    for entry in view.archive.entries.values():
        meta = {k: v for k, v in entry.metadata.items() if k != "guidance_response_usage"}
        entries.append(entry.__class__(**{**entry.to_dict(), "metadata": meta}))
    receipts = {e.metadata["agent_record_id"]: Usage(100, 10, 1) for e in entries if e.timestep}
    steps = usage_by_step(entries, receipts)
    assert steps[0].guidance == Usage(800, 80, 8)
    assert usage_by_step(entries)[0].guidance == Usage()  # unknown stays visibly zero calls


@pytest.mark.slow
def test_guidance_usage_is_read_from_a_real_reef_record(tmp_path):
    scenario = "guidance-ttt-usage-test"
    with running_reef(tmp_path / "reef") as reef:
        receipts = []
        for _ in range(2):
            response = httpx.post(
                reef.url + "/v1/chat/completions",
                headers=reef.headers(scenario),
                json={"model": "fixture-model", "messages": [{"role": "user", "content": "hi"}]},
                timeout=30,
            )
            response.raise_for_status()
            receipts.append(response.headers["x-reef-agent-record-id"])
        with ReefRecordUsage(reef.url, scenario, token=reef.token) as reader:
            found = reader.fetch([*receipts, "no-such-receipt"])
        assert found == {r: Usage(3, 2, 1) for r in receipts}  # the upstream's usage, per call
        assert reader.missing == 1
        with ReefRecordUsage(reef.url, scenario, token="wrong-token") as reader:
            assert reader.fetch(receipts) == {}
            assert reader.missing == 2


def test_an_unreachable_reef_degrades_to_missing_records_without_raising():
    with ReefRecordUsage(f"http://127.0.0.1:{free_port()}", "s", timeout_s=1.0) as reader:
        assert reader.fetch(["a", "b", "c"]) == {}
        assert reader.missing == 3


def test_record_usage_falls_back_to_the_training_token_counts():
    record = {"payload": {"response": {"training": {"prompt_length": 900, "response_length": 77}}}}
    assert record_usage(record) == Usage(900, 77, 1)
    assert record_usage({"payload": {"response": {}}}) is None
    assert record_usage({"payload": "?"}) is None
