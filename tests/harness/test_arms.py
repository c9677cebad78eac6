"""The experiment arms and parent-selection policies on real archives, settings and records.

What each arm changes is checked where it happens: the archive's parent choice (puct, greedy,
uniform, the seed for best-of-n), whether a candidate becomes a node (best-of-n: never), the
settings that select them (refused where they cannot run), the run identity that binds a state
directory to them, and the spend limit's arithmetic. The full loop per arm runs in
tests/harness/test_arm_differences.py.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import pytest
import yaml
from archive_builders import Spec, make_entry, make_seed, tree_archive

from harness import arms
from harness.library import Archive
from harness.observe.cost import Price, PriceTable
from harness.run.spend import SpendLimit, SpendLimitReached
from harness.settings.run_settings import DEFAULT_SERVE_YAML, RunSettings, RunSettingsError
from harness.state import ArchiveConfig
from harness.storage.resume_state import RunIdentity

CONFIG = ArchiveConfig(rollout_n=2, groups_per_batch=2)
# Two lineages: r1 → a (5.0) → b (9.0); r2 → c (7.0). Step 1 sees all of them.
TREE = [
    Spec("r1", None, 1.0),
    Spec("r2", None, 1.0),
    Spec("a", "r1", 5.0),
    Spec("b", "a", 9.0),
    Spec("c", "r2", 7.0),
]


def parents(policy: str, run_seed: int = 0) -> list[str]:
    archive = tree_archive(CONFIG, TREE)
    return [n.id for n in archive.select_parents(5, policy, run_seed)]


def test_puct_blocks_the_lineage_greedy_always_takes_the_best_node() -> None:
    puct = parents("puct")
    assert puct[0] == "b" and puct[1] in ("c", "r2"), "PUCT blocks b's line for group 1"
    assert parents("greedy") == ["b", "b"], "greedy: every group expands the best node"


def test_uniform_draws_are_reproducible_per_run_seed_and_differ_across_seeds() -> None:
    assert parents("uniform", 3) == parents("uniform", 3)
    draws = {tuple(parents("uniform", seed)) for seed in range(12)}
    assert len(draws) > 1, "the run seed must change the uniform draws"
    assert {node for draw in draws for node in draw} <= {"r1", "r2", "a", "b", "c"}


def test_best_of_n_parents_are_the_seed_roots_and_candidates_never_join_the_tree() -> None:
    archive = Archive.from_seed(CONFIG, make_seed(), run_seed=0)
    roots = [n.id for n in archive.nodes.values() if n.is_root]
    for step in range(2):
        chosen = archive.select_parents(step, arms.SEED_SELECTION)
        assert [p.id for p in chosen] == roots
        for group, parent in enumerate(chosen):
            for _ in range(CONFIG.rollout_n):
                entry = make_entry(parent.id, step, raw=50.0 + group)
                entry = dataclasses.replace(
                    entry, metadata={**entry.metadata, arms.ADDS_TO_TREE: False}
                )
                assert archive.submit(step, group, entry) is None
    assert set(archive.nodes) == set(roots), "best-of-n adds no node"
    assert len(archive.entries) == len(roots) + 2 * 2 * 2, "every rollout is still stored"
    assert archive.puct_T == 8


def test_a_run_seed_fixes_the_root_ids_and_another_seed_changes_them() -> None:
    one = Archive.from_seed(CONFIG, make_seed(), run_seed=4)
    again = Archive.from_seed(CONFIG, make_seed(), run_seed=4)
    other = Archive.from_seed(CONFIG, make_seed(), run_seed=5)
    assert list(one.nodes) == list(again.nodes) and list(one.entries) == list(again.entries)
    assert set(one.nodes).isdisjoint(other.nodes)
    arm = arms.Arm("unguided", run_seed=4)
    assert arm.entry_id(1, 0, 1) == arms.Arm("best-of-n", run_seed=4).entry_id(1, 0, 1)
    assert arm.entry_id(1, 0, 1) != arms.Arm("unguided", run_seed=5).entry_id(1, 0, 1)
    assert arm.sampling_seed(0, 0, 0) != arm.sampling_seed(0, 0, 1)


def test_each_arm_says_what_it_changes() -> None:
    method, unguided, best = (arms.Arm(name) for name in arms.ARMS)
    assert (method.guided, method.grows_tree, method.selection) == (True, True, "puct")
    assert (unguided.guided, unguided.grows_tree, unguided.selection) == (False, True, "puct")
    assert (best.guided, best.grows_tree, best.selection) == (False, False, "seed")
    assert arms.Arm("unguided", "greedy").label() == "unguided/greedy"
    assert arms.Arm("best-of-n", "greedy").label() == "best-of-n"
    with pytest.raises(ValueError, match="arm 'random' is not one of"):
        arms.Arm("random")


# --- settings and identity -------------------------------------------------------------------

SERVE = yaml.safe_load(DEFAULT_SERVE_YAML.read_text())


def serve_with(tmp_path: Path, **experiment: object) -> Path:
    document = copy.deepcopy(SERVE)
    document["training"]["config"]["harness"]["experiment"].update(experiment)
    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def test_the_arm_selection_and_seed_are_read_and_part_of_the_identity(tmp_path: Path) -> None:
    path = serve_with(tmp_path, parent_selection="greedy", run_seed=3)
    settings = RunSettings.load(path, environ={}, base_dir=tmp_path)
    assert settings.arm_spec == arms.Arm("guidance-ttt", "greedy", 3)
    identity = settings.identity()
    assert (identity["arm"], identity["parent_selection"], identity["run_seed"]) == (
        "guidance-ttt",
        "greedy",
        3,
    )


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"arm": "unguided"}, "unguided calls no guidance model"),
        ({"arm": "best_of_n"}, "experiment.arm"),
        ({"parent_selection": "softmax"}, "experiment.parent_selection"),
        ({"run_seed": -1}, "experiment.run_seed"),
    ],
)
def test_a_wrong_or_untrainable_arm_is_refused_naming_the_key(
    tmp_path: Path, change: dict[str, object], named: str
) -> None:
    with pytest.raises(RunSettingsError, match=named):
        RunSettings.load(serve_with(tmp_path, **change), environ={}, base_dir=tmp_path)


def test_a_record_from_before_arms_is_the_method_with_puct_and_seed_zero() -> None:
    old = {
        "model": "m",
        "executor": "gpt_oss_120b",
        "gpt_oss_reasoning_effort": "high",
        "groups_per_step": 2,
        "rollouts_per_group": 4,
        "guidance_max_tokens": 8192,
        "sequence_length": 12288,
        "lora_rank": 32,
        "inference_tensor_parallel_size": 1,
        "megatron_tensor_parallel_size": 2,
    }
    identity = RunIdentity.from_dict(old)
    assert (identity.mode, identity.arm, identity.parent_selection, identity.run_seed) == (
        "trained",
        "guidance-ttt",
        "puct",
        0,
    )
    changed = dataclasses.replace(identity, arm="unguided")
    assert identity.first_difference(changed) == ("arm", "guidance-ttt", "unguided")
    assert identity.first_difference(dataclasses.replace(identity, run_seed=1)) == (
        "run_seed",
        0,
        1,
    )


# --- the spend limit -------------------------------------------------------------------------


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, dict]] = []

    def emit(self, kind: str, **fields: object) -> None:
        self.seen.append((kind, fields))


def spent_entries(tokens_per_entry: int, count: int, per_step: int = 1) -> list:
    """`count` rollout entries of `tokens_per_entry` tokens each, `per_step` to a step."""
    out = []
    for index in range(count):
        entry = make_entry("root", index // per_step)
        usage = {"prompt_tokens": tokens_per_entry // 2, "completion_tokens": tokens_per_entry // 2}
        out.append(
            dataclasses.replace(
                entry,
                id=f"spend-{index}",
                metadata={"execution_response_usage": usage, "guidance_response_usage": None},
            )
        )
    return out


def test_the_spend_limit_warns_at_half_and_four_fifths_then_stops() -> None:
    limit = SpendLimit(None, 1000, PriceTable(), "g", "x")
    events = Events()
    limit.check(spent_entries(100, 4), 1, events)  # 400: nothing
    assert events.seen == []
    limit.check(spent_entries(100, 6), 2, events)  # 600: 50 %
    limit.check(spent_entries(100, 8), 3, events)  # 800: 80 %
    limit.check(spent_entries(100, 9), 4, events)  # 900: no new warning
    assert [(k, f["fraction"]) for k, f in events.seen] == [
        ("spend_warning", 0.5),
        ("spend_warning", 0.8),
    ]
    with pytest.raises(SpendLimitReached, match="max_tokens is 1000 and the run has spent 1,000"):
        limit.check(spent_entries(100, 10), 5, events)
    assert events.seen[-1][0] == "spend_limit_reached"


def test_the_spend_limit_stops_before_a_step_that_would_cross_it_naming_the_command() -> None:
    from harness.run.spend import spend_advice

    command = "guidance-ttt run --config serve-frozen.yaml --state-dir work/r"
    advice = spend_advice(None, {"GUIDANCE_TTT_COMMAND": command})
    limit = SpendLimit(None, 1000, PriceTable(), "g", "x", advice=advice)
    limit.check(spent_entries(250, 3), 3, Events())  # 750 and 250 a step: 1000 does not cross
    with pytest.raises(SpendLimitReached) as stopped:
        limit.check(spent_entries(300, 3), 3, Events())  # 900 + 300 would cross 1000
    message = str(stopped.value)
    assert "has spent 900 tokens and a step costs about 300 tokens" in message, message
    assert "step 3 would cross it" in message
    assert f"{command} --set harness.spend_limit.max_tokens=1500" in message
    assert "serve.yaml" not in message.replace("serve-frozen.yaml", "")
    planned = SpendLimit(None, 1000, PriceTable(), "g", "x", advice=spend_advice("e1", {}))
    with pytest.raises(SpendLimitReached, match=r"spend_limit\.max_tokens in experiment e1's plan"):
        planned.check(spent_entries(600, 2), 2, Events())


def test_a_cost_limit_prices_the_tokens_and_refuses_an_unpriced_model() -> None:
    prices = PriceTable({"x": Price(1.0, 3.0), "g": Price(0.0, 0.0)})
    limit = SpendLimit(0.002, None, prices, "g", "x")
    limit.require_prices(guided=True)
    assert limit.spent(spent_entries(1000, 1)).usd == pytest.approx((500 * 1 + 500 * 3) / 1e6)
    with pytest.raises(SpendLimitReached, match=r"max_cost_usd is 0.002 and the run has spent"):
        limit.check(spent_entries(1000, 1), 1, Events())
    unpriced = SpendLimit(1.0, None, PriceTable({"g": Price(0.0, 0.0)}), "g", "x")
    with pytest.raises(SpendLimitReached, match="x has no price"):
        unpriced.require_prices(guided=False)


def test_prices_in_either_settings_file_are_checked_and_read(tmp_path: Path) -> None:
    from harness.observe.cost import load_prices

    price = {"api/model": {"input_per_mtok": 2.0, "output_per_mtok": 6.0}}
    trained = copy.deepcopy(SERVE)
    trained["training"]["config"]["harness"]["pricing"] = price
    frozen = yaml.safe_load((DEFAULT_SERVE_YAML.parent / "serve-frozen.yaml").read_text())
    frozen["recipe"]["config"]["guidance-ttt"]["harness"]["pricing"] = price
    env = {"GUIDANCE_TTT_GUIDANCE_URL": "http://127.0.0.1:8000", "GUIDANCE_TTT_GUIDANCE_MODEL": "m"}
    for name, document in (("serve.yaml", trained), ("serve-frozen.yaml", frozen)):
        path = tmp_path / name
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        settings = RunSettings.load(path, environ=env, base_dir=tmp_path)  # the key is accepted
        table = load_prices(settings_prices=settings.pricing, environ={})
        assert table.prices["api/model"] == Price(2.0, 6.0), name
    for bad in ({"input_per_mtok": -1, "output_per_mtok": 1}, {"input_per_mtok": 1}):
        trained["training"]["config"]["harness"]["pricing"] = {"api/model": bad}
        path = tmp_path / "bad.yaml"
        path.write_text(yaml.safe_dump(trained, sort_keys=False))
        with pytest.raises(RunSettingsError, match=r"pricing"):
            RunSettings.load(path, environ=env, base_dir=tmp_path)


def test_the_preflights_calls_are_counted_in_the_spend_and_the_runs_cost(tmp_path: Path) -> None:
    """What `python -m harness.preflight --usage-file` leaves (its guidance and executor calls'
    usage) is logged by each launch of the run as one `preflight_usage` event, the file removed
    so it is never counted twice, and both the spend limit and the run's cost add it up."""
    import json

    from harness.observe.cost import preflight_usage
    from harness.observe.events import EventLog, read_events
    from harness.preflight.doctor import write_usage
    from harness.preflight.report import PreflightReport, ready_check
    from harness.run.spend import record_preflight_usage
    from harness.storage.run_files import event_log_path, preflight_usage_path

    state = tmp_path / "state"
    path, log_path = preflight_usage_path(state), event_log_path(state)
    report = PreflightReport(
        (
            ready_check("python", "3.12"),  # made no call: not written
            ready_check("guidance", "answered", {"prompt_tokens": 30, "completion_tokens": 4}),
            ready_check("executor", "answered", {"prompt_tokens": 12, "completion_tokens": 1}),
        )
    )
    totals = []
    for _launch in range(2):
        write_usage(path, report)
        assert set(json.loads(path.read_text())) == {"guidance", "executor"}
        events = EventLog(log_path)
        totals.append(record_preflight_usage(state, events))
        events.close()
        assert not path.exists()
    assert [t.guidance.total_tokens + t.executor.total_tokens for t in totals] == [47, 94]
    assert totals[1] == preflight_usage(read_events(log_path))  # what status and export add
    limit = SpendLimit(None, 100, PriceTable(), "g", "x", preflight=totals[1])
    assert limit.spent([]).tokens == 94
    with pytest.raises(SpendLimitReached, match="spent 194 tokens"):
        limit.check(spent_entries(100, 1), 1, Events())
    # A preflight that stopped the run left its calls; the next one adds its own to them.
    write_usage(path, report)
    write_usage(path, report)
    assert json.loads(path.read_text())["guidance"] == {
        "prompt_tokens": 60,
        "completion_tokens": 8,
        "calls": 2,
    }
    path.unlink()
    # A launch with nothing left by the preflight (it made no call) logs nothing new.
    events = EventLog(log_path)
    assert record_preflight_usage(state, events) == totals[1]
    events.close()
    assert len(read_events(log_path)) == 2
