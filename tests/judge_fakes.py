"""Misbehaving FrontierCS judges for the client's fault and reward-hacking tests.

The fakes are fakes on purpose: they reproduce answers that the real judges produce only under
failure (a 5xx, a read-once result, a hang, a non-JSON body) or only on the pinned external
FrontierCS judge (the stderr ratio exploit), which cannot run here. Each fake is a real HTTP
server on 127.0.0.1 with an ephemeral port whose answers a test scripts as a list of replies;
it records every request so a test can check what the client sent.

At the end of the module: `LocalJudge`, the project's real judge service in a subprocess, and
`public_problems`, a FrontierCS package pointing at the 70 public cases in ../shared.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from harness.adapters.judge.process import LocalJudge


@dataclass(frozen=True)
class Reply:
    """One scripted answer: HTTP status, body (a dict is sent as JSON, NaN allowed), and a delay
    before answering (a delay longer than the client's timeout is a hang)."""

    status: int = 200
    body: Any = None
    delay_s: float = 0.0


@dataclass
class Recorded:
    method: str
    path: str
    fields: dict[str, str] = field(default_factory=dict)
    files: dict[str, tuple[str, str, bytes]] = field(default_factory=dict)


class FakeJudge:
    """A scripted FrontierCS judge. `submit` and `result` are reply lists consumed in order, the
    last one repeating forever. Use as a context manager; `url` is its base address."""

    def __init__(self, submit: Sequence[Reply], result: Sequence[Reply]) -> None:
        self._scripts = {"submit": list(submit), "result": list(result)}
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeJudge:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def count(self, kind: str) -> int:
        """How many `submit` or `result` requests arrived."""
        prefix = "/submit" if kind == "submit" else "/result/"
        return sum(1 for r in self.requests if r.path.startswith(prefix))

    def _next(self, kind: str) -> Reply:
        with self._lock:
            script = self._scripts[kind]
            return script.pop(0) if len(script) > 1 else script[0]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        judge = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                fields, files = _parse_multipart(
                    self.headers.get("Content-Type", ""), self.rfile.read(length)
                )
                judge.requests.append(Recorded("POST", self.path, fields, files))
                self._answer(judge._next("submit") if self.path == "/submit" else Reply(404, {}))

            def do_GET(self) -> None:
                judge.requests.append(Recorded("GET", self.path))
                found = re.fullmatch(r"/result/[^/]+", self.path)
                self._answer(judge._next("result") if found else Reply(404, {"error": "not found"}))

            def _answer(self, reply: Reply) -> None:
                if reply.delay_s and judge._stopping.wait(reply.delay_s):
                    return
                body = reply.body
                raw = body if isinstance(body, bytes) else json.dumps(body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except OSError:  # the client gave up on a hanging answer
                    pass

        return Handler


class RacySidJudge:
    """A judge with the FrontierCS Node judge's submit race (January 2026 version): a submit reads
    the next sid, spends `window_s` storing the program (an await in the real judge), and only
    then advances the counter, so submits that overlap get the same sid and the last program
    stored under it is the one judged for all of them.

    A program's result is one problem-0 checker case with `cells` cells on a 10×10 board, read
    from a `// cells N` line of the program, so the score (= N) tells whose program was judged.
    """

    def __init__(self, window_s: float = 0.15) -> None:
        self.window_s = window_s
        self.next_sid = 1
        self.programs: dict[int, str] = {}
        self.sids_given: list[int] = []
        self.in_submit = 0
        self.max_in_submit = 0
        self.polls_during_submit = 0
        self._polled: set[int] = set()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> RacySidJudge:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _submit(self, program: str) -> int:
        with self._lock:
            sid = self.next_sid
            self.in_submit += 1
            self.max_in_submit = max(self.max_in_submit, self.in_submit)
        time.sleep(self.window_s)  # the await between reading and advancing the counter
        with self._lock:
            self.next_sid = sid + 1
            self.programs[sid] = program
            self.sids_given.append(sid)
            self.in_submit -= 1
        return sid

    def _result(self, sid: int) -> Reply:
        with self._lock:
            program = self.programs.get(sid)
            self.polls_during_submit += self.in_submit > 0
            first_poll = sid not in self._polled
            self._polled.add(sid)
        found = re.search(r"// cells (\d+)", program or "")
        if found is None:
            return Reply(404, {"error": "not found"})
        if first_poll:  # every candidate polls at least twice, spread over the others' submits
            return Reply(200, {"status": "queued"})
        return done([checker_case(int(found[1]), 10, 10)])

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        judge = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                _, files = _parse_multipart(
                    self.headers.get("Content-Type", ""), self.rfile.read(length)
                )
                sid = judge._submit(files["code"][2].decode())
                self._answer(Reply(200, {"sid": sid}))

            def do_GET(self) -> None:
                found = re.fullmatch(r"/result/(\d+)", self.path)
                reply = judge._result(int(found[1])) if found else Reply(404, {})
                self._answer(reply)

            def _answer(self, reply: Reply) -> None:
                raw = json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        return Handler


def _parse_multipart(content_type: str, body: bytes) -> tuple[dict, dict]:
    if not content_type.startswith("multipart/form-data"):
        return {}, {}
    message = BytesParser(policy=HTTP).parsebytes(
        b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body
    )
    fields: dict[str, str] = {}
    files: dict[str, tuple[str, str, bytes]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True) or b""
        filename = part.get_filename()
        if filename is None:
            fields[name] = payload.decode()
        else:
            files[name] = (filename, part.get_content_type(), payload)
    return fields, files


def closed_port_url() -> str:
    """The address of a port on 127.0.0.1 that nothing listens on: a judge that is down."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


SUBMITTED = Reply(200, {"sid": 7})
QUEUED = Reply(200, {"status": "queued"})
NOT_FOUND = Reply(404, {"error": "not found"})


_COMPUTED = object()


def done(cases: list[dict[str, Any]], score: Any = _COMPUTED) -> Reply:
    """A `done` answer built the way the FrontierCS orchestrator builds it (score = 100 × mean
    ratio, statuses remapped from the ratio), with `score` overridable to fake a disagreement."""
    ratios = [case["scoreRatio"] for case in cases]
    mean = 100.0 * sum(ratios) / len(ratios)
    passed = all(r == 1.0 for r in ratios)
    remapped = [
        {**c, "status": "Correct" if c["scoreRatio"] == 1.0 else "Wrong Answer"} for c in cases
    ]
    return Reply(
        200,
        {
            "status": "done",
            "passed": passed,
            "result": "Correct Answer" if passed else "Wrong Answer",
            "score": mean if score is _COMPUTED else score,
            "scoreUnbounded": mean,
            "cases": remapped,
        },
    )


def checker_case(cells: int, width: int, height: int) -> dict[str, Any]:
    """A problem-0 case judged by the testlib checker: partial-points verdict plus the output."""
    area = width * height
    ratio = cells / area
    points = f"{ratio:.10f}".rstrip("0")
    points = points + "0" if points.endswith(".") else points
    return {
        "ok": False,  # testlib's partial-points exit code is not "accepted"
        "status": "Wrong Answer",
        "time": 12_000_000,
        "memory": 3_500_000,
        "msg": f"points {points} Ratio: {ratio:.9f} "
        f"(cells={cells}, W={width}, H={height}, area={area})",
        "output": f"{width} {height}\n0 0 0 0\n",
        "scoreRatio": float(f"{ratio:.9f}"),
        "scoreRatioUnbounded": float(f"{ratio:.9f}"),
    }


def failed_run_case(stderr: str, status: str = "Nonzero Exit Status") -> dict[str, Any]:
    """A case whose run was not accepted, as the pinned FrontierCS judge reports it: `msg` is the
    program's stderr, no output, and the ratio regex-mined from that stderr (the exploit)."""
    found = re.search(r"Ratio: ([\d.]+)", stderr)
    ratio = float(found[1]) if found and found[1].strip(".") else (math.nan if found else 0.0)
    return {
        "ok": False,
        "status": status,
        "time": 1_000_000,
        "memory": 1_000_000,
        "msg": stderr,
        "scoreRatio": ratio,
        "scoreRatioUnbounded": ratio,
    }


def exploit_answer(stderr: str, cases: int = 3) -> Reply:
    """The full FrontierCS answer for a program that prints `stderr` and exits non-zero."""
    return done([failed_run_case(stderr) for _ in range(cases)])


# --- the real local judge -----------------------------------------------------------------
# Not a fake: `python -m judges` in a subprocess (`LocalJudge`, from harness.rehearsal, which
# `guidance-ttt rehearse` uses too), imported here so that every judge the client tests talk to
# is started from one place.

SHARED_CASES = Path(__file__).resolve().parents[2] / "shared" / "data" / "frontiercs-p0"


def public_problems(root: Path) -> Path:
    """A FrontierCS problem package for problem 0 under `root` holding copies of the 70 public
    cases in ../shared (1.6 MB, copied into `root`, a temporary folder: the judge serves no
    link out of a problem folder, judges/README.md "Security model"). Skips the calling test when
    ../shared is absent."""
    inputs = (
        sorted(SHARED_CASES.glob("*.in"), key=lambda p: int(p.stem))
        if SHARED_CASES.is_dir()
        else []
    )
    if not inputs:
        pytest.skip(f"the public Polyomino cases are not at {SHARED_CASES} (../shared absent)")
    package = root / "0"
    (package / "testdata").mkdir(parents=True)
    (package / "config.yaml").write_text(
        "type: default\ntime: 2s\nmemory: 256m\n"
        f"subtasks:\n- score: 100\n  n_cases: {len(inputs)}\n"
    )
    for path in inputs:
        shutil.copyfile(path, package / "testdata" / path.name)
    return root


__all__ = ["LocalJudge"]
