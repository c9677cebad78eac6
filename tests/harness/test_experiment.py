"""An experiment of 3 arms × 3 seeds × 2 steps on CPU, then `status`, `compare`, `reevaluate`.

The experiment is the README's "Running an experiment" block, run as written: the shell block
is taken from README.md itself and run by bash, line for line, in a fresh directory holding a
copy of serve-frozen.yaml (the user's repository root), with the `guidance-ttt` of this
environment on PATH and no endpoint variable set. Real: the CLI, the local judge (one for all
nine runs), `reef serve` for each guided run, the run loop, store and controller. Stand-ins:
the rehearsal's scripted models (the plan's `stand_ins: true`, labelled on the figure). The
tests then read that one experiment every way a user can: its index and progress lines, the
same command again, `compare`'s files and figure, and each run's best in every report.

Also here: the spend limit stopping a run after the step that crossed it, and the same command
resuming it once the limit is raised; runs of a plan at once; a plan from a settings file.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from harness import results
from harness.cli.entry import main
from harness.observe.events import read_events
from harness.rehearsal.rehearse import RehearsalOptions, rehearse_run, stand_in_stack
from harness.run.spend import SpendLimitReached
from harness.storage.run_files import event_log_path
from tests.rehearsal_support import JUDGE_POLL_S

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

REPO = Path(__file__).resolve().parents[2]
ENDPOINTS = ("GUIDANCE_TTT_GUIDANCE_URL", "GUIDANCE_TTT_GUIDANCE_MODEL", "GUIDANCE_TTT_PRICING")
#: The README's plan.
ARMS = ["guidance-ttt", "unguided", "best-of-n"]
SEEDS = [0, 1, 2]


@dataclass(frozen=True)
class Experiment:
    root: Path  # the user's directory the README's commands ran in
    plan: Path
    directory: Path
    output: str  # what the commands printed
    errors: str
    returncode: int


def readme_block(section: str) -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", body, re.S)
    assert block is not None, f"no bash block under '## {section}'"
    return block.group(1)


@pytest.fixture(scope="module")
def experiment(tmp_path_factory: pytest.TempPathFactory) -> Experiment:
    """The README's experiment block, run once for this module as a user runs it."""
    root = tmp_path_factory.mktemp("readme")
    shutil.copy(REPO / "serve-frozen.yaml", root / "serve-frozen.yaml")
    env = {k: v for k, v in os.environ.items() if k not in ENDPOINTS}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", readme_block("Running an experiment")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=1100,
    )
    return Experiment(
        root, root / "plan.yaml", root / "work" / "arms", done.stdout, done.stderr, done.returncode
    )


def test_the_readmes_experiment_commands_run_as_written(experiment: Experiment) -> None:
    block = readme_block("Running an experiment")
    assert "guidance-ttt estimate --config serve-frozen.yaml" in block
    assert experiment.returncode == 0, experiment.output[-4000:] + experiment.errors[-4000:]
    plan = yaml.safe_load(experiment.plan.read_text())
    assert (plan["arms"], plan["seeds"], plan["stand_ins"]) == (ARMS, SEEDS, True)
    out = experiment.output
    assert "estimate for serve-frozen.yaml:" in out
    assert "9/9 runs finished" in out
    for name in ("compare.png", "compare.csv", "compare-table.csv"):
        assert (experiment.directory / name).stat().st_size > 0
    assert (experiment.directory / "unguided-s0/guidance-run/reevaluation.json").is_file()


def test_an_experiment_runs_every_arm_and_seed_and_compare_reads_it(
    experiment: Experiment, tmp_path: Path
) -> None:
    plan, directory = experiment.plan, experiment.directory
    index = json.loads((directory / "experiment.json").read_text())
    assert [(r["arm"], r["run_seed"]) for r in index["runs"]] == [
        (arm, seed) for arm in ARMS for seed in SEEDS
    ]
    assert {r["status"] for r in index["runs"]} == {"finished"}
    for run in index["runs"]:
        state = json.loads((directory / run["dir"] / "guidance-run/resume-state.json").read_text())
        assert state["next_step"] == 2
        assert (state["identity"]["arm"], state["identity"]["run_seed"]) == (
            run["arm"],
            run["run_seed"],
        )
    # Progress: each run's start and end as run k/n, its best to four decimals.
    lines, n = experiment.output.splitlines(), len(ARMS) * len(SEEDS)
    assert f"run 1/{n} {index['runs'][0]['dir']}: starting" in lines, lines
    ended = [line for line in lines if re.match(rf"run \d/{n} \S+: finished", line)]
    assert len(ended) == n, lines
    assert all(re.search(r"\(best -?\d+\.\d{4} after 2 steps\)$", line) for line in ended)
    # Run again: every run is finished, nothing runs twice, the command says so.
    assert main(["experiment", str(plan), "--dir", str(directory)]) == 0

    png = directory / "compare.png"
    assert main(["compare", str(directory), "-o", str(png), "--bootstrap", "300"]) == 0
    assert png.stat().st_size > 0
    with (directory / "compare.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    seeds = {(r["arm"], r["run"]) for r in rows if r["kind"] == "seed"}
    assert len(seeds) == len(ARMS) * len(SEEDS) and {arm for arm, _ in seeds} == set(ARMS)
    means = [r for r in rows if r["kind"] == "mean"]
    assert {r["arm"] for r in means} == set(ARMS)
    assert all(float(r["ci_low"]) <= float(r["mean"]) <= float(r["ci_high"]) for r in means)
    with (directory / "compare-table.csv").open() as handle:
        table = list(csv.DictReader(handle))
    finals = {r["arm"]: r for r in table if r["kind"] == "final"}
    assert set(finals) == set(ARMS) and {r["seeds"] for r in finals.values()} == {str(len(SEEDS))}
    assert {r["rollouts_mean"] for r in finals.values()} == {"4.0"}
    assert len([r for r in table if r["kind"] == "difference"]) == 3
    assert all("bootstrap over seeds" in r["method"] for r in table)
    # The figure's data, read back from its artists.
    from harness.cli.compare import draw, load_curves
    from harness.observe.cost import PriceTable
    from harness.results.compare import compare

    comparison = compare(load_curves([str(directory)], PriceTable(), Path()), "step", 300)
    drawn = draw(comparison, tmp_path / "again.png")
    assert set(drawn.mean_lines) == set(ARMS)
    assert set(drawn.seed_lines.values()) == {len(SEEDS)}
    assert all([x for x, _ in line] == [0.0, 1.0] for line in drawn.mean_lines.values())
    assert "scripted-executor-stand-in" in drawn.title and "generated:11:2" in drawn.title
    assert main(["status", str(directory)]) == 0


def _printed(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return out.getvalue()


def test_every_report_gives_each_run_the_same_best(experiment: Experiment, tmp_path: Path) -> None:
    """One best per run (`harness.archive.best`) in the experiment's line for the finished run
    (the README's plan runs three at once, so each run's own live display is quiet), the
    `run_finished` event, `status`, `inspect`, `compare`, `export` and `browse`, every arm;
    best-of-n's best is a candidate that never joined the tree."""
    directory = experiment.directory
    index = json.loads((directory / "experiment.json").read_text())
    ended = dict(
        re.findall(
            r"run \d+/\d+ (\S+): finished \(best (\S+) after 2 steps\)$", experiment.output, re.M
        )
    )
    assert set(ended) == {run["dir"] for run in index["runs"]}, experiment.output
    finals = [ended[run["dir"]] for run in index["runs"]]
    _printed(["compare", str(directory), "-o", str(tmp_path / "c.png"), "--bootstrap", "50"])
    with (tmp_path / "c.csv").open() as handle:  # beside the figure
        compared: dict[str, float] = {}
        for row in csv.DictReader(handle):
            if row["kind"] == "seed" and row["axis"] == "step":
                compared[row["run"]] = float(row["best_so_far"])  # the last point: its final best
    experiment_status = _printed(["status", str(directory)])
    best_of_n_beat_its_seed = False
    for run, final_line in zip(index["runs"], finals, strict=True):
        state = directory / run["dir"]
        view = results.load_run(state)
        best = results.run_best(view.archive)
        assert best is not None
        score = best.verifier_raw_score
        (finished,) = [
            e for e in read_events(event_log_path(state)) if e["event"] == "run_finished"
        ]
        assert finished["best_raw_score"] == score, run["dir"]
        assert final_line == f"{score:.4f}", run["dir"]
        report = json.loads(_printed(["status", str(state), "--json", "--timeout", "1"]))
        assert report["best_score"] == score, run["dir"]
        assert report["best_step"] == (None if best.timestep == 0 else best.timestep - 1)
        assert re.search(rf"{re.escape(run['dir'])} .*{score:.4f}", experiment_status)
        inspected = json.loads(_printed(["inspect", str(state), "--json"]))
        assert (
            inspected["best"][0]["entry_id"] == best.id and inspected["best"][0]["score"] == score
        )
        assert inspected["lineage_of_best"][-1]["entry_id"] == best.id
        assert compared[run["dir"]] == score, run["dir"]
        out = tmp_path / run["dir"]
        _printed(["export", str(state), "--out", str(out)])
        (record,) = json.loads((out / "runs.json").read_text())["runs"]
        assert record["search"]["best_score"] == score, run["dir"]
        page = tmp_path / f"{run['dir']}.html"
        assert main(["browse", str(state), "-o", str(page)]) == 0
        data = _page_data(page.read_text())
        assert data["nodes"][data["meta"]["best"]]["id"] == best.id, run["dir"]
        if run["arm"] == "best-of-n" and best.timestep > 0:
            best_of_n_beat_its_seed = True
            assert results.node_of(view.archive, best) is None  # nothing joins the tree
    assert best_of_n_beat_its_seed, "the stand-ins' best-of-n found no better candidate"


def _page_data(page: str) -> dict:
    block = re.search(r'<script id="data" type="application/json">(.*?)</script>', page, re.S)
    assert block is not None
    return json.loads(block.group(1))


def test_a_spend_limit_below_one_step_stops_after_it_and_raising_it_resumes(
    tmp_path: Path,
) -> None:
    console = Console(file=io.StringIO())
    options = RehearsalOptions(
        steps=3, groups=1, rollouts=2, arm="unguided", max_tokens=1000, judge_poll_s=JUDGE_POLL_S
    )
    state = tmp_path / "run"
    with stand_in_stack(tmp_path, 2, 11, console) as stack:
        with pytest.raises(SpendLimitReached) as stopped:
            rehearse_run(stack, state, options, console)
        message = str(stopped.value)
        assert message.startswith("spend limit reached before step 1: max_tokens is 1000")
        assert "raise max_tokens" in message and "\n" not in message
        resume = json.loads((state / "guidance-run/resume-state.json").read_text())
        assert resume["next_step"] == 1, "the step that crossed the limit completed"
        raised = replace(options, max_tokens=20000)
        result = rehearse_run(stack, state, raised, console)
    assert (result.start_step, result.next_step) == (1, 3)
    events = read_events(event_log_path(state))
    kinds = [e["event"] for e in events]
    stop = kinds.index("spend_limit_reached")
    reached = events[stop]
    assert (reached["step"], reached["limit"], reached["maximum"]) == (1, "max_tokens", 1000)
    # Step 0 spent more than the whole limit: both warnings came at its boundary, before the stop.
    before = [e for e in events[:stop] if e["event"] == "spend_warning"]
    assert [e["fraction"] for e in before] == [0.5, 0.8]
    assert all(e["value"] >= e["fraction"] * e["maximum"] for e in events if "fraction" in e)
    assert kinds.count("step_committed") == 3


def test_runs_of_a_plan_can_run_at_once_and_each_still_gets_its_own_state(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        yaml.safe_dump(
            {
                "name": "together",
                "stand_ins": True,
                "arms": ["unguided", "best-of-n"],
                "seeds": [0, 1],
                "steps": 1,
                "groups": 1,
                "rollouts": 2,
                "parallel": 2,
            }
        )
    )
    directory = tmp_path / "experiment"
    assert main(["experiment", str(plan), "--dir", str(directory)]) == 0
    index = json.loads((directory / "experiment.json").read_text())
    assert {r["status"] for r in index["runs"]} == {"finished"} and len(index["runs"]) == 4
    for run in index["runs"]:
        events = read_events(event_log_path(directory / run["dir"]))
        (started,) = [e for e in events if e["event"] == "run_started"]
        assert (started["arm"], started["run_seed"]) == (run["arm"], run["run_seed"])
        assert [e["step"] for e in events if e["event"] == "step_committed"] == [0]


def test_a_plan_from_a_frozen_settings_file_runs_its_frozen_and_model_free_arms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`settings: serve-frozen.yaml`, the path for real models; the endpoints here are the
    stand-ins, reached only through the settings file's environment variables."""
    from harness.adapters.judge.process import LocalJudge
    from harness.rehearsal.openai_server import OpenAIFixture
    from harness.rehearsal.stand_ins import (
        EXECUTOR_MODEL,
        GUIDANCE_MODEL,
        GuidanceScript,
        executor_reply,
    )
    from harness.storage.store import read_committed

    repo = Path(__file__).resolve().parents[2]
    with (
        LocalJudge(tmp_path / "judge", "--generated-cases", "2", "--seed", "11") as judge,
        OpenAIFixture(GuidanceScript(), model=GUIDANCE_MODEL) as guidance,
        OpenAIFixture(executor_reply, model=EXECUTOR_MODEL) as executor,
    ):
        monkeypatch.setenv("GUIDANCE_TTT_GUIDANCE_URL", guidance.base_url)
        monkeypatch.setenv("GUIDANCE_TTT_GUIDANCE_MODEL", GUIDANCE_MODEL)
        monkeypatch.setenv("GUIDANCE_TTT_EXECUTOR_URL", executor.v1_url)
        monkeypatch.setenv("FRONTIERCS_JUDGE_URL", judge.url)
        monkeypatch.delenv("GUIDANCE_TTT_GUIDANCE_API_KEY", raising=False)
        plan = tmp_path / "plan.yaml"
        plan.write_text(
            yaml.safe_dump(
                {
                    "name": "real",
                    "settings": str(repo / "serve-frozen.yaml"),
                    "arms": ["guidance-ttt", "unguided"],
                    "seeds": [0],
                    "steps": 1,
                    "groups": 1,
                    "rollouts": 2,
                }
            )
        )
        directory = tmp_path / "experiment"
        assert main(["experiment", str(plan), "--dir", str(directory)]) == 0
        guidance_calls = len(guidance.completion_requests())
    assert guidance_calls == 2, "the guided run called the endpoint once per rollout, through Reef"
    guided, _ = read_committed(directory / "guidance-ttt-s0" / "guidance-run" / "archive")
    unguided, _ = read_committed(directory / "unguided-s0" / "guidance-run" / "archive")
    rollouts = [e for e in guided.entries.values() if e.timestep >= 1]
    assert len(rollouts) == 2 and all(e.metadata["agent_record_id"] for e in rollouts)
    rollouts = [e for e in unguided.entries.values() if e.timestep >= 1]
    assert len(rollouts) == 2 and all(e.metadata["agent_record_id"] is None for e in rollouts)
    copy = yaml.safe_load((directory / "unguided-s0" / "serve-frozen.yaml").read_text())
    assert copy["recipe"]["config"]["guidance-ttt"]["harness"]["experiment"]["arm"] == "unguided"
