"""Who may talk to the judge: off loopback only holders of its token, over real HTTP.

A Harbor task container reaches the judge at the host's gateway address, so a real deployment
binds a non-loopback address. Without GUIDANCE_TTT_JUDGE_TOKEN the judge refuses to start
there (one line, exit status 2); with it, every call but /health needs
`Authorization: Bearer <token>`, and the token never shows in the judge's log.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from judges.service.auth import TOKEN_ENV
from judges.service.process import JudgeProcess

pytestmark = pytest.mark.slow
EVERY_ADDRESS = "0.0.0.0"  # not loopback: the judge is reachable on every interface


def start_command(state: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "judges", "--port", "0", "--state-dir", str(state), *args]


def test_a_non_loopback_bind_without_the_token_is_refused_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    command = start_command(tmp_path / "state", "--host", EVERY_ADDRESS, "--generated-cases", "1")
    finished = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert finished.returncode == 2
    (line,) = [x for x in finished.stderr.splitlines() if x.startswith("guidance-ttt-judge:")]
    assert f"--host {EVERY_ADDRESS} is not a loopback address: set {TOKEN_ENV}" in line
    assert "judge listening" not in finished.stdout


def test_a_token_too_short_to_be_secret_is_refused_without_showing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "hunter2")
    command = start_command(tmp_path / "state", "--generated-cases", "1")
    finished = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert finished.returncode == 2
    assert f"{TOKEN_ENV} holds 7 characters; use at least 16" in finished.stderr
    assert "hunter2" not in finished.stderr + finished.stdout


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[JudgeProcess, str]]:
    token = secrets.token_urlsafe(32)
    state = tmp_path_factory.mktemp("guarded-judge")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(TOKEN_ENV, token)
        judge = JudgeProcess(state, "--host", EVERY_ADDRESS, "--generated-cases", "1").start()
    try:
        yield judge, token
    finally:
        judge.stop()


def test_with_the_token_every_call_but_health_needs_it(guarded: tuple[JudgeProcess, str]) -> None:
    judge, token = guarded
    port = judge.url.rsplit(":", 1)[1]
    url = f"http://127.0.0.1:{port}"
    good = {"Authorization": f"Bearer {token}"}
    wrong = {"Authorization": f"Bearer {token[:-1]}x"}
    assert httpx.get(f"{url}/health", timeout=10).json() == {"ok": True}
    counted = httpx.get(f"{url}/health", headers=good, timeout=10).json()  # counts need the token
    assert counted["ok"] is True and "caseRuns" in counted and "verdictCache" in counted
    code = {"pid": "0", "lang": "cpp", "code": "int main() { return 0; }\n"}
    calls = [
        ("GET", "/problems", None),
        ("GET", "/problem/0/statement", None),
        ("POST", "/submit", code),
        ("GET", "/result/1", None),
    ]
    for method, path, body in calls:
        for headers in ({}, wrong, {"Authorization": token}):
            answer = httpx.request(method, f"{url}{path}", json=body, headers=headers, timeout=10)
            assert answer.status_code == 401, (method, path, answer.text)
            assert answer.headers["WWW-Authenticate"].startswith("Bearer")
            assert token not in answer.text
    sid = httpx.post(f"{url}/submit", json=code, headers=good, timeout=30).json()["sid"]
    assert httpx.get(f"{url}/problems", headers=good, timeout=10).status_code == 200
    assert httpx.get(f"{url}/result/{sid}", headers=good, timeout=10).status_code == 200
    assert httpx.get(f"{url}/result/{sid}", timeout=10).status_code == 401  # results too
    log = judge.log_path.read_text()
    assert "every call but /health needs Authorization: Bearer" in log
    assert token not in log


def test_expect_continue_without_the_token_gets_401_not_100_continue(
    guarded: tuple[JudgeProcess, str],
) -> None:
    judge, _ = guarded
    port = int(judge.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(
            b"POST /submit HTTP/1.1\r\nHost: judge\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100\r\nExpect: 100-continue\r\n\r\n"
        )
        assert sock.recv(65536).startswith(b"HTTP/1.1 401 ")


def raw_answer(port: int, request: bytes) -> bytes:
    """The whole answer to one raw HTTP/1.1 request (the connection closed after it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_an_authorization_header_that_is_not_utf8_is_a_401_on_every_route(
    guarded: tuple[JudgeProcess, str],
) -> None:
    """Bytes that are not UTF-8 (httpx cannot send them: a raw socket does) are a wrong token:
    401 on every guarded route, the open answer on /health, never a 500 or a traceback."""
    judge, token = guarded
    port = int(judge.url.rsplit(":", 1)[1])
    garbled = b"Authorization: Bearer \xff\xfe" + token.encode()[:8] + b"\xc3\x28\r\n"
    body = b'{"pid": "0", "lang": "cpp", "code": "int main() {}\\n"}'
    calls = [
        (b"GET /problems", b""),
        (b"GET /problem/0/statement", b""),
        (b"GET /result/1", b""),
        (b"POST /submit", b"Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body)),
    ]
    for line, extra in calls:
        request = line + b" HTTP/1.1\r\nHost: judge\r\n" + garbled + extra
        request += b"Connection: close\r\n"
        answer = raw_answer(port, request + b"\r\n" + (body if extra else b""))
        assert answer.startswith(b"HTTP/1.1 401 "), (line, answer[:300])
        assert b"WWW-Authenticate: Bearer" in answer
    expect = b"POST /submit HTTP/1.1\r\nHost: judge\r\n" + garbled
    expect += b"Content-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n"
    assert raw_answer(port, expect + b"Connection: close\r\n\r\n").startswith(b"HTTP/1.1 401 ")
    health = raw_answer(
        port, b"GET /health HTTP/1.1\r\nHost: judge\r\n" + garbled + b"Connection: close\r\n\r\n"
    )
    assert health.startswith(b"HTTP/1.1 200 "), health[:300]
    assert health.endswith(b'{"ok": true}')  # the counts stay for holders of the token
    log = judge.log_path.read_text()
    assert "Traceback" not in log and "UnicodeEncodeError" not in log


LOOP_FOREVER = "int main() { for (volatile unsigned long i = 0;; ++i) {} }\n"
# What another local user runs: stdlib only, so it needs nothing of this checkout to be readable.
SUBMIT_AS_ANOTHER_USER = """
import json, sys, urllib.error, urllib.request
url, count = sys.argv[1], int(sys.argv[2])
body = json.dumps({"pid": "0", "lang": "cpp", "code": sys.stdin.read()}).encode()
for _ in range(count):
    request = urllib.request.Request(url + "/submit", data=body,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            print(answer.status, answer.read().decode())
    except urllib.error.HTTPError as error:
        print(error.code, error.read().decode())
"""


def test_the_uid_of_a_loopback_connection_is_its_client() -> None:
    from judges.service.clients import client_of

    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as connecting:
            accepted, _ = server.accept()
            with accepted:
                client = client_of(accepted.getpeername(), accepted.getsockname())
                assert client == f"uid {os.geteuid()}", connecting.getsockname()
    assert client_of(("10.1.2.3", 5000), ("10.1.2.4", 8081)) == "address 10.1.2.3"
    assert client_of(None, None) == ""


SYSTEM_PYTHON = Path("/usr/bin/python3")  # another user may not reach this checkout's Python


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to submit as another local user")
@pytest.mark.skipif(not SYSTEM_PYTHON.exists(), reason=f"{SYSTEM_PYTHON} is absent")
def test_one_local_user_cannot_fill_the_queue_another_needs(tmp_path: Path) -> None:
    """Finding: an unauthenticated local user kept the run's judge queue full with copies of a
    sleeping program. Each client (on loopback: each uid) holds at most three quarters of the
    queue; here 3 of 4 places, so the run's own submission still gets in."""
    state = tmp_path / "state"
    args = ("--generated-cases", "1", "--workers", "1", "--limit", "max-queue=4")
    with JudgeProcess(state, *args) as judge:
        other = subprocess.run(
            [str(SYSTEM_PYTHON), "-c", SUBMIT_AS_ANOTHER_USER, judge.url, "8"],
            input=LOOP_FOREVER,
            capture_output=True,
            text=True,
            timeout=120,
            user=65534,
            cwd="/",
        )
        answers = other.stdout.splitlines()
        assert len(answers) == 8, other.stderr
        refused = [a for a in answers if a.startswith("503 ")]
        assert refused, answers
        assert (
            "uid 65534 has 3 submissions waiting, its share of the queue's 4 places" in (refused[0])
        )
        mine = httpx.post(f"{judge.url}/submit", json={"pid": "0", "lang": "cpp", "code": "x"})
        assert mine.status_code == 200, mine.text
