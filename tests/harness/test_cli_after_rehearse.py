"""`guidance-ttt rehearse` for one step, then `status`, `inspect`, `plot` and `export` on its
state directory, each as the user runs it (a subprocess of the CLI): the "No GPU? Start here"
path of the README. Real `reef serve`, the real local judge, the stand-in models."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.rehearsal.stand_ins import EXECUTOR_MODEL, GUIDANCE_MODEL, task_dir

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli.entry", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def rehearsed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    if not (task_dir() / "solution" / "seed.json").is_file():
        pytest.skip(f"{task_dir()}/solution/seed.json (the task's seed archive) is missing")
    state = tmp_path_factory.mktemp("rehearse") / "state"
    done = cli("rehearse", str(state), "--steps", "1", timeout=500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return state, done.stdout + done.stderr


def test_rehearse_runs_one_frozen_step_and_prints_how_to_look(rehearsed: tuple[Path, str]) -> None:
    state, output = rehearsed
    assert "rehearsal done: steps 0..0 committed" in output
    for command in ("status", "inspect", "plot", "export"):
        assert f"guidance-ttt {command}" in output
    assert "check_results.py" in output
    # The live display ran: one line per rollout and the step's summary line (plain output).
    assert output.count("step 0 g") == 8
    assert "frozen guidance (nothing trained)" in output
    settings = (state / "serve-frozen.yaml").read_text()
    assert "tttd.recipe:TTTDReportsRecipe" in settings and "mode: frozen" in settings
    # observability.wandb is off by default: neither Reef nor the harness logged anything.
    assert "enabled: false" in settings
    assert not (state / "wandb").exists()


def test_status_and_inspect_show_the_mode_and_the_suite(rehearsed: tuple[Path, str]) -> None:
    state, _ = rehearsed
    status = cli("status", str(state), "--json", "--timeout", "1")
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    assert report["mode"] == "frozen"
    assert report["suite"] == "generated:11:2"
    assert report["seed_rescored_from"]["suite"] == "public"
    assert (report["next_step"], report["committed_steps"]) == (1, 1)
    inspect = cli("inspect", str(state))
    assert inspect.returncode == 0, inspect.stderr
    assert "frozen run; scores on suite generated:11:2" in inspect.stdout


def test_plot_and_a_checked_export(rehearsed: tuple[Path, str], tmp_path: Path) -> None:
    state, _ = rehearsed
    png = tmp_path / "trajectory.png"
    plot = cli("plot", str(state), "-o", str(png))
    assert plot.returncode == 0, plot.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = tmp_path / "results"
    export = cli("export", str(state), "--out", str(out))
    assert export.returncode == 0, export.stderr
    (run,) = json.loads((out / "runs.json").read_text())["runs"]
    assert (run["mode"], run["suite"]) == ("frozen", "generated:11:2")
    assert run["models"] == {"guidance": GUIDANCE_MODEL, "executor": EXECUTOR_MODEL}
    checked = subprocess.run(
        [sys.executable, "results/check_results.py", str(out), "--state-dir", str(state)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # A trained run's records never land beside a frozen run's.
    runs = json.loads((out / "runs.json").read_text())
    runs["runs"][0]["mode"] = "trained"
    (out / "runs.json").write_text(json.dumps(runs))
    mixed = cli("export", str(state), "--out", str(out))
    assert mixed.returncode == 2 and "never mixed" in mixed.stderr


def test_a_finished_rehearsal_refuses_in_one_line_before_starting_anything(
    rehearsed: tuple[Path, str],
) -> None:
    """No judge, no reef serve: the refusal comes from the state directory alone (measured in
    the closing note, not timed here), names the steps and the flag, and no serve.yaml."""
    state, _ = rehearsed
    before = sorted(p.name for p in state.iterdir())
    done = cli("rehearse", str(state), "--steps", "1")
    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert line == (
        f"guidance-ttt rehearse: run already finished: {state} has 1 of 1 step committed; "
        "pass more steps (--steps, or `steps:` in a plan) to continue it, or name a new "
        "directory"
    )
    assert "serve.yaml" not in line
    assert sorted(p.name for p in state.iterdir()) == before  # nothing was started or written


def test_wandb_offline_without_wandb_is_refused_at_start_naming_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.cli.entry import main

    monkeypatch.setitem(sys.modules, "wandb", None)  # as if the package were not installed
    state = tmp_path / "r"
    assert main(["rehearse", str(state), "--wandb", "offline"]) == 2
    out = capsys.readouterr()
    (line,) = out.err.strip().splitlines()
    assert line.startswith("guidance-ttt rehearse: --wandb offline needs the wandb package")
    assert "pip install -e '.[watch]'" in line and out.out == ""
    assert not state.exists()  # nothing was started or written
