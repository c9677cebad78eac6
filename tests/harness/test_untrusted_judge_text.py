"""Text a candidate controls in a judge's answer reaches neither Reef nor a prompt: two steps of
2×2 through the real run loop and a real `reef serve`, with a FrontierCS judge that puts a
failed run's stderr into the case's `msg`.

The reference (its harness/scorer.py and agent.py) stores a judge `error` answer's text as the
verifier message and reports `"<status>: <message>"` to Reef, and the pinned FrontierCS judge
puts a failed run's stderr into a case's `msg`. Ours keeps every such text in the entry's
`verification_artifacts` only (docs/differences.md, row 37).

Real: `reef serve` (record-only tttd recipe), the run loop, the archive store, the judge client,
Reef's stored records read back over HTTP. Stand-ins: the guidance model (Reef's upstream
fixture), the executor (`OpenAIFixture`), the training bridge fake, and `FrontierCSStandIn`, a
judge speaking FrontierCS's protocol that cannot run here (its Docker stack): it answers each
program by the role its source names, as the FrontierCS judge would answer such a program.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from judge_fakes import _parse_multipart, checker_case, failed_run_case

from harness.rehearsal.openai_server import RecordedRequest, Reply
from harness.storage.run_files import COMMITTED_LIBRARY
from tests.openai_fixture import OpenAIFixture
from tests.reef_fixtures import running_reef
from tests.rehearsal_support import (
    GuidanceScript,
    ReefReports,
    journal,
    run_cpu_steps,
    task_dir,
    write_serve_yaml,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

G, R, STEPS = 2, 2, 2
MARKER = "ZQX-CANDIDATE-STDERR-MARKER-ZQX"
#: The program roles the executor stand-in cycles through (a source names its role; no source
#: contains the marker, so a parent's code in a prompt cannot carry it).
ROLES = ("crashes_with_stderr", "forges_a_ratio_on_stderr", "does_not_compile", "packs")


def answer_for(code: str) -> dict[str, Any]:
    """What the FrontierCS judge answers for a program of each role: the crash's stderr and the
    forged line are each case's `msg` (the judge's behaviour for a run that was not accepted),
    the compile error's log quotes the source line."""
    if "crashes_with_stderr" in code:
        cases = [failed_run_case(f"{MARKER}: segfault at 0x0", "Runtime Error")] * 2
    elif "forges_a_ratio_on_stderr" in code:
        cases = [failed_run_case(f"Ratio: 1.0 {MARKER}")] * 2
    elif "does_not_compile" in code:
        return {"status": "error", "error": f"Compile Error: main.cpp:2:2: #error {MARKER}"}
    else:
        cases = [checker_case(400, 25, 20), checker_case(1000, 40, 50)]
    ratios = [case["scoreRatio"] for case in cases]
    score = 100.0 * sum(ratios) / len(ratios)
    return {"status": "done", "score": score, "scoreUnbounded": score, "cases": cases}


class FrontierCSStandIn:
    """`POST /submit` (multipart, as FrontierCS), `GET /result/{sid}` and `GET /problems` on
    127.0.0.1."""

    def __init__(self) -> None:
        self.answers: dict[str, dict[str, Any]] = {}
        lock, sids = threading.Lock(), itertools.count(1)
        judge = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                _, files = _parse_multipart(
                    self.headers.get("Content-Type", ""), self.rfile.read(length)
                )
                code = next(iter(files.values()), b"")
                code = code.decode() if isinstance(code, bytes) else str(code)
                with lock:
                    sid = str(next(sids))
                    judge.answers[sid] = answer_for(code)
                self._send(200, {"sid": sid})

            def do_GET(self) -> None:
                if self.path == "/problems":  # FrontierCS lists bare ids: the public suite
                    self._send(200, {"problems": ["0"]})
                    return
                found = re.fullmatch(r"/result/([^/]+)", self.path)
                answer = judge.answers.get(found[1]) if found else None
                self._send(200, answer) if answer else self._send(404, {"error": "not found"})

            def _send(self, status: int, body: Any) -> None:
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FrontierCSStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class RoleExecutor:
    """The executor stand-in: answers call n with a program of role `ROLES[n % 4]`."""

    def __init__(self) -> None:
        self._calls = itertools.count()
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Reply:
        with self._lock:
            role = ROLES[next(self._calls) % len(ROLES)]
        program = f"// role: {role}\nint main() {{ return 0; }}"
        summary = f"A stand-in program whose role is to show what the judge says ({role})."
        return Reply(
            content=f"<solution>\n```cpp\n{program}\n```\n</solution>\n\n"
            f"<summary>\n{summary}\n</summary>",
        )


@dataclass
class Run:
    reports: list[Any]
    reef_records: str
    guidance_requests: list[RecordedRequest]
    executor_requests: list[RecordedRequest]
    entries: list[dict[str, Any]]
    committed_library: str


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    root = tmp_path_factory.mktemp("untrusted-text")
    task = task_dir()
    if not (task / "solution" / "seed.json").is_file():
        pytest.skip(f"{task}/solution/seed.json (the task's seed archive) is missing")
    with (
        FrontierCSStandIn() as judge,
        OpenAIFixture(GuidanceScript()) as guidance,
        OpenAIFixture(RoleExecutor()) as executor,
        running_reef(
            root / "reef",
            upstream=guidance,
            recipe_config={
                "groups-per-step": G,
                "rollouts-per-group": R,
            },
        ) as reef,
    ):
        settings = write_serve_yaml(
            root / "serve.yaml",
            state_dir=root / "state",
            reef_port=reef.port,
            judge_url=judge.url,
            groups=G,
            rollouts=R,
            steps=STEPS,
        )
        run_cpu_steps(settings, executor.v1_url, task)
        stored = ReefReports(reef.url, settings.scenario)
        records = [stored._records(kind) for kind in ("inference", "report")]
        details = [stored._details[r.record_id] for r in stored.reports()]
        yield Run(
            stored.reports(),
            json.dumps([records, details]),
            guidance.completion_requests(),
            executor.completion_requests(),
            [j.entry for j in journal(settings.state_dir)],
            (settings.state_dir / COMMITTED_LIBRARY).read_text(),
        )


def test_the_judge_really_sent_the_marker_and_the_entries_keep_it_bounded(run: Run) -> None:
    """Non-vacuous: every role was judged, the marker came back in the judge's answers, and the
    entries keep it only in bounded artifacts (`case_detail`, `judge_logs`, `score_check`)."""
    statuses = {e["verifier_status"] for e in run.entries}
    assert {"valid", "invalid"} <= statuses
    holders = 0
    for entry in run.entries:
        assert MARKER not in entry["verifier_message"]
        artifacts = entry["metadata"]["verification_artifacts"]
        kept = [v for v in artifacts.values() if isinstance(v, str) and MARKER in v]
        assert all(len(v) <= 600 for v in kept)
        holders += bool(kept)
    assert holders >= STEPS * G * R * 3 // 4, "three roles of four carry the marker"
    crashed = [e for e in run.entries if "crashes_with_stderr" in e["solution"]]
    assert crashed and all(e["verifier_message"] == "accepted" for e in crashed)


def test_the_marker_reaches_no_record_reef_stored(run: Run) -> None:
    """Reference harness/agent.py sends `"<status>: <message>"` as the feedback; ours carries
    no judge text: `valid: accepted`, or the status and our sentence. Read back from Reef."""
    assert len(run.reports) == STEPS * G * R
    assert MARKER not in run.reef_records
    assert any(r.feedback == "valid: accepted" for r in run.reports)


def test_the_marker_reaches_no_prompt(run: Run) -> None:
    """Neither model's prompt ever shows the judge's text, in either step (the second step's
    parents come from an archive whose entries hold it in their artifacts)."""
    assert len(run.guidance_requests) == STEPS * G * R
    assert run.executor_requests
    for request in (*run.guidance_requests, *run.executor_requests):
        assert MARKER not in json.dumps(request.body)
    assert MARKER in run.committed_library, "the archive keeps the audit (non-vacuous)"
