"""A run talks only to the Reef it started: another process answering `/healthz` on the run's
port is refused by name, never used.

The other process is a real HTTP server in a process of its own that answers `/healthz` with
200 (as another run's Reef would) and records every path it is asked for. Against it:
`guidance-ttt run` with that `reef.port` refuses in one line naming the port and the server's
pid before its judge starts; run.sh's `wait_for_reef` (scripts/reef-stack.sh) does not accept
the server's answer for the `reef serve` it started and stops that one; `running_reef` (the
rehearsal's and the experiment's Reef) raises instead of yielding. A real `reef serve` on a free
port is accepted: its listener is the process started, or one of its descendants.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from harness.adapters.reef.ownership import describe_owner, owned_by
from harness.rehearsal.reef_process import free_port, running_reef

REPO = Path(__file__).resolve().parents[2]
FROZEN = REPO / "serve-frozen.yaml"

FOREIGN_SERVER = """
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        with open(sys.argv[2], "a") as seen:
            seen.write(self.path + "\\n")
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'{"status": "ok"}')

    do_POST = do_GET

    def log_message(self, *args):
        pass

HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


@pytest.fixture
def foreign(tmp_path: Path) -> Iterator[tuple[int, subprocess.Popen[bytes], Path]]:
    """Another process's HTTP server on a loopback port, answering /healthz 200: its port, its
    process and the file of the paths it was asked for."""
    port, seen = free_port(), tmp_path / "foreign-requests.txt"
    script = tmp_path / "foreign_server.py"
    script.write_text(FOREIGN_SERVER)
    server = subprocess.Popen([sys.executable, str(script), str(port), str(seen)])
    try:
        deadline = time.monotonic() + 30
        while describe_owner(port) is None:
            assert server.poll() is None and time.monotonic() < deadline, "no foreign server"
            time.sleep(0.1)
        yield port, server, seen
    finally:
        server.kill()
        server.wait()


def _asked(seen: Path) -> list[str]:
    return seen.read_text().split() if seen.is_file() else []


def test_the_port_owner_is_named_and_is_not_the_run(foreign) -> None:
    port, server, _ = foreign
    assert describe_owner(port).startswith(f"pid {server.pid} (")
    assert owned_by(port, server.pid)
    assert not owned_by(port, os.getpid() + 10**7)  # no such process: not its port
    assert describe_owner(free_port()) is None


def test_guidance_ttt_run_refuses_a_reef_port_another_process_holds(foreign, tmp_path) -> None:
    port, server, seen = foreign
    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GUIDANCE_TTT_", "FRONTIERCS"))}
    done = subprocess.run(
        [
            *(sys.executable, "-m", "harness.cli.entry", "run", "--config", str(FROZEN)),
            *("--state-dir", str(state), "--guidance-url", "http://127.0.0.1:9"),
            *("--guidance-model", "m", "--set", f"reef.port={port}"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    refusals = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(refusals) == 1, refusals
    assert f"reef.port {port}" in refusals[0] and f"pid {server.pid}" in refusals[0]
    assert "--set reef.port=" in refusals[0]  # the fix
    assert "starting the local judge" not in done.stdout
    assert not (state / "judge").exists()
    assert _asked(seen) == []


def test_wait_for_reef_does_not_take_another_process_healthz(foreign, tmp_path) -> None:
    """run.sh's own wait, with a stand-in `reef serve` that never listens (its real one would
    have died with "address already in use") while the foreign server answers /healthz."""
    port, server, _ = foreign
    stand_in = tmp_path / "stand_in_reef.py"
    stand_in.write_text("import time\ntime.sleep(600)\n")
    script = (
        "source scripts/reef-stack.sh; "
        'start_reef "$LOG" "$python" "$STAND_IN"; echo "reef_pid $reef_pid"; '
        'wait_for_reef "$URL" 60 "$LOG"; echo "wait returned $?"; '
        'kill -0 "$reef_pid" 2>/dev/null && echo "still running"; true'
    )
    env = {
        **os.environ,
        "python": sys.executable,
        "LOG": str(tmp_path / "reef.log"),
        "STAND_IN": str(stand_in),
        "URL": f"http://127.0.0.1:{port}",
        "REEF_HEALTH_POLL_S": "0.2",
    }
    done = subprocess.run(
        ["bash", "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert "wait returned 1" in done.stdout, done.stdout + done.stderr
    assert "still running" not in done.stdout  # the stack it started was stopped
    reef_pid = done.stdout.split("reef_pid ", 1)[1].split()[0]
    assert f"held by pid {server.pid}" in done.stderr, done.stderr
    assert f"reef serve this run started (pid {reef_pid})" in done.stderr


@pytest.mark.timeout(180)
def test_running_reef_refuses_a_foreign_healthz_and_accepts_its_own(foreign, tmp_path) -> None:
    port, server, seen = foreign
    refused = f"port {port} answers /healthz but is held by pid {server.pid} "
    with (
        pytest.raises(RuntimeError, match=refused),
        running_reef(tmp_path / "refused", port=port),
    ):
        pytest.fail("running_reef yielded another process's Reef")
    assert set(_asked(seen)) <= {"/healthz"}  # nothing but the health check reached it
    with running_reef(tmp_path / "own") as reef:
        assert owned_by(reef.port, reef.process.pid)
        assert httpx.get(reef.url + "/healthz", timeout=10).status_code == 200
