"""Reading what a run found: `guidance-ttt show STATE ENTRY` prints one rollout in full
(guidance, summary, verdict per case, program, diff to its parent, the prompts), `inspect
--json` is the same data as the tables, the seed's G clones appear once, and inspect's
summaries get the console's width. The state directory is made by the real store and
controller code (tests/state_fixture.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from harness import results
from harness.cli import views
from harness.cli.entry import main
from tests.state_fixture import FixtureRun, build_state_dir

REPO = Path(__file__).resolve().parents[1]
TASK = REPO / "harbor" / "polyomino_packing"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> FixtureRun:
    return build_state_dir(tmp_path_factory.mktemp("show") / "state", in_flight_slots=0)


def test_show_prints_one_rollout_with_its_code_diff_and_prompts(run: FixtureRun, capsys) -> None:
    prefix = run.best_entry_id[:10]
    argv = ["show", str(run.state_dir), prefix, "--code", "--diff-parent", "--prompts"]
    assert main([*argv, "--task", str(TASK)]) == 0
    out = capsys.readouterr().out
    entry = results.load_run(run.state_dir).archive.entries[run.best_entry_id]
    assert f"entry {entry.id} (step {entry.timestep - 1}" in out
    assert "verdict: valid" in out and "parent: entry" in out
    for section in ("guidance", "summary", "program", "diff to the parent"):
        assert f"--- {section}" in out
    assert entry.guidance.strip().splitlines()[0] in out
    assert entry.solution.strip().splitlines()[0] in out
    assert f"+++ entry {entry.id[:8]}" in out and "--- parent" in out
    assert "--- guidance prompt (system)" in out
    assert "<parent_code>" in out  # the executor's prompt, rebuilt from the task


def test_show_names_an_unknown_entry_in_one_line(run: FixtureRun, capsys) -> None:
    assert main(["show", str(run.state_dir), "zzzz-no-such"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no entry or node 'zzzz-no-such'" in err


def test_inspect_json_lists_the_seed_once_and_matches_the_archive(run: FixtureRun, capsys):
    assert main(["inspect", str(run.state_dir), "--json", "--top", "50"]) == 0
    report = json.loads(capsys.readouterr().out)
    entries = [row["entry_id"] for row in report["best"]]
    assert len(entries) == len(set(entries))
    archive = results.load_run(run.state_dir).archive
    seeds = [n for n in archive.nodes.values() if n.timestep == 0]
    assert len(seeds) == run.groups  # the archive keeps G clones of the seed ...
    assert sum(1 for row in report["best"] if row["step"] is None) <= 1  # ... shown once
    assert report["best"][0]["entry_id"] == run.best_entry_id
    assert [row["entry_id"] for row in report["lineage_of_best"]] == run.best_lineage_entry_ids
    assert report["mode"] == "trained"


def test_inspect_summaries_use_the_consoles_width(run: FixtureRun) -> None:
    view = results.load_run(run.state_dir)

    def longest_summary_cell(width: int) -> int:
        console = Console(width=width, record=True, color_system=None)
        views.render_inspect(view, console, 5, 0)
        table = console.export_text().split("Lineage of the best")[0]
        return max(len(line.rstrip()) for line in table.splitlines())

    assert longest_summary_cell(200) > longest_summary_cell(80)
