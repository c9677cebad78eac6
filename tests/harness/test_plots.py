"""`guidance-ttt plot`: the two figures, checked by reading back what they draw (points, lines,
axis and legend labels) against facts computed here from the archive's entries, the fixture's
own bookkeeping (tests/state_fixture.py) and the published reference records."""

from __future__ import annotations

import csv
import subprocess
import sys
from collections import Counter
from pathlib import Path
from statistics import fmean

import pytest

from harness import results
from harness.cli import plot_series, plots
from harness.cli.entry import main
from harness.observe.cost import load_prices
from tests.state_fixture import FixtureRun, build_state_dir

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "results" / "reference"
PNG = b"\x89PNG\r\n\x1a\n"
PRICES = "z-ai/glm-5.2: {input_per_mtok: 0.5, output_per_mtok: 2.0}\n"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> FixtureRun:
    return build_state_dir(tmp_path_factory.mktemp("plots") / "state", committed_steps=4)


def _entries_by_step(run: FixtureRun) -> dict[int, list]:
    view = results.load_run(run.state_dir)
    steps: dict[int, list] = {}
    for entry in view.archive.entries.values():
        if 1 <= entry.timestep <= run.committed_steps:
            steps.setdefault(entry.timestep - 1, []).append(entry)
    return steps


def _every_x_label_is_step(figure_labels: list[dict]) -> None:
    named = [axes["x"] for axes in figure_labels if axes["x"]]
    assert named and set(named) == {"step"}


def _by_step(points: list[tuple[int, float]]) -> dict[int, list[float]]:
    out: dict[int, list[float]] = {}
    for step, y in points:
        out.setdefault(step, []).append(y)
    return {k: sorted(v) for k, v in out.items()}


def test_the_scores_figure_shows_every_rollout_step_mean_and_best_run_best_seed_and_reference(
    run, tmp_path
):
    view = results.load_run(run.state_dir)
    series = plot_series.from_run(view, "polyomino_packing", load_prices(None))
    reference = plot_series.reference_run(REFERENCE, "polyomino_packing")
    data = plots.plot(series, tmp_path / "run.png", None, reference)
    assert data.scores_png.read_bytes().startswith(PNG)
    assert data.health_png == tmp_path / "run-health.png"
    assert data.health_png.read_bytes().startswith(PNG)

    entries = _entries_by_step(run)
    valid = {
        step: sorted(e.verifier_raw_score for e in es if e.is_valid) for step, es in entries.items()
    }
    invalid = {step: sum(1 for e in es if not e.is_valid) for step, es in entries.items()}
    # every rollout is a point: valid ones at their score, invalid ones counted at the bottom
    assert _by_step(data.valid_points) == valid
    assert Counter(data.invalid_points) == Counter({s: n for s, n in invalid.items() if n})
    assert len(data.valid_points) + len(data.invalid_points) == run.committed_steps * 8
    assert data.step_mean == [(s, pytest.approx(fmean(v))) for s, v in valid.items()]
    assert data.step_best == [(s, max(v)) for s, v in valid.items()]
    # the run's best so far per step and the seed, as the fixture computed them
    assert data.steps == list(range(run.committed_steps))
    assert data.best_so_far == run.cumulative_best[1:]
    assert data.seed == run.seed_score
    labels = data.labels["scores"]
    low, high = labels["y_limits"]
    assert low < run.seed_score < high and labels["seed_above_grid"]
    # the reference: the published polyomino trajectory, update u drawn at step u - 1
    with (REFERENCE / "trajectory.csv").open() as handle:
        published = [r for r in csv.DictReader(handle) if r["task"] == "polyomino"]
    assert data.reference == [
        (int(r["update"]) - 1, float(r["cumulative_best"])) for r in published[1:]
    ]
    assert labels["x"] == "step" and labels["y"] == "score (higher is better)"
    assert labels["legend"] == [
        "valid rollout",
        "step mean (valid)",
        "step max (the step's best)",
        "best so far",
        f"seed {run.seed_score:.4f}",
        "reference run (published, public cases): Qwen3-14B, 8×16",
        *(
            f"{kind} failure (no score, drawn apart below)"
            for kind in ("format", "execution", "invalid")
            if data.invalid_by_kind.get(kind)
        ),
    ]
    # Failure kinds are told apart: each its own marker, at the steps its rollouts failed.
    kinds = {"format": ("guidance_format_error",), "execution": ("execution_error",)}
    kinds["invalid"] = ("invalid",)
    for kind, members in kinds.items():
        expected = Counter({s: sum(run.statuses[s].get(m, 0) for m in members) for s in entries})
        assert Counter(data.invalid_by_kind.get(kind, [])) == +expected
    assert set(data.invalid_by_kind) <= {"format", "execution", "invalid"}
    assert labels["counts_clear_of_title"]
    # Invalid rollouts sit in their own strip, the mean has no cap-like markers, and every
    # step says how many of its rollouts were valid.
    assert labels["invalid_apart"] and labels["mean_marker"] not in ("_", "|")
    assert data.counts == [(s, f"{run.valid[s]}/8") for s in range(run.committed_steps)]
    assert labels["title"].startswith("polyomino_packing: every rollout's score per step")


def test_the_health_figure_shows_valid_and_format_error_fractions_tokens_and_cost(run, tmp_path):
    prices = tmp_path / "prices.yaml"
    prices.write_text(PRICES)
    view = results.load_run(run.state_dir)
    series = plot_series.from_run(view, "polyomino_packing", load_prices(prices))
    data = plots.plot(series, tmp_path / "priced.png")
    entries = _entries_by_step(run)
    assert data.valid_fraction == [(s, run.valid[s] / 8) for s in range(run.committed_steps)]
    formats = [run.statuses[s].get("guidance_format_error", 0) / 8 for s in entries]
    assert data.format_error_fraction == list(enumerate(formats))

    def tokens(entry, key: str) -> int:
        usage = entry.metadata.get(key) or {}
        return usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)

    expected_tokens = [
        sum(
            tokens(e, "execution_response_usage") + tokens(e, "guidance_response_usage") for e in es
        )
        for es in entries.values()
    ]
    assert data.tokens == [(s, pytest.approx(t / 1e3)) for s, t in enumerate(expected_tokens)]
    executor_cost = [
        sum(
            (e.metadata.get("execution_response_usage") or {}).get("prompt_tokens", 0) * 0.5
            + (e.metadata.get("execution_response_usage") or {}).get("completion_tokens", 0) * 2.0
            for e in es
        )
        / 1e6
        for es in entries.values()
    ]  # the guidance model (self-hosted Qwen) costs 0 per token in the default table
    assert data.cost == [(s, pytest.approx(c)) for s, c in enumerate(executor_cost)]
    top, bottom, *_ = data.labels["health"]
    _every_x_label_is_step(data.labels["health"])
    assert top["legend"] == [
        "valid fraction",
        "guidance format error fraction",
        "format failures",
        "parse failures",
        "execution failures",
        "invalid failures",
    ]
    kinds = {
        "format": ("guidance_format_error",),
        "parse": ("parse_error",),
        "execution": ("execution_error", "environment_error"),
        "invalid": ("invalid",),
    }
    assert data.failure_fractions == {
        kind: [
            (s, sum(run.statuses[s].get(k, 0) for k in members) / 8)
            for s in range(run.committed_steps)
        ]
        for kind, members in kinds.items()
    }
    assert bottom["legend"] == ["executor tokens (k)", "guidance tokens (k)", "cost (USD)"]
    cost_axis = data.labels["health"][-1]
    assert cost_axis["cost_y_limits"][0] == 0.0  # a cost starts at nothing spent

    unpriced = plots.plot(
        plot_series.from_run(view, "polyomino_packing", load_prices(None)), tmp_path / "u.png"
    )
    assert unpriced.cost is None
    assert unpriced.labels["health"][1]["legend"][-1] == "cost unknown (z-ai/glm-5.2)"


def test_a_trajectory_csv_draws_its_best_so_far_and_valid_fraction_in_its_direction(tmp_path):
    rows = [r for r in results.read_trajectory_csv(REFERENCE / "trajectory.csv")]
    trimul = [r for r in rows if r.task == "trimul"]
    assert main(["plot", str(REFERENCE / "trajectory.csv"), "--task", "trimul",
                     "-o", str(tmp_path / "t.png")]) == 0  # fmt: skip
    assert (tmp_path / "t-health.png").read_bytes().startswith(PNG)
    series = plot_series.from_trajectory(trimul, "min")
    data = plots.plot(series, tmp_path / "again.png")
    assert data.steps == [r.update - 1 for r in trimul[1:]]
    assert data.best_so_far == [r.cumulative_best for r in trimul[1:]]
    assert data.seed == trimul[0].cumulative_best
    assert data.valid_points == data.invalid_points == [] and data.tokens is None
    assert data.valid_fraction == [
        (r.update - 1, r.valid_rollouts / r.sampled_rollouts) for r in trimul[1:]
    ]
    assert data.labels["scores"]["y"] == "score (lower is better)"
    assert data.labels["scores"]["legend"] == [
        "best so far",
        f"seed {trimul[0].cumulative_best:.4f}",
    ]
    _every_x_label_is_step([data.labels["scores"], *data.labels["health"]])


def test_plot_command_writes_both_figures_and_names_a_missing_task_or_reference(
    run, tmp_path, capsys
):
    png = tmp_path / "state.png"
    assert main(["plot", str(run.state_dir), "-o", str(png), "--reference"]) == 0
    out = capsys.readouterr().out
    assert f"wrote {png} and {tmp_path / 'state-health.png'}" in out
    assert f"{run.committed_steps} steps, best {run.cumulative_best[-1]:.4f}" in out
    reference = REFERENCE / "trajectory.csv"
    assert main(["plot", str(reference), "-o", str(tmp_path / "r.png")]) == 2
    assert "holds tasks ['polyomino', 'trimul']; choose one with --task" in capsys.readouterr().err
    argv = ["plot", str(run.state_dir), "-o", str(png), "--reference", "--reference-task", "nope"]
    assert main(argv) == 2
    assert "has no reference run of task 'nope'" in capsys.readouterr().err


def test_plot_without_matplotlib_names_the_extra_to_install_in_one_line(run, tmp_path):
    blocker = "import sys; sys.modules['matplotlib'] = None\n"
    code = blocker + "from harness.cli.entry import main; sys.exit(main(sys.argv[1:]))"
    result = subprocess.run(
        [sys.executable, "-c", code, "plot", str(run.state_dir), "-o", str(tmp_path / "x.png")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "guidance-ttt plot: needs matplotlib, from the `plot` extra: pip install -e '.[plot]'"
    ]


def test_both_figures_name_the_runs_mode_and_suite(tmp_path):
    """A frozen run (its guidance model not trained) is never drawn as if it were a trained
    one: both titles carry the mode and the suite its scores come from."""
    frozen = build_state_dir(
        tmp_path / "state",
        committed_steps=2,
        in_flight_slots=0,
        labels={"mode": "frozen", "suite": "generated:11:2"},
    )
    view = results.load_run(frozen.state_dir)
    data = plots.plot(plot_series.from_run(view, "polyomino_packing"), tmp_path / "f.png")
    for title in (data.labels["scores"]["title"], data.labels["health"][0]["title"]):
        assert title.endswith("\nfrozen run, arm guidance-ttt, seed 0, suite generated:11:2"), title


def test_the_reference_is_refused_beside_a_run_scored_on_another_suite(tmp_path, capsys):
    """The reference run was judged on the public cases; a run on a generated suite is not on
    its scale, so `--reference` is refused naming both suites (without it the plot is drawn)."""
    generated = build_state_dir(
        tmp_path / "state",
        committed_steps=1,
        in_flight_slots=0,
        labels={"mode": "frozen", "suite": "generated:11:2"},
    )
    png = str(tmp_path / "g.png")
    assert main(["plot", str(generated.state_dir), "-o", png, "--reference"]) == 2
    err = capsys.readouterr().err
    assert "suite generated:11:2, the reference run's from the public cases" in err
    assert "plot without --reference" in err
    assert main(["plot", str(generated.state_dir), "-o", png]) == 0


def test_a_reference_score_is_a_labelled_line(run, tmp_path):
    view = results.load_run(run.state_dir)
    series = plot_series.from_run(view, "polyomino_packing")
    data = plots.plot(series, tmp_path / "r.png", reference_line=(55.5, "human expert"))
    assert data.reference_line == (55.5, "human expert")
    assert "human expert 55.5000" in data.labels["scores"]["legend"]


def test_coinciding_lines_are_all_drawn_and_told_apart(tmp_path):
    """Every valid child an unchanged copy of its parent: the best so far, the step's mean and
    best and the seed are one value; each line is still drawn, with its own style, and the
    count labels stay clear of the title."""
    flat = build_state_dir(tmp_path / "flat", committed_steps=2, score_change=(0.0, 0.0))
    series = plot_series.from_run(results.load_run(flat.state_dir), "polyomino_packing", None)
    data = plots.plot(series, tmp_path / "flat.png")
    assert set(data.best_so_far) == {flat.seed_score} == {y for _, y in data.step_best}
    assert {y for _, y in data.step_mean} == {flat.seed_score}
    legend = data.labels["scores"]["legend"]
    for name in ("step mean (valid)", "step max (the step's best)", "best so far"):
        assert name in legend
    assert f"seed {flat.seed_score:.4f}" in legend
    assert data.labels["scores"]["counts_clear_of_title"]
