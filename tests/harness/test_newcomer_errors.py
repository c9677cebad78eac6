"""The errors a newcomer hits are one line with the fix: a judge port already taken, a state
directory that is a file (judge, preflight, rehearse), export's default output (never the
tracked results/ folder), and an unpriced model's cost (null, not 0.0)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from judge_fakes import LocalJudge

from harness.observe.cost import Usage, load_prices
from harness.preflight.machine import check_disk
from tests.state_fixture import build_state_dir

REPO = Path(__file__).resolve().parents[2]


def command(*args: str, cwd: Path = REPO, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def one_line(stderr: str) -> str:
    """The error, which must be exactly one line."""
    assert len(stderr.strip().splitlines()) == 1, stderr
    return stderr.strip()


def test_a_judge_port_taken_by_something_else_says_so_and_suggests_port_0(tmp_path: Path) -> None:
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        done = command(
            "judges", "--port", str(port), "--generated-cases", "1",
            "--state-dir", str(tmp_path / "judge"),
        )  # fmt: skip
    assert done.returncode == 2
    line = one_line(done.stderr)
    assert f"port {port} on 127.0.0.1 is already in use" in line
    assert "not a judge" in line and "--port 0" in line


@pytest.mark.slow
def test_a_judge_port_taken_by_a_judge_names_its_url(tmp_path: Path) -> None:
    with LocalJudge(tmp_path / "first", "--generated-cases", "1") as judge:
        port = judge.url.rsplit(":", 1)[1]
        done = command(
            "judges", "--port", port, "--generated-cases", "1",
            "--state-dir", str(tmp_path / "second"),
        )  # fmt: skip
    assert done.returncode == 2
    line = one_line(done.stderr)
    assert f"a judge already answers there (use it: --judge-url http://127.0.0.1:{port})" in line


def test_a_state_directory_that_is_a_file_is_one_line_everywhere(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.write_text("not a directory")
    judge = command("judges", "--port", "0", "--state-dir", str(state))
    assert judge.returncode == 2 and "is a file, not a directory" in one_line(judge.stderr)
    rehearse = command("harness.cli.entry", "rehearse", str(state))
    assert rehearse.returncode == 2 and "is a file, not a state directory" in one_line(
        rehearse.stderr
    )
    disk = check_disk(state / "sub", 0.001)
    assert not disk.ready and "is a file" in disk.detail and "state_dir" in disk.fix


def test_export_writes_beside_the_run_by_default_not_into_results(tmp_path: Path) -> None:
    state = tmp_path / "state"
    build_state_dir(state)
    tracked = sorted(p.name for p in (REPO / "results").iterdir())
    done = command("harness.cli.entry", "export", str(state), cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert (state / "results" / "runs.json").is_file()
    assert sorted(p.name for p in (REPO / "results").iterdir()) == tracked


def test_an_unpriced_models_cost_is_null_not_zero() -> None:
    prices = load_prices(environ={})
    unpriced = prices.estimate({"acme/unlisted-model": Usage(1000, 500, 1)}).to_dict()
    assert unpriced["usd"] is None and unpriced["unpriced_models"] == ["acme/unlisted-model"]
    free = prices.estimate({"openai/gpt-oss-120b": Usage(1000, 500, 1)}).to_dict()
    assert free["usd"] == 0.0 and free["unpriced_models"] == []
    json.dumps(unpriced)  # null in JSON
