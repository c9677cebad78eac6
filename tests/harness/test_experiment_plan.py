"""Experiment plans and the estimate, without running anything: what a plan expands to, the
plan mistakes refused by name, the per-run settings copy a real-model plan writes, and
`guidance-ttt estimate`'s figures against the grid and the arm."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.arms import Arm
from harness.cli.estimate import estimate
from harness.experiment.plan import PlannedRun, load_plan
from harness.experiment.runs import run_settings_document
from harness.observe.cost import Price, PriceTable
from harness.settings.run_settings import DEFAULT_SERVE_YAML, RunSettings
from harness.settings.task_dirs import bundled_task_dir

REPO = Path(__file__).resolve().parents[2]
FROZEN_ENV = {
    "GUIDANCE_TTT_GUIDANCE_URL": "http://127.0.0.1:8000",
    "GUIDANCE_TTT_GUIDANCE_MODEL": "m",
}


def plan_file(tmp_path: Path, **plan: object) -> Path:
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    return path


def test_a_plan_expands_to_arms_times_seeds_with_one_directory_each(tmp_path: Path) -> None:
    path = plan_file(
        tmp_path,
        name="p",
        stand_ins=True,
        arms=["guidance-ttt", {"arm": "unguided", "parent_selection": "greedy"}, "best-of-n"],
        seeds=[0, 4],
    )
    runs = load_plan(path).runs()
    assert [(r.directory, r.arm.selection, r.arm.run_seed) for r in runs] == [
        ("guidance-ttt-s0", "puct", 0),
        ("guidance-ttt-s4", "puct", 4),
        ("unguided-greedy-s0", "greedy", 0),
        ("unguided-greedy-s4", "greedy", 4),
        ("best-of-n-s0", "seed", 0),
        ("best-of-n-s4", "seed", 4),
    ]


@pytest.mark.parametrize(
    ("plan", "named"),
    [
        (
            {"arms": ["unguided"], "seeds": [0], "stand_ins": True, "rollouts": 10**9},
            "rollouts must be a whole number from 1 to 1,024, got 1000000000",
        ),
        (
            {"arms": ["unguided"], "seeds": [0], "stand_ins": True, "groups": 10**9},
            "groups must be a whole number from 1 to 1,024",
        ),
        (
            {"arms": ["unguided", "best-of-n"], "seeds": list(range(501)), "stand_ins": True},
            r"2 arms × 501 seeds is 1002 runs; a plan names at most 1000 runs \(MAX_RUNS\)",
        ),
        ({"arms": ["unguided"], "seeds": [0, 0], "stand_ins": True}, "repeat a seed"),
        ({"name": "../x", "arms": ["unguided"], "seeds": [0], "stand_ins": True}, "not a path"),
        ({"name": "/abs/x", "arms": ["unguided"], "seeds": [0], "stand_ins": True}, "not a path"),
        ({"name": "..", "arms": ["unguided"], "seeds": [0], "stand_ins": True}, "not a path"),
        ({"arms": ["unguided"], "seeds": [0], "settings": "nowhere.yaml"}, "is not a file"),
    ],
)
def test_an_unbounded_plan_or_a_name_that_is_a_path_is_refused_naming_the_bound(
    tmp_path: Path, plan: dict, named: str
) -> None:
    with pytest.raises(ValueError, match=named) as refused:
        load_plan(plan_file(tmp_path, **plan))
    assert "\n" not in str(refused.value)


def test_a_missing_settings_file_names_where_it_was_looked_for(tmp_path: Path) -> None:
    path = plan_file(tmp_path, arms=["unguided"], seeds=[0], settings="serve-frozen.yaml")
    with pytest.raises(ValueError) as refused:
        load_plan(path)
    message = str(refused.value)
    assert str(tmp_path / "serve-frozen.yaml") in message
    assert f"read relative to the plan's folder {tmp_path}" in message


def test_yaml_aliases_in_a_plan_are_refused_before_they_expand(tmp_path: Path) -> None:
    """The billion laughs: nine levels of ten aliases each would be 10⁹ strings."""
    lines = ['a0: &a0 "lol"']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
    path = tmp_path / "plan.yaml"
    path.write_text("\n".join([*lines, "arms: [unguided]", "seeds: [0]", "stand_ins: true"]))
    with pytest.raises(ValueError, match=r"line 1: YAML anchors and aliases .* are refused"):
        load_plan(path)
    path.write_text("x" * (70 * 1024))
    with pytest.raises(ValueError, match="a plan is at most 64 KiB"):
        load_plan(path)


@pytest.mark.parametrize(
    ("plan", "named"),
    [
        ({"arms": ["unguided"], "seeds": [0], "stand_ins": True, "step": 2}, "unknown keys"),
        ({"arms": ["random"], "seeds": [0], "stand_ins": True}, "arm 'random' is not one of"),
        ({"arms": ["unguided"], "seeds": [], "stand_ins": True}, "give `arms` and `seeds`"),
        ({"arms": ["unguided"], "seeds": [0]}, "give `settings:`"),
        (
            {"arms": ["unguided"], "seeds": [0], "stand_ins": True, "steps": "two"},
            r"steps must be a whole number from 1 to 10,000, got 'two'; e.g. steps: 2",
        ),
        (
            {"arms": ["unguided"], "seeds": [0], "stand_ins": True, "parallel": 0},
            "parallel must be a whole number from 1 to 64, got 0",
        ),
        (
            {"arms": ["unguided"], "seeds": [0], "stand_ins": True, "judge": {"cases": 1.5}},
            "judge.cases must be a whole number from 1 to 100,000, got 1.5",
        ),
        (
            {"arms": ["unguided"], "seeds": [0], "stand_ins": True, "judge": 3},
            r"judge is a mapping, e.g. judge: \{cases: 2, seed: 11\}",
        ),
    ],
)
def test_a_wrong_plan_is_refused_naming_what_to_fix(tmp_path: Path, plan: dict, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        load_plan(plan_file(tmp_path, **plan))


def test_a_real_model_plan_writes_each_run_a_settings_copy_the_harness_accepts(
    tmp_path: Path,
) -> None:
    path = plan_file(
        tmp_path,
        settings=str(REPO / "serve-frozen.yaml"),
        arms=["unguided"],
        seeds=[3],
        steps=4,
        groups=2,
        rollouts=2,
        spend_limit={"max_tokens": 100000},
    )
    plan = load_plan(path)
    state = tmp_path / "unguided-s3"
    document = run_settings_document(
        plan, PlannedRun(Arm("unguided", "puct", 3), state.name), state
    )
    copy = tmp_path / "copy.yaml"
    copy.write_text(yaml.safe_dump(document))
    settings = RunSettings.load(copy, environ={}, base_dir=tmp_path)  # no guidance endpoint
    assert (settings.arm, settings.run_seed, settings.max_tokens) == ("unguided", 3, 100000)
    assert (settings.groups_per_step, settings.rollouts_per_group, settings.steps) == (2, 2, 4)
    assert settings.state_dir == state and settings.frozen
    # The copy names the run for W&B (both writers): the experiment's group, arm and seed, and
    # the run's own id (made in its state directory), which a resume reads back.
    from harness.storage.run_files import run_id

    assert settings.experiment_name == plan.name
    block = document["observability"]["wandb"]
    assert block["group_prefix"] == plan.name
    assert block["name_prefix"] == f"{plan.name}-unguided-s3-{run_id(state)[:8]}"
    again = run_settings_document(plan, PlannedRun(Arm("unguided", "puct", 3), state.name), state)
    assert again["observability"]["wandb"]["name_prefix"] == block["name_prefix"]


def test_the_estimate_counts_every_rollout_and_no_guidance_for_an_unguided_arm(
    tmp_path: Path,
) -> None:
    prices = PriceTable({"m": Price(1.0, 2.0), "openai/gpt-oss-120b": Price(0.5, 0.5)})
    task = bundled_task_dir("polyomino_packing")
    frozen = RunSettings.load(REPO / "serve-frozen.yaml", environ=FROZEN_ENV, base_dir=REPO)
    guided = estimate(frozen, prices, task, executor_completion=1000)
    assert guided.rollouts == frozen.steps * frozen.groups_per_step * frozen.rollouts_per_group
    assert guided.guidance.calls == guided.executor.calls == guided.rollouts
    assert guided.guidance.completion_tokens == guided.rollouts * frozen.guidance_max_tokens // 2
    assert guided.executor.completion_tokens == guided.rollouts * 1000
    expected = (
        guided.guidance.prompt_tokens * 1.0
        + guided.guidance.completion_tokens * 2.0
        + guided.executor.total_tokens * 0.5
    ) / 1e6
    assert guided.usd == pytest.approx(expected)
    assert any("characters / 4" in line for line in guided.assumptions)
    document = yaml.safe_load((REPO / "serve-frozen.yaml").read_text())
    document["recipe"]["config"]["guidance-ttt"]["harness"]["experiment"]["arm"] = "unguided"
    path = tmp_path / "unguided.yaml"
    path.write_text(yaml.safe_dump(document))
    unguided = estimate(RunSettings.load(path, environ=FROZEN_ENV, base_dir=REPO), prices, task)
    assert unguided.guidance.calls == 0 and unguided.guidance.total_tokens == 0
    assert unguided.executor.calls == guided.rollouts
    trained = RunSettings.load(DEFAULT_SERVE_YAML, environ={})
    assert estimate(trained, PriceTable(), task).unpriced  # no prices given: unknown, not free


def test_estimate_runs_from_the_frozen_settings_file_alone(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """README's first experiment command, without any endpoint variable set: exit 0, the
    figures, and what keeps the cost unknown with the exact key that prices it."""
    from harness.cli.entry import main

    for name in [*FROZEN_ENV, "GUIDANCE_TTT_PRICING"]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(REPO)
    assert main(["estimate", "--config", "serve-frozen.yaml"]) == 0
    out = capsys.readouterr().out
    assert "estimate for serve-frozen.yaml: " in out and " tokens (guidance " in out
    assert "model not set (GUIDANCE_TTT_GUIDANCE_MODEL): set it to price its calls" in out
    assert (
        "not needed for an estimate: GUIDANCE_TTT_GUIDANCE_MODEL, GUIDANCE_TTT_GUIDANCE_URL" in out
    )
    monkeypatch.setenv("GUIDANCE_TTT_GUIDANCE_MODEL", "acme/unpriced-1")
    assert main(["estimate", "--config", "serve-frozen.yaml"]) == 0
    out = capsys.readouterr().out
    key = "recipe.config.guidance-ttt.harness.pricing.acme/unpriced-1"
    assert f"no price for acme/unpriced-1: set {key}: {{input_per_mtok: USD, " in out
    assert "in serve-frozen.yaml (or --pricing FILE)" in out
