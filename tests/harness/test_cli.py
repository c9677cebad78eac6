"""`guidance-ttt` subcommands on a state directory made by the real store, resume state and event
log (tests/state_fixture.py): status, inspect, doctor, judge (plot: tests/harness/test_plots.py).
Health probes go to real local servers: a real `reef serve` (record-only recipe) for Reef, and a
one-route HTTP server standing in for the judge's `/health` (the real judge needs a bubblewrap
sandbox per case, which `tests/harness/test_scorer_local_judge.py` covers)."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import httpx
import pytest

from harness import results
from harness.cli.entry import main
from tests.bridge_fake import status_page
from tests.loopback import serving
from tests.reef_fixtures import free_port, running_reef
from tests.state_fixture import FixtureRun, build_state_dir

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> FixtureRun:
    return build_state_dir(tmp_path_factory.mktemp("cli") / "state")


@contextlib.contextmanager
def json_routes(routes: dict[str, object]) -> Iterator[str]:
    """A loopback HTTP server answering `GET <path>` with the JSON of `routes[path]` (404
    otherwise); yields its base URL and stops it on exit."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps(routes.get(self.path, {"error": "no route"})).encode()
            self.send_response(200 if self.path in routes else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return None

    with serving(Handler) as url:
        yield url


@pytest.fixture
def judge_health() -> Iterator[str]:
    """`GET /health` → `{"ok": true}`, the judge service's health route."""
    with json_routes({"/health": {"ok": True}}) as url:
        yield url


def _down() -> str:
    return f"http://127.0.0.1:{free_port()}"


def test_status_prints_step_best_open_slots_and_cost_with_services_down(run, capsys):
    code = main(
        [
            "status",
            str(run.state_dir),
            "--reef-url",
            _down(),
            "--judge-url",
            _down(),
            "--timeout",
            "1",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert f"step           {run.committed_steps} in progress ({run.committed_steps} of" in out
    assert f"best score     {run.best_score:.4f} at step {run.best_update - 1}; seed" in out
    missing = [
        f"g{g}r{r}"
        for g in range(run.groups)
        for r in range(run.rollouts)
        if (g, r) not in run.in_flight_done
    ]
    assert f"{len(run.in_flight_done)}/8 journaled; missing {', '.join(missing)}" in out
    assert "unreachable (ConnectError)" in out.split("reef", 1)[1].splitlines()[0]
    assert "unreachable" in out.split("judge ", 1)[1].splitlines()[0]
    assert (
        "cost so far unknown (no price for z-ai/glm-5.2); set "
        "training.config.harness.pricing.z-ai/glm-5.2: {input_per_mtok: USD, output_per_mtok: "
        "USD}" in " ".join(out.split())
    )


def test_a_frozen_runs_pricing_hint_names_the_frozen_files_key(tmp_path, capsys):
    frozen = build_state_dir(
        tmp_path / "frozen",
        in_flight_slots=0,
        committed_steps=1,
        labels={"mode": "frozen", "settings_file": str(tmp_path / "serve-frozen.yaml")},
    )
    argv = ["status", str(frozen.state_dir), "--reef-url", _down(), "--judge-url", _down()]
    assert main([*argv, "--timeout", "1"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "set recipe.config.guidance-ttt.harness.pricing.z-ai/glm-5.2: {" in out
    assert "in serve-frozen.yaml (or --pricing FILE)" in out


def test_status_json_totals_match_the_rollouts(run, capsys, tmp_path):
    prices = tmp_path / "prices.yaml"
    prices.write_text("z-ai/glm-5.2: {input_per_mtok: 1.0, output_per_mtok: 2.0}\n")
    main(
        [
            "status",
            str(run.state_dir),
            "--json",
            "--reef-url",
            _down(),
            "--judge-url",
            _down(),
            "--timeout",
            "1",
            "--pricing",
            str(prices),
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert report["next_step"] == run.committed_steps
    assert report["best_score"] == run.best_score
    assert report["in_flight"]["journaled"] == len(run.in_flight_done)
    executor = report["usage"]["executor"]
    assert (executor["prompt_tokens"], executor["completion_tokens"]) == run.executor_tokens
    expected = (run.executor_tokens[0] * 1.0 + run.executor_tokens[1] * 2.0) / 1e6
    assert report["cost"] == {
        "usd": pytest.approx(expected),
        "priced_usd": pytest.approx(expected),
        "unpriced_models": [],
    }
    assert report["last_event"]["event"] == "rollout_finished"


@pytest.mark.slow
def test_status_shows_healthy_services_and_the_slots_reef_still_misses(
    run, capsys, tmp_path, judge_health
):
    scenario = "guidance-ttt-status-test"
    step = run.committed_steps
    with running_reef(tmp_path / "reef") as reef:
        for g, r in [(0, 0), (1, 3)]:  # two reports of the open step, as the loop posts them
            answer = httpx.post(
                reef.url + "/v1/chat/completions",
                headers=reef.headers(scenario),
                json={"model": "fixture-model", "messages": [{"role": "user", "content": "x"}]},
                timeout=30,
            )
            receipt = answer.headers["x-reef-agent-record-id"]
            report = httpx.post(
                reef.url + "/reef/report",
                headers=reef.headers(scenario),
                json={
                    "score": 0.5,
                    "feedback": "valid: ok",
                    "references": [receipt],
                    "metadata": {
                        "step": step,
                        "group": g,
                        "rollout": r,
                        "groups_per_step": 2,
                        "rollouts_per_group": 4,
                        "algorithm": "ttt-discover",
                        "comparison_set": f"tttd-step-{step}-group-{g}",
                    },
                },
                timeout=30,
            )
            assert report.status_code == 200, report.text
        code = main(
            [
                "status",
                str(run.state_dir),
                "--reef-url",
                reef.url,
                "--judge-url",
                judge_health,
                "--scenario",
                scenario,
            ]
        )
    out = capsys.readouterr().out
    assert code == 0
    assert f"reef           {reef.url} ok" in out
    assert f"{judge_health} ok" in out


def test_status_lists_the_slots_reefs_grouping_still_misses(run, capsys, judge_health):
    """The record-only Reef used above has no training processor, so the tttd grouping's block
    of the status page (`open_steps[].missing`) comes from the page builder of the bridge fake,
    laid out as Reef 0.1.3 publishes it."""
    scenario = "guidance-ttt-polyomino-packing"
    page = status_page(scenario, open_steps={run.committed_steps: [(0, 3), (1, 2)]})
    with json_routes({"/healthz": {"ok": True}, "/reef/status": page}) as reef_url:
        code = main(
            [
                "status",
                str(run.state_dir),
                "--reef-url",
                reef_url,
                "--judge-url",
                judge_health,
                "--scenario",
                scenario,
            ]
        )
    out = capsys.readouterr().out
    assert code == 0
    assert f"{reef_url} ok; Reef still misses g0r3, g1r2" in out


def test_inspect_prints_best_candidates_lineage_failures_and_cases(run, capsys):
    assert main(["inspect", str(run.state_dir), "--top", "3", "--cases", "1"]) == 0
    out = capsys.readouterr().out
    view = results.load_run(run.state_dir)
    best_entry = view.archive.entries[run.best_entry_id]
    assert f"1   {run.best_score:.4f}   {run.best_update - 1} " in out.split("Best candidates")[1]
    lineage = out.split("Lineage of the best", 1)[1].split("Outcomes per step", 1)[0]
    ids = [e[:8] for e in run.best_lineage_entry_ids]
    shown = [e for e in ids if e in lineage]
    assert shown == ids  # every generation from the seed, in order
    assert lineage.index(ids[1]) < lineage.index(run.best_entry_id[:8])
    outcomes = out.split("Outcomes per step", 1)[1].split("Case 1", 1)[0]
    for step, counts in run.statuses.items():
        row = next(
            line.split() for line in outcomes.splitlines() if line.split()[:1] == [str(step)]
        )
        assert int(row[1]) == counts["valid"]  # the valid column comes first
    case = out.split("Case 1:", 1)[1]
    top = results.case_studies(view.archive, 1)[0]
    assert f"child {top.candidate_score:.4f} ({top.gain:+.4f})" in case
    assert top.entry.guidance in case and top.entry.summary in case
    assert best_entry.id[:8] in lineage


def test_commands_on_a_directory_without_a_run_exit_2_naming_what_was_looked_for(tmp_path, capsys):
    assert main(["inspect", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "holds no run" in err and "guidance-run/archive/archive-head.json" in err


@pytest.mark.slow
def test_doctor_runs_the_preflight_and_fails_without_gpus(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli.entry",
            "doctor",
            "--skip-judge-score",
            "--judge-url",
            _down(),
            "--executor-url",
            _down() + "/v1",
            "--state-dir",
            str(tmp_path),
            "--min-free-gb",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert result.returncode == 1
    assert "Guidance-TTT preflight" in result.stdout
    assert "GPUs" in result.stderr and "preflight failed: missing" in result.stderr


def test_judge_subcommand_delegates_to_the_local_judge():
    result = subprocess.run(
        [sys.executable, "-m", "harness.cli.entry", "judge", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert result.returncode == 0
    assert result.stdout.startswith("usage: guidance-ttt judge ") and "--problems" in result.stdout


def test_a_corrupt_resume_state_is_named_instead_of_a_traceback(run, tmp_path, capsys):
    state = tmp_path / "state"
    shutil.copytree(run.state_dir, state)
    (state / "guidance-run" / "resume-state.json").write_text("{not json")
    assert main(["status", str(state), "--reef-url", _down(), "--judge-url", _down()]) == 2
    assert "resume-state.json: not valid JSON" in capsys.readouterr().err
