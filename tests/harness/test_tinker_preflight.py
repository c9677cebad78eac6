"""The preflight of serve-tinker.yaml through the real CLI (`guidance-ttt doctor --config`), as a
subprocess: without the Tinker key, with a model Tinker does not serve, and with everything
ready. The judge and the executor are one real HTTP server on loopback; Tinker is never called
(its rows say what only a live call can check), and the key is a dummy that must never show."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import yaml

from tests.loopback import serving

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

REPO = Path(__file__).resolve().parents[2]
DUMMY_KEY = "tml-dummy-key-not-a-secret-0123"
TINKER_ROWS = ("Tinker key", "Tinker model", "Tinker cost")


class _Services(BaseHTTPRequestHandler):
    """The judge's `/health` and an OpenAI-compatible executor's chat completions."""

    def _send(self, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send({"ok": True})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self._send({"choices": [{"message": {"content": "OK"}, "finish_reason": "length"}]})

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def services() -> Iterator[str]:
    with serving(_Services) as url:
        yield url


def doctor(
    tmp_path: Path, services: str, *, key: str | None, model: str | None = None
) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """`guidance-ttt doctor --config <serve-tinker.yaml copy>` from a directory outside the
    checkout; the table's rows by name (each row's text, its lines joined)."""
    document = yaml.safe_load((REPO / "serve-tinker.yaml").read_text(encoding="utf-8"))
    if model is not None:
        document["training"]["config"]["model"] = model
    config = tmp_path / "serve-tinker.yaml"
    config.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    env = {
        **{k: v for k, v in os.environ.items() if k != "TINKER_API_KEY"},
        "PYTHONPATH": str(REPO),
        "FRONTIERCS_JUDGE_URL": services,
        "GUIDANCE_TTT_EXECUTOR": "openai_compatible",
        "GUIDANCE_TTT_EXECUTOR_URL": f"{services}/v1",
        "GUIDANCE_TTT_EXECUTOR_MODEL": "stand-in",
        **({"TINKER_API_KEY": key} if key is not None else {}),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli.entry",
            "doctor",
            "--config",
            str(config),
            "--state-dir",
            str(tmp_path / "state"),
            "--skip-judge-score",
            "--min-free-gb",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=150,
        cwd=tmp_path,
        env=env,
    )
    return done, table_rows(done.stdout)


def table_rows(output: str) -> dict[str, str]:
    """Each row's text by check name, its status first: from the table, or from the one-row-
    after-another form the report takes where a word is wider than its column."""
    rows: dict[str, str] = {}
    name = ""
    for line in output.splitlines():
        cells = [cell.strip() for cell in line.split("|")]
        if line.startswith("| ") and len(cells) >= 5 and cells[1] != "check":
            name = cells[1] or name
            text = " ".join(cells[2:])
        elif line.endswith((": ready", ": missing")) and not line.startswith(" "):
            name, _, text = line.rpartition(": ")
        elif line.startswith("  ") and name:
            text = line.strip()
        else:
            continue
        rows[name] = f"{rows.get(name, '')} {text}".strip()
    return rows


def test_without_the_key_the_key_row_names_the_variable_and_how_to_set_it(tmp_path, services):
    done, rows = doctor(tmp_path, services, key=None)

    assert done.returncode == 1, done.stdout + done.stderr
    assert "missing Tinker key" in done.stderr
    assert rows["Tinker key"].startswith("missing")
    assert "TINKER_API_KEY is not set" in rows["Tinker key"]
    assert "export TINKER_API_KEY=" in " ".join(rows["Tinker key"].split())
    for ready in ("python", "Tinker model", "Tinker cost", "task", "judge", "executor", "disk"):
        assert rows[ready].startswith("ready"), (ready, done.stdout)
    assert "GPUs" not in rows and "model" not in rows  # nothing of the model runs here


def test_a_model_tinker_does_not_serve_is_named_with_the_nearest_it_serves(tmp_path, services):
    done, rows = doctor(tmp_path, services, key=DUMMY_KEY, model="Qwen/Qwen3-7B")

    assert done.returncode == 1, done.stdout + done.stderr
    assert "missing Tinker model" in done.stderr
    row = " ".join(rows["Tinker model"].split())
    assert row.startswith("missing")
    assert "'Qwen/Qwen3-7B' is not a model Tinker serves" in row
    assert "set training.config.model to one it serves, e.g." in row
    assert "Qwen/Qwen3-8B" in row
    assert DUMMY_KEY not in done.stdout + done.stderr


def test_with_everything_ready_every_row_is_ready_and_says_what_was_not_asked(tmp_path, services):
    done, rows = doctor(tmp_path, services, key=DUMMY_KEY)

    assert done.returncode == 0, done.stdout + done.stderr
    assert list(rows)[:5] == ["python", "Tinker SDK", *TINKER_ROWS]
    assert "tinker 0.33.1" in rows["Tinker SDK"]
    assert all(row.startswith("ready") for row in rows.values()), done.stdout
    key, model, cost = (" ".join(rows[name].split()) for name in TINKER_ROWS)
    assert "TINKER_API_KEY is set (value not shown)" in key
    assert "needs the network" in key and "needs the network" in model
    assert "per step" in cost and "prefill $0.13/M, sample $0.4/M, train $0.4/M" in cost
    assert DUMMY_KEY not in done.stdout + done.stderr


@pytest.mark.slow
def test_run_on_a_tinker_file_stops_at_the_preflight_naming_the_missing_key(tmp_path: Path) -> None:
    """`guidance-ttt run` (what ./run.sh calls) on serve-tinker.yaml runs the stack's preflight
    (with its local judge); without the key it stops there in a line naming the variable, and
    no Reef is started."""
    config = tmp_path / "serve-tinker.yaml"
    config.write_text((REPO / "serve-tinker.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "TINKER_API_KEY"}
    command = [sys.executable, "-m", "harness.cli.entry", "run", "--config", str(config)]
    command += ["--state-dir", str(tmp_path / "state")]
    command += ["--executor-url", "http://127.0.0.1:9/v1", "--executor-model", "m"]
    command += ["--set", "harness.executor_backend=openai_compatible"]
    done = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0, done.stdout + done.stderr
    assert "Tinker key: TINKER_API_KEY is not set in this environment" in done.stderr
    assert "stopping after the preflight; nothing was started" in done.stderr
    assert "GPUs" not in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "state" / "reef.log").exists()
