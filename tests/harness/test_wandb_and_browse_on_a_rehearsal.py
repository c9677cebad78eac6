"""Watching a rehearsal as a researcher would: `guidance-ttt rehearse` with W&B offline (real
`reef serve`, the real local judge, the stand-in models of `harness.rehearsal.stand_ins`), then
its W&B runs read back with W&B's own record type, and `guidance-ttt browse` on its state
directory in a real headless Chromium, with a screenshot. Also: serve.yaml's block is the one
Reef resolves (`reef serve --print-config`), and a broken W&B leaves the rehearsal unharmed.
"""

from __future__ import annotations

import io
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from harness.observe.search_metrics import SAMPLE_COLUMNS
from harness.observe.wandb_sink import SAMPLES_KEY
from harness.rehearsal.rehearse import TOKEN, RehearsalOptions, rehearse
from harness.rehearsal.stand_ins import task_dir
from harness.results import load_run
from harness.storage.run_files import run_id
from tests.browser import browser, chromium_or_skip
from tests.rehearsal_support import JUDGE_POLL_S
from tests.wandb_records import OfflineRun, offline_runs

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
pytest.importorskip("wandb", reason="the watch extra (pip install -e '.[watch]') brings wandb")

REPO = Path(__file__).resolve().parents[2]
SCENARIO = "guidance-ttt-polyomino-packing"
OFFLINE = (("enabled", True), ("mode", "offline"))
#: Every per-step metric the docs list (docs/observability.md, "Watching a run in W&B").
METRICS = (
    "search/step",
    "search/best_so_far",
    "search/step_best",
    "search/step_mean",
    "search/step_median",
    "search/valid_fraction",
    "search/format_error_fraction",
    "search/candidate_failure_fraction",
    "search/archive_nodes",
    "search/archive_entries",
    "search/tokens/executor",
    "search/tokens/guidance",
    "search/time/step_s",
    "search/time/guidance_s",
    "search/time/executor_s",
    "search/time/judge_s",
    "search/time/judge_total_s",
)


@pytest.fixture(scope="module")
def wandb_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    home = tmp_path_factory.mktemp("wandb-home")
    with pytest.MonkeyPatch.context() as env:
        for name in ("WANDB_API_KEY", "WANDB_BASE_URL", "WANDB_ENTITY", "WANDB_PROJECT"):
            env.delenv(name, raising=False)
        env.setenv("WANDB_MODE", "offline")
        env.setenv("WANDB_SILENT", "true")
        for name in ("WANDB_DIR", "WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
            env.setenv(name, str(home / name.lower()))
        yield


def run_rehearsal(state: Path, steps: int, wandb: tuple = OFFLINE) -> str:
    if not (task_dir() / "solution" / "seed.json").is_file():
        pytest.skip(f"{task_dir()}/solution/seed.json (the task's seed archive) is missing")
    out = io.StringIO()
    options = RehearsalOptions(steps=steps, wandb=wandb, judge_poll_s=JUDGE_POLL_S)
    result = rehearse(state, options, Console(file=out))
    assert result.next_step == steps, out.getvalue()[-3000:]
    return out.getvalue()


@pytest.fixture(scope="module")
def rehearsed(wandb_env: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    state = tmp_path_factory.mktemp("watch") / "state"
    run_rehearsal(state, steps=2)
    return state


def runs_by_kind(state: Path) -> tuple[list[OfflineRun], list[OfflineRun]]:
    runs = offline_runs(state / "wandb")
    search = [r for r in runs if r.name.endswith("-search")]
    return search, [r for r in runs if r not in search]


def test_the_search_run_has_every_steps_metrics_and_samples(rehearsed: Path) -> None:
    """The first two steps' search run: its first offline directory (the module's resume test,
    in whatever order it runs, adds a second directory of the same run)."""
    search, reef = runs_by_kind(rehearsed)
    assert len({r.run_id for r in search}) == 1
    run = min(search, key=lambda r: r.directory.name)  # offline-run-<time>-<id>: oldest first
    group = f"run-{run_id(rehearsed)[:8]}/{SCENARIO}"  # a plain run's group is its own
    assert (run.project, run.group) == ("guidance-ttt", group)
    rows = [row for row in run.history if "search/step" in row]
    assert [row["search/step"] for row in rows] == [0, 1]
    for row in rows:
        missing = [name for name in METRICS if name not in row]
        assert not missing, missing
    view = load_run(rehearsed)
    tables = run.tables(SAMPLES_KEY)
    assert len(tables) == 2
    for step, table in enumerate(tables):
        assert table["columns"] == list(SAMPLE_COLUMNS)
        assert len(table["data"]) == 8  # the 2 × 4 grid
        receipts = {
            e.metadata["agent_record_id"]
            for e in view.archive.entries.values()
            if e.timestep == step + 1
        }
        assert {row[SAMPLE_COLUMNS.index("receipt")] for row in table["data"]} == receipts
    # One of the rehearsal's answers is malformed guidance: its fraction shows in step 0.
    assert rows[0]["search/format_error_fraction"] > 0
    # Reef's own tracker, configured by the same block, wrote its run into the same group.
    assert reef and all((r.project, r.group) == ("guidance-ttt", group) for r in reef)


def test_a_resumed_rehearsal_continues_the_same_search_run(rehearsed: Path) -> None:
    (before,), reef_before = runs_by_kind(rehearsed)
    run_rehearsal(rehearsed, steps=3)
    search, reef_after = runs_by_kind(rehearsed)
    assert {r.run_id for r in search} == {before.run_id}
    # Reef's tracker derives its id from the names the run's settings copy gives it: the
    # resumed run writes into the run it wrote before.
    assert {r.run_id for r in reef_after} == {r.run_id for r in reef_before}
    steps = [row["search/step"] for r in search for row in r.history if "search/step" in row]
    assert sorted(steps) == [0, 1, 2]


def test_browse_shows_the_rehearsal_in_a_browser(rehearsed: Path, tmp_path: Path) -> None:
    executable = chromium_or_skip()
    page = tmp_path / "rehearsal.html"
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli.entry", "browse", str(rehearsed), "-o", str(page)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert TOKEN not in page.read_text()  # the Reef token of the rehearsal's settings
    view = load_run(rehearsed)
    entries = len(view.archive.entries) + len(view.in_flight)
    with browser(executable) as b:
        b.open(page)
        assert b.page.locator("circle.node").count() == entries
        b.page.locator("circle.node:not(.failed)").last.click(force=True)
        assert b.page.locator("#detail pre.guidance").text_content().strip()
        shot = tmp_path / "rehearsal.png"
        b.page.screenshot(path=str(shot))
        assert b.problems == []
    from PIL import Image

    image = Image.open(shot)
    assert image.size == (1400, 900)
    tree = image.convert("L").crop((0, 140, 700, 700))
    low, high = tree.getextrema()
    assert high - low > 100, "the tree pane is blank"


def test_serve_yaml_configures_reefs_tracker_with_the_same_block(tmp_path: Path) -> None:
    reef = Path(sys.executable).parent / "reef"
    done = subprocess.run(
        [str(reef), "serve", "-c", str(REPO / "serve.yaml"), "--print-config"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if "observability.wandb =" in x)
    # The reference's values (its serve.yaml's observability.wandb block).
    assert '"enabled": false' in line and '"project": "reef"' in line
    assert '"mode": "online"' in line and '"upload_checkpoints": false' in line
    assert "(file)" in line


def test_an_unwritable_wandb_directory_leaves_the_rehearsal_unharmed(
    wandb_env: None, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where W&B wants a directory\n")
    broken = (*OFFLINE, ("directory", str(blocker / "wandb")))
    with caplog.at_level(logging.WARNING, logger="harness.observe.wandb_sink"):
        run_rehearsal(tmp_path / "state", steps=1, wandb=broken)
    warnings = [r.getMessage() for r in caplog.records if r.name == "harness.observe.wandb_sink"]
    assert len(warnings) == 1 and "W&B logging is off" in warnings[0]
    assert load_run(tmp_path / "state").committed_step == 0


def test_wandb_sync_recognises_the_offline_runs(rehearsed: Path) -> None:
    folders = sorted(str(p) for p in (rehearsed / "wandb" / "wandb").glob("offline-run-*"))
    wandb = Path(sys.executable).parent / "wandb"
    done = subprocess.run(
        [str(wandb), "sync", "--dry-run", *folders],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert f"Would sync {len(folders)} run(s)" in done.stdout + done.stderr
