"""One way to read settings: a copy of serve.yaml anywhere means the same paths to run.py, the
preflight (doctor) and the CLI (relative paths are taken from the repository root, where run.sh
also runs `reef serve`); status of a run probes that run's own judge and Reef (its recorded
settings, else the URLs its `run_started` event recorded), and a finished run's services read
"not running (the run is finished)" instead of "unreachable"."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness.cli.entry import main
from harness.preflight.doctor import build_parser, resolve_defaults
from harness.rehearsal.rehearse import RehearsalOptions, write_settings
from harness.settings.run_settings import SETTINGS_BASE, RunSettings
from harness.storage.run_files import event_log_path
from tests.state_fixture import build_state_dir

REPO = Path(__file__).resolve().parents[2]


def test_a_copy_of_serve_yaml_anywhere_means_the_same_paths_to_every_reader(tmp_path: Path):
    copy = tmp_path / "elsewhere" / "serve.yaml"
    copy.parent.mkdir()
    copy.write_text((REPO / "serve.yaml").read_text())
    expected = SETTINGS_BASE / "work" / "polyomino_packing"
    described = subprocess.run(
        [sys.executable, str(REPO / "run.py"), "--serve-yaml", str(copy), "--describe"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert f"STATE_DIR={expected}" in described.splitlines()
    assert f"TASK_DIR={REPO / 'harbor' / 'polyomino_packing'}" in described.splitlines()
    doctor = resolve_defaults(build_parser().parse_args(["--config", str(copy)]))
    assert doctor.state_dir == expected
    assert doctor.task_dir.resolve() == (REPO / "harbor" / "polyomino_packing").resolve()
    assert RunSettings.load(copy).state_dir == expected  # the CLI's reading
    assert "repository root" in (REPO / "serve.yaml").read_text()


def _status(state: Path, capsys) -> dict:
    assert main(["status", str(state), "--json", "--timeout", "0.5"]) == 0
    return json.loads(capsys.readouterr().out)


def test_status_probes_the_runs_own_services_and_says_a_finished_run_is_finished(
    tmp_path: Path, capsys
):
    state = tmp_path / "rehearsal"
    build_state_dir(state, in_flight_slots=0)  # a finished run
    write_settings(
        state / "serve-frozen.yaml",
        state,
        RehearsalOptions(),
        guidance_url="http://127.0.0.1:9",
        judge_url="http://127.0.0.1:47811",
        reef_port=47812,
    )
    report = _status(state, capsys)
    assert report["judge"]["url"] == "http://127.0.0.1:47811"
    assert report["reef"]["url"] == "http://127.0.0.1:47812"
    assert report["finished"]
    assert report["judge"]["health"] == "not running (the run is finished)"
    assert report["reef"]["health"] == "not running (the run is finished)"


def test_status_falls_back_to_the_urls_the_run_recorded(tmp_path: Path, capsys):
    state = tmp_path / "run"
    build_state_dir(state)  # a step still in flight: the services should answer
    with event_log_path(state).open("a") as log:
        started = {
            "event": "run_started",
            "ts": 0.0,
            "settings_file": str(tmp_path / "gone.yaml"),
            "reef_url": "http://127.0.0.1:47813",
            "judge_url": "http://127.0.0.1:47814",
            "scenario": "guidance-ttt-somewhere",
        }
        log.write(json.dumps(started) + "\n")
    report = _status(state, capsys)
    assert (report["reef"]["url"], report["judge"]["url"]) == (
        "http://127.0.0.1:47813",
        "http://127.0.0.1:47814",
    )
    assert report["judge"]["health"].startswith("unreachable")
