"""The `guidance-ttt` reports agree with each other on one state directory.

`status` (text and `--json`), `inspect`, `export`, `plot` and the live progress display
(replaying the run's own `events.jsonl`) each show the seed, the best score, the step that
reached it, the valid counts and the cost. On a finished run and on a run with a step in flight
(both built by tests/state_fixture.py with the real store, resume state and event log) these
must say the same thing, every score rounded the same way, with no placeholder (`None`, `?`)
and no table wider than 80 columns.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from harness import results
from harness.cli import plot_series, plots
from harness.cli.entry import main
from harness.observe.cost import load_prices
from harness.observe.events import read_events
from harness.observe.progress import ProgressDisplay
from tests.reef_fixtures import free_port
from tests.state_fixture import EXECUTOR_MODEL, FixtureRun, build_state_dir

PRICES = "z-ai/glm-5.2: {input_per_mtok: 0.5, output_per_mtok: 2.0}\n"


def _down() -> str:
    return f"http://127.0.0.1:{free_port()}"


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


def _status(state: Path, capsys, *extra: str) -> str:
    return _run(
        [
            "status",
            str(state),
            "--reef-url",
            _down(),
            "--judge-url",
            _down(),
            "--timeout",
            "1",
            *extra,
        ],
        capsys,
    )


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> FixtureRun:
    return build_state_dir(tmp_path_factory.mktemp("agree") / "done", in_flight_slots=0)


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> FixtureRun:
    return build_state_dir(tmp_path_factory.mktemp("agree") / "live", in_flight_slots=3)


def _replay(state: Path) -> list[str]:
    """The lines the progress display prints for the run's own event log (no terminal)."""
    buffer = io.StringIO()
    display = ProgressDisplay(Console(file=buffer, width=200), plain=True)
    for event in read_events(state / "guidance-run" / "events.jsonl"):
        fields = {k: v for k, v in event.items() if k not in ("event", "ts")}
        display.emit(event["event"], **fields)
    display.close()
    return buffer.getvalue().splitlines()


def _no_placeholders_and_80_columns(*outputs: str) -> None:
    for out in outputs:
        assert "None" not in out and " ? " not in out, out
        cases = [line for line in out.splitlines() if line.startswith("Case ")]
        assert not [line for line in cases if line.endswith("(+0.0000)")], out
        assert "unpriced" not in out
        widest = max(len(line.rstrip()) for line in out.splitlines())
        assert widest <= 80, out


def test_a_finished_run_reads_the_same_in_status_inspect_export_and_progress(
    finished, capsys, tmp_path
):
    state = finished.state_dir
    prices = tmp_path / "prices.yaml"
    prices.write_text(PRICES)
    text = _status(state, capsys, "--pricing", str(prices))
    report = json.loads(_status(state, capsys, "--json", "--pricing", str(prices)))
    inspect = _run(["inspect", str(state), "--cases", "1"], capsys)
    out = tmp_path / "records"
    exported = _run(["export", str(state), "--out", str(out), "--pricing", str(prices)], capsys)
    record = json.loads((out / "runs.json").read_text())["runs"][0]
    progress = _replay(state)
    view = results.load_run(state)
    drawn = plots.plot(
        plot_series.from_run(view, "polyomino_packing", load_prices(prices)), tmp_path / "p.png"
    )
    _no_placeholders_and_80_columns(text, inspect)

    best, seed, step = finished.best_score, finished.seed_score, finished.best_update - 1
    n = finished.committed_steps
    # finished: no "next to run" step, and the record says completed
    assert report["finished"] is True and record["status"] == "completed"
    assert f"step           finished, {n} of {n} steps committed, 2×4" in text
    assert "next to run" not in text and "open step" not in text
    # best, the step that reached it, and the seed, everywhere
    assert report["best_score"] == record["search"]["best_score"] == best
    assert report["seed_score"] == record["search"]["seed_score"] == seed
    assert report["best_step"] == record["search"]["best_update"] - 1 == step
    assert f"best score     {best:.4f} at step {step}; seed {seed:.4f} ({best - seed:+.4f})" in text
    top = inspect.split("Best candidates", 1)[1].splitlines()
    assert next(line for line in top if line.strip().startswith("1 ")).split()[1:3] == [
        f"{best:.4f}",
        str(step),
    ]
    assert progress[-1] == f"run finished: {n} steps committed; run best {best:.4f}"
    assert f"{n} steps, {seed:.4f} → {best:.4f}, {sum(finished.valid)}/{n * 8} valid" in exported
    assert drawn.best_so_far[-1] == best and drawn.seed == seed
    assert drawn.best_so_far.index(best) == step  # the plot's first step at the best
    # the progress display's run best after each step is the trajectory's cumulative best
    summaries = [line for line in progress if " | run best " in line]
    shown = [float(re.search(r"run best (\S+)", line).group(1)) for line in summaries]
    assert shown == [round(b, 4) for b in finished.cumulative_best[1:]]
    assert min(shown) >= round(seed, 4)  # never a score below the seed called the run's best
    # valid counts per step: inspect's outcome table, the export, the step summaries
    outcomes = inspect.split("Outcomes per step", 1)[1].split("Case 1", 1)[0]
    rows = {
        int(line.split()[0]): int(line.split()[1])
        for line in outcomes.splitlines()
        if line.split()[:1] and line.split()[0].isdigit()
    }
    assert rows == dict(enumerate(finished.valid))
    assert record["search"]["valid_rollouts"] == sum(finished.valid)
    assert [round(f * 8) for _, f in drawn.valid_fraction] == finished.valid
    valid_in_progress = [re.search(r"valid (\d+)/", line).group(1) for line in summaries]
    assert [int(v) for v in valid_in_progress] == finished.valid
    # the cost: the same dollars in status and the record, no unknown part (every model priced)
    assert report["cost"] == record["usage"]["cost"]
    assert f"cost so far    ${record['usage']['cost']['usd']:,.2f}" in text
    assert sum(c for _, c in drawn.cost or []) == pytest.approx(record["usage"]["cost"]["usd"])
    # the case study names a real gain and its entry (the id kind `show` opens)
    case = inspect.split("Case 1:", 1)[1]
    assert case.startswith(" step ")
    assert re.search(r"\nentry \S+", case)


def test_a_run_with_a_step_in_flight_counts_the_open_step_in_status_only(running, capsys):
    state = running.state_dir
    text = _status(state, capsys)
    report = json.loads(_status(state, capsys, "--json"))
    inspect = _run(["inspect", str(state)], capsys)
    _no_placeholders_and_80_columns(text, inspect)
    n = running.committed_steps
    assert report["finished"] is False
    assert f"step           {n} in progress ({n} of {n + 3} committed), 2×4" in text
    assert f"step {n}: {len(running.in_flight_done)}/8 journaled; missing" in text
    # the unpriced executor is named, with where to set its price, never as $0.00
    flat = " ".join(text.split())
    assert f"cost so far unknown (no price for {EXECUTOR_MODEL}); set training.config" in flat
    # the open step is not in inspect's per-step outcomes (committed steps only)
    outcomes = inspect.split("Outcomes per step", 1)[1]
    steps = [line.split()[0] for line in outcomes.splitlines() if line.split()[:1]]
    assert str(n) not in [s for s in steps if s.isdigit()]


def test_the_models_of_a_run_before_its_first_commit_come_from_its_events(tmp_path, capsys):
    """Before the first commit there is no resume state; the cost still names the executor
    model (from `run_started`) instead of `?`."""
    fixture = build_state_dir(tmp_path / "state", committed_steps=0, in_flight_slots=3)
    view = results.load_run(fixture.state_dir)
    assert view.resume is None
    assert results.models(view) == ("Qwen/Qwen3-8B", EXECUTOR_MODEL)
    text = _status(fixture.state_dir, capsys)
    assert f"unknown (no price for {EXECUTOR_MODEL})" in text


def test_inspect_of_a_run_without_any_improvement_says_so_instead_of_a_zero_gain(tmp_path, capsys):
    """Every valid child an unchanged copy of its parent: no case study with a `+0.0000` gain,
    a best score at the seed, and the same in the record."""
    fixture = build_state_dir(
        tmp_path / "state", committed_steps=2, in_flight_slots=0, score_change=(0.0, 0.0)
    )
    assert results.case_studies(results.load_run(fixture.state_dir).archive, 100) == []
    inspect = _run(["inspect", str(fixture.state_dir), "--cases", "3"], capsys)
    text = _status(fixture.state_dir, capsys)
    _no_placeholders_and_80_columns(inspect, text)
    assert "Case " not in inspect
    assert "No case studies: no valid child improved on its parent yet." in inspect
    seed = fixture.seed_score
    assert f"best score     {seed:.4f}, the seed's (no step beat it yet)" in text
    _run(["export", str(fixture.state_dir), "--out", str(tmp_path / "r")], capsys)
    record = json.loads((tmp_path / "r" / "runs.json").read_text())["runs"][0]
    assert record["selected_case"] is None and record["search"]["best_update"] == 0


def test_a_frozen_run_is_labelled_frozen_with_its_suite_in_status_export_and_plot(tmp_path, capsys):
    labels = {"mode": "frozen", "suite": "generated:11:2"}
    fixture = build_state_dir(
        tmp_path / "state", committed_steps=2, in_flight_slots=0, labels=labels
    )
    state = fixture.state_dir
    text = _status(state, capsys)
    report = json.loads(_status(state, capsys, "--json"))
    _run(["export", str(state), "--out", str(tmp_path / "r")], capsys)
    record = json.loads((tmp_path / "r" / "runs.json").read_text())["runs"][0]
    drawn = plots.plot(
        plot_series.from_run(results.load_run(state), "polyomino_packing"), tmp_path / "p.png"
    )
    _no_placeholders_and_80_columns(text)
    assert report["mode"] == record["mode"] == "frozen"
    assert report["suite"] == record["suite"] == "generated:11:2"
    # The run row ends in the mode; the path before it may wrap at any width (long temp paths).
    run_row = " ".join(text.split("suite ", 1)[0].split())
    assert run_row.endswith("(frozen)") and "state" in run_row
    assert "suite          generated:11:2" in text
    assert drawn.labels["scores"]["title"].endswith(
        "frozen run, arm guidance-ttt, seed 0, suite generated:11:2"
    )


def test_status_and_export_show_what_both_models_read(tmp_path, capsys):
    """The run's task text (`harness.task_text`, from its resume identity) is shown by status
    and export."""
    fixture = build_state_dir(tmp_path / "state", committed_steps=1, in_flight_slots=0)
    text = _status(fixture.state_dir, capsys)
    report = json.loads(_status(fixture.state_dir, capsys, "--json"))
    _run(["export", str(fixture.state_dir), "--out", str(tmp_path / "r")], capsys)
    record = json.loads((tmp_path / "r" / "runs.json").read_text())["runs"][0]
    assert report["task_text"] == record["task_text"] == "reference"
    assert "task text      reference" in text
