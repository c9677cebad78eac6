"""Results records: `guidance-ttt export` on a state directory made by the real store, checked by
`results/check_results.py` run as a real subprocess — which must pass on honest records and on
the published reference records, and must fail, naming the problem, on each tampering."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from harness import results
from harness.cli.entry import main
from tests.state_fixture import FixtureRun, build_state_dir

REPO = Path(__file__).resolve().parents[2]
CHECK = REPO / "results" / "check_results.py"


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[FixtureRun, Path]:
    root = tmp_path_factory.mktemp("results")
    run = build_state_dir(root / "state", committed_steps=4, in_flight_slots=2)
    out = root / "records"
    assert (
        main(
            [
                "export",
                str(run.state_dir),
                "--out",
                str(out),
                "--task",
                "polyomino",
                "--gpu",
                "none (CPU fixture)",
                "--reef-url",
                "http://127.0.0.1:9",
            ]
        )
        == 0
    )
    return run, out


def check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHECK), *args], capture_output=True, text=True, timeout=120
    )


def test_export_writes_the_records_of_the_committed_steps(exported):
    run, out = exported
    record = json.loads((out / "runs.json").read_text())["runs"][0]
    search = record["search"]
    assert search["updates"] == run.committed_steps
    assert search["sampled_rollouts"] == run.committed_steps * run.groups * run.rollouts
    assert search["valid_rollouts"] == sum(run.valid)
    assert search["well_formed_guidance"] == search["sampled_rollouts"] - run.committed_steps
    assert (search["seed_score"], search["best_score"]) == (run.seed_score, run.best_score)
    assert search["best_update"] == run.best_update
    assert record["models"] == {"guidance": "Qwen/Qwen3-8B", "executor": "z-ai/glm-5.2"}
    assert record["training"]["lora_rank"] == 32 and record["status"] == "in_progress"
    with (out / "trajectory.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [float(r["cumulative_best"]) for r in rows] == run.cumulative_best
    assert [int(r["valid_rollouts"]) for r in rows[1:]] == run.valid
    assert rows[0]["valid_rollouts"] == "" and rows[0]["sampled_rollouts"] == "0"


def test_check_results_passes_on_exported_records_with_the_state_dir(exported):
    run, out = exported
    result = check(str(out), "--state-dir", str(run.state_dir))
    assert result.returncode == 0, result.stderr
    assert f"ok: {out}: 1 runs, {run.committed_steps + 1} trajectory rows" in result.stdout


def test_check_results_passes_on_the_published_reference_records():
    result = check(str(REPO / "results" / "reference"))
    assert result.returncode == 0, result.stderr
    assert "2 runs, 62 trajectory rows" in result.stdout


def _rewrite_csv(path: Path, change: Callable[[list[dict[str, str]]], list[dict[str, str]]]):
    with path.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    rows = change(rows)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(results.TRAJECTORY_FIELDS))
        writer.writeheader()
        writer.writerows(rows)


def _rewrite_run(path: Path, change: Callable[[dict], None]) -> None:
    document = json.loads(path.read_text())
    change(document["runs"][0])
    path.write_text(json.dumps(document))


TAMPERINGS = {
    "best_score": (
        lambda d: _rewrite_run(d / "runs.json", lambda r: r["search"].update(best_score=99.0)),
        "last row",
    ),
    "valid total": (
        lambda d: _rewrite_run(d / "runs.json", lambda r: r["search"].update(valid_rollouts=1)),
        "valid_rollouts says 1",
    ),
    "non-monotone best": (
        lambda d: _rewrite_csv(
            d / "trajectory.csv",
            lambda rows: [*rows[:2], {**rows[2], "cumulative_best": "1.0"}, *rows[3:]],
        ),
        "cumulative best got worse at update 2",
    ),
    "missing update": (
        lambda d: _rewrite_csv(d / "trajectory.csv", lambda rows: rows[:2] + rows[3:]),
        "are not 0..4 without gaps",
    ),
    "valid above sampled": (
        lambda d: _rewrite_csv(
            d / "trajectory.csv",
            lambda rows: [*rows[:1], {**rows[1], "valid_rollouts": "9"}, *rows[2:]],
        ),
        "update 1 valid 9 not within 0..8",
    ),
    "best update": (
        lambda d: _rewrite_run(d / "runs.json", lambda r: r["search"].update(best_update=1)),
        "best_update 1 but the trajectory first reaches the best",
    ),
    "seed hash": (
        lambda d: _rewrite_run(
            d / "runs.json", lambda r: r["provenance"].update(seed_sha256="0" * 64)
        ),
        "provenance.seed_sha256",
    ),
    "archive hash": (
        lambda d: _rewrite_run(
            d / "runs.json", lambda r: r["provenance"].update(committed_library_sha256="f" * 64)
        ),
        "provenance.committed_library_sha256",
    ),
}


@pytest.mark.parametrize("name", list(TAMPERINGS))
def test_check_results_rejects_a_tampered_record_naming_the_problem(exported, tmp_path, name):
    run, out = exported
    copy = tmp_path / "records"
    shutil.copytree(out, copy)
    tamper, message = TAMPERINGS[name]
    tamper(copy)
    result = check(str(copy), "--state-dir", str(run.state_dir))
    assert result.returncode == 1
    assert message in result.stderr, result.stderr


def test_check_results_rejects_records_when_the_run_changed_after_export(exported, tmp_path):
    run, out = exported
    state = tmp_path / "state"
    shutil.copytree(run.state_dir, state)
    resume = state / "guidance-run" / "resume-state.json"
    resume.write_text(resume.read_text().replace('"elapsed_s": 600.0', '"elapsed_s": 601.0'))
    result = check(str(out), "--state-dir", str(state))
    assert result.returncode == 1
    assert "provenance.resume_state_sha256" in result.stderr


def test_library_file_hash_is_checked_against_the_record(exported, tmp_path):
    run, out = exported
    view = results.load_run(run.state_dir)
    library = tmp_path / "committed-library.json"
    from harness.storage.library_json import write_library_json

    write_library_json(view.archive, library)
    assert check(str(out), "--library", str(library)).returncode == 0
    library.write_bytes(library.read_bytes() + b" ")
    rejected = check(str(out), "--library", str(library))
    assert rejected.returncode == 1 and "committed_library_sha256" in rejected.stderr


def test_export_replaces_its_task_and_keeps_the_others(exported, tmp_path):
    run, _ = exported
    merged = tmp_path / "merged"
    shutil.copytree(REPO / "results" / "reference", merged)
    assert (
        main(
            [
                "export",
                str(run.state_dir),
                "--out",
                str(merged),
                "--task",
                "polyomino",
                "--reef-url",
                "http://127.0.0.1:9",
            ]
        )
        == 0
    )
    runs = json.loads((merged / "runs.json").read_text())["runs"]
    assert [r["task"] for r in runs] == ["trimul", "polyomino"]
    rows = results.read_trajectory_csv(merged / "trajectory.csv")
    assert sum(1 for r in rows if r.task == "trimul") == 31
    assert [r.cumulative_best for r in rows if r.task == "polyomino"] == run.cumulative_best
    assert check(str(merged)).returncode == 0


def test_export_refuses_a_run_with_nothing_committed(tmp_path, capsys):
    run = build_state_dir(tmp_path / "state", committed_steps=0, in_flight_slots=2)
    assert main(["export", str(run.state_dir), "--out", str(tmp_path / "o")]) == 2
    assert "no committed step yet" in capsys.readouterr().err
