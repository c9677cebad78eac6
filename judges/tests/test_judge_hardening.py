"""The judge service under hostile requests and outputs, over real HTTP and raw sockets.

Each example is a class of defect found by attacking the judge: malformed requests (a lone
UTF-16 surrogate, deep JSON nesting, a truncated multipart body, an unknown charset, gzip that
is not gzip, source bytes that are not UTF-8) must be a 400 naming the problem and consume
nothing; idle and slow connections must be closed after a bounded time; overload, descriptor
exhaustion and a full disk must be a 503 with Retry-After; a candidate printing 1 MiB of
control bytes per case must not blow up its result or stall the health endpoint.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import resource
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from judges.problems.polyomino.generator import generate_instance
from judges.service.process import JudgeProcess, cgroup_missing
from judges.service.requests import MAX_BODY_BYTES

PROGRAMS = Path(__file__).parent / "programs"
ROOT = Path(__file__).resolve().parents[2]
FEW_DESCRIPTORS = 3  # 0-2 stay open, so every new descriptor fails with EMFILE
IDLE_TIMEOUT_S = 2.0
BODY_TIMEOUT_S = 3.0
FLOOD_CASES = 24
HEALTH_BOUND_S = 10.0  # generous: a probe never waits for judging, however loaded the host

pytestmark = pytest.mark.slow
CGROUP_MISSING = cgroup_missing()


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JudgeProcess]:
    state = tmp_path_factory.mktemp("hardening-state")
    args = ["--generated-cases", str(FLOOD_CASES), "--seed", "3", "--workers", "2"]
    args += ["--limit", f"idle-timeout={IDLE_TIMEOUT_S}"]
    args += ["--limit", f"body-timeout={BODY_TIMEOUT_S}"]
    with JudgeProcess(state, *args) as running:
        running.state = state  # type: ignore[attr-defined]
        yield running


def stored_entries(judge: JudgeProcess) -> list[str]:
    """Every file and folder under the judge's submissions tree, hidden ones included, but the
    results that earlier submissions receive meanwhile."""
    return [
        entry
        for entry in stored_entries_under(judge.state)  # type: ignore[attr-defined]
        if "result.json" not in entry
    ]


def submit(judge: JudgeProcess, code: bytes) -> httpx.Response:
    """POST `code` for problem 0 as a multipart file, as the harness's client does."""
    return httpx.post(
        f"{judge.url}/submit",
        data={"pid": "0", "lang": "cpp"},
        files={"code": ("solution.cpp", code, "text/x-c++src")},
        timeout=30,
    )


def next_sid(judge: JudgeProcess) -> int:
    answer = submit(judge, b"int main() { return 0; }\n")
    assert answer.status_code == 200, answer.text
    return answer.json()["sid"]


def refused_without_trace(
    judge: JudgeProcess, send: Callable[[], httpx.Response], status: int = 400
) -> str:
    """Send a malformed request; it must get `status`, create nothing, and use up no sid."""
    before_sid = next_sid(judge)
    before = stored_entries(judge)
    answer = send()
    assert answer.status_code == status, answer.text
    assert answer.headers["Content-Type"].startswith("application/json")
    assert stored_entries(judge) == before
    assert next_sid(judge) == before_sid + 1  # no submission id was consumed
    return answer.json()["error"]


def post(judge: JudgeProcess, body: bytes, content_type: str, **headers: str) -> httpx.Response:
    headers = {"Content-Type": content_type, **headers}
    return httpx.post(f"{judge.url}/submit", content=body, headers=headers, timeout=30)


def test_lone_utf16_surrogate_in_json_is_a_400_naming_it(judge: JudgeProcess) -> None:
    body = b'{"pid": "0", "lang": "cpp", "code": "int main() {}\\ud800"}'
    error = refused_without_trace(judge, lambda: post(judge, body, "application/json"))
    assert "field code contains a lone UTF-16 surrogate \\ud800 at character 13" in error


def test_deeply_nested_json_is_a_400_naming_the_depth(judge: JudgeProcess) -> None:
    body = b'{"pid": "0", "lang": "cpp", "code": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    error = refused_without_trace(judge, lambda: post(judge, body, "application/json"))
    assert "JSON body nests more than 64 levels deep" in error
    shallow_but_over = b'{"pid": "0", "lang": "cpp", "code": ' + b"[" * 65 + b"]" * 65 + b"}"
    send = lambda: post(judge, shallow_but_over, "application/json")  # noqa: E731
    assert "nests more than 64 levels deep" in refused_without_trace(judge, send)


def test_multipart_body_of_many_parts_is_a_400_and_opens_no_files(judge: JudgeProcess) -> None:
    parts = b"".join(
        b'--XYZ\r\nContent-Disposition: form-data; name="f%d"; filename="f.txt"\r\n\r\nx\r\n'
        % number
        for number in range(2000)
    )
    body = parts + b"--XYZ--\r\n"
    send = lambda: post(judge, body, "multipart/form-data; boundary=XYZ")  # noqa: E731
    assert "multipart body has more than 16 parts" in refused_without_trace(judge, send)


def test_truncated_multipart_body_is_a_400(judge: JudgeProcess) -> None:
    whole = (
        b'--XYZ\r\nContent-Disposition: form-data; name="pid"\r\n\r\n0\r\n'
        b'--XYZ\r\nContent-Disposition: form-data; name="lang"\r\n\r\ncpp\r\n'
        b'--XYZ\r\nContent-Disposition: form-data; name="code"; filename="a.cpp"\r\n\r\n'
        b"int main() { return 0; }\r\n--XYZ--\r\n"
    )
    truncated = whole[: len(whole) - 30]
    send = lambda: post(judge, truncated, "multipart/form-data; boundary=XYZ")  # noqa: E731
    assert "malformed multipart/form-data body" in refused_without_trace(judge, send)


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/x-www-form-urlencoded; charset=x-no-such", b"pid=0&lang=cpp&code=x"),
        ("application/json; charset=x-no-such", b'{"pid": "0", "lang": "cpp", "code": "x"}'),
        ("text/x-c++src; charset=x-no-such", b"int main() {}"),
    ],
)
def test_unknown_charset_is_a_400_naming_it(
    judge: JudgeProcess, content_type: str, body: bytes
) -> None:
    error = refused_without_trace(judge, lambda: post(judge, body, content_type))
    assert "unknown charset 'x-no-such'" in error


def test_gzip_content_encoding_on_a_plain_body_is_a_400(judge: JudgeProcess) -> None:
    body = b'{"pid": "0", "lang": "cpp", "code": "int main() {}"}'
    send = lambda: post(judge, body, "application/json", **{"Content-Encoding": "gzip"})  # noqa: E731
    error = refused_without_trace(judge, send)
    assert "Content-Encoding: gzip" in error and "decode" in error


def test_source_bytes_that_are_not_utf8_are_refused_naming_the_offset(judge: JudgeProcess) -> None:
    source = b"int main() { return 0; }\n// \xff\xfe\n"
    multipart = lambda: httpx.post(  # noqa: E731
        f"{judge.url}/submit",
        data={"pid": "0", "lang": "cpp"},
        files={"code": ("solution.cpp", source, "text/x-c++src")},
        timeout=30,
    )
    error = refused_without_trace(judge, multipart)
    assert "field code is not valid utf-8: byte 0xff at byte offset 28" in error
    urlencoded = b"pid=0&lang=cpp&code=int%20main()%20%7B%7D%0A%FF"
    send = lambda: post(judge, urlencoded, "application/x-www-form-urlencoded")  # noqa: E731
    assert "byte 0xff at byte offset 14" in refused_without_trace(judge, send)


CLIENT_TIMEOUT_S = 60.0  # a socket the server never closes fails the test with a timeout


def test_over_size_body_is_a_413_naming_the_limit_and_consumes_nothing(
    judge: JudgeProcess,
) -> None:
    """A client that sends its whole 11 MiB body before reading (as httpx does) still reads the
    413: the judge answers at once and discards the rest instead of resetting the connection."""
    body = b"x" * (MAX_BODY_BYTES + (1 << 20))
    for kind in ("text/x-c++src", "application/json", "multipart/form-data; boundary=b"):
        answer = post(judge, body, kind)
        assert answer.status_code == 413, answer.text
        assert answer.json()["limitBytes"] == MAX_BODY_BYTES
        assert f"exceeds the limit of {MAX_BODY_BYTES} bytes" in answer.json()["error"]
    error = refused_without_trace(judge, lambda: post(judge, body, "text/x-c++src"), status=413)
    assert f"request body of {len(body)} bytes" in error


def test_over_size_body_without_a_length_is_a_413_once_it_passes_the_limit(
    judge: JudgeProcess,
) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(MAX_BODY_BYTES // (1 << 20) + 2):
            yield b"x" * (1 << 20)

    answer = httpx.post(
        f"{judge.url}/submit?pid=0&lang=cpp",
        content=chunks(),
        timeout=30,
        headers={"Content-Type": "text/x-c++src"},
    )
    assert answer.status_code == 413, answer.text
    assert f"exceeds the limit of {MAX_BODY_BYTES} bytes" in answer.json()["error"]


def test_expect_continue_for_an_over_size_body_gets_413_not_100_continue(
    judge: JudgeProcess,
) -> None:
    sock = connect(judge)
    sock.sendall(
        b"POST /submit HTTP/1.1\r\nHost: judge\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n" % (2 * MAX_BODY_BYTES)
    )
    data, _ = closed_after(sock)
    sock.close()
    assert data.startswith(b"HTTP/1.1 413 "), data[:200]
    assert b"100 Continue" not in data
    assert b'"limitBytes": %d' % MAX_BODY_BYTES in data


def test_expect_continue_for_an_acceptable_body_gets_100_continue(judge: JudgeProcess) -> None:
    body = json.dumps({"pid": "0", "lang": "cpp", "code": "int main() {}\n"}).encode()
    sock = connect(judge)
    sock.sendall(
        b"POST /submit HTTP/1.1\r\nHost: judge\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n" % len(body)
    )
    assert sock.recv(65536) == b"HTTP/1.1 100 Continue\r\n\r\n"
    sock.sendall(body)
    data, _ = closed_after(sock)
    sock.close()
    assert data.startswith(b"HTTP/1.1 200 ") and b'"sid"' in data, data[:300]


def test_a_400_echoes_only_a_short_prefix_of_an_unknown_pid_or_lang(judge: JudgeProcess) -> None:
    for field in ("pid", "lang"):
        fields = {"pid": "0", "lang": "cpp", "code": "int main() {}\n", field: "z" * 100_000}
        answer = httpx.post(f"{judge.url}/submit", json=fields, timeout=30)
        assert answer.status_code == 400
        error = answer.json()["error"]
        assert len(error) < 500 and "(100000 characters)" in error, error[:600]


def connect(judge: JudgeProcess) -> socket.socket:
    host, port = judge.url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=CLIENT_TIMEOUT_S)
    return sock


def closed_after(sock: socket.socket) -> tuple[bytes, float]:
    """Read until the server closes the connection; what it sent and after how long. Raises
    (socket timeout) when the server keeps it open for CLIENT_TIMEOUT_S."""
    started = time.monotonic()
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data, time.monotonic() - started


def test_idle_connection_and_partial_request_head_are_closed(judge: JudgeProcess) -> None:
    idle = connect(judge)
    partial = connect(judge)
    partial.sendall(b"POST /submit HTTP/1.1\r\nHost: judge\r\nContent-Type: application/")
    for sock in (idle, partial):
        data, _ = closed_after(sock)  # the server closed it: the client did not time out
        assert data == b""
        sock.close()


def test_request_head_trickled_byte_by_byte_is_cut_off(judge: JudgeProcess) -> None:
    """The whole head would take 34 s at one byte per 0.25 s; the server cuts it off (its idle
    timer runs from the connection's start), so a send fails long before the head is done."""
    sock = connect(judge)
    with pytest.raises(OSError):
        for byte in b"GET /health HTTP/1.1\r\nHost: judge\r\nX-Slow: " + b"a" * 100:
            sock.sendall(bytes([byte]))
            time.sleep(0.25)  # the pace of the trickle, not a wait for the server
    sock.close()


def test_body_that_never_arrives_is_a_408_and_consumes_nothing(judge: JudgeProcess) -> None:
    before = stored_entries(judge)
    sock = connect(judge)
    sock.sendall(
        b"POST /submit HTTP/1.1\r\nHost: judge\r\nContent-Type: application/json\r\n"
        b'Content-Length: 200\r\n\r\n{"pid": "0", "lang": "cpp", '
    )
    data, waited = closed_after(sock)
    sock.close()
    assert data.startswith(b"HTTP/1.1 408 "), data[:200]
    assert b"did not arrive within 3 s" in data
    assert waited > BODY_TIMEOUT_S - 0.5  # not before the body timeout (later is load, not a bug)
    assert stored_entries(judge) == before


def test_descriptor_limit_caps_connections_and_the_excess_gets_503(tmp_path: Path) -> None:
    judge = JudgeProcess(tmp_path / "state", "--generated-cases", "1", "--workers", "1")
    judge.command = ["prlimit", "--nofile=200:200", *judge.command]
    with judge:
        log = judge.log_path.read_text()
        found = re.search(r"at most (\d+) connections at once", log)
        assert found, log[-2000:]
        cap = int(found[1])
        assert 20 < cap < 200 - 64
        held = [connect(judge) for _ in range(cap)]
        for sock in held:  # each is served (an answer on it), so the server counts it now
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: judge\r\n\r\n")
            assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
        extra = []
        for _ in range(30):  # each sends its request at once, as clients do
            sock = connect(judge)
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: judge\r\n\r\n")
            extra.append(sock)
        answers = []
        for sock in extra:
            answers.append(closed_after(sock)[0])
            sock.close()
        refused = [answer for answer in answers if answer.startswith(b"HTTP/1.1 503 ")]
        assert len(refused) == len(extra), answers[:3]
        assert all(b"\r\nRetry-After: 2\r\n" in answer for answer in refused)
        for sock in held:
            sock.close()
        assert health_once_room(judge)["ok"] is True
        assert "Traceback" not in judge.log_path.read_text()


def test_control_byte_flood_stores_a_bounded_result_and_health_stays_quick(
    judge: JudgeProcess,
) -> None:
    """While the flood is judged, health probes go out one after another, each followed by a
    poll of the result. Every probe must be answered (within the client's timeout, a generous
    HEALTH_BOUND_S), and at least one probe must be answered while the submission is still
    being judged — seen by the poll after it still answering `queued` — so the probes really
    ran beside the judging, however fast or slow this machine is."""
    code = (PROGRAMS / "control_bytes_flood.cpp").read_text()
    sid = submit(judge, code.encode()).json()["sid"]
    probes_during_judging = 0
    with httpx.Client(timeout=HEALTH_BOUND_S) as client:
        while True:
            assert client.get(f"{judge.url}/health").json()["ok"] is True
            result = client.get(f"{judge.url}/result/{sid}").json()
            if result["status"] != "queued":
                break
            probes_during_judging += 1
        final = client.get(f"{judge.url}/result/{sid}")
    assert probes_during_judging >= 1
    flood = bytes(1 + i % 31 for i in range(1 << 20))
    assert result["status"] == "done" and len(result["cases"]) == FLOOD_CASES
    for case in result["cases"]:
        assert case["runStatus"] == "Accepted" and case["scoreRatio"] == 0
        assert case["outputBytes"] == 1 << 20 and case["outputTruncated"] is True
        assert case["outputSha256"] == hashlib.sha256(flood).hexdigest()
        assert case["output"].encode() == flood[:4096]
    assert len(final.content) < FLOOD_CASES * 32 * 1024  # 1 MiB each would be ~6 MiB each
    assert json.loads(final.content) == result


def health_once_room(judge: JudgeProcess) -> dict[str, Any]:
    """/health as soon as the server has room again (closed connections take a moment to be
    counted out; until then it may answer 503)."""
    deadline = time.monotonic() + CLIENT_TIMEOUT_S
    while time.monotonic() < deadline:
        answer = httpx.get(f"{judge.url}/health", timeout=10)
        if answer.status_code != 503:
            return answer.json()
        time.sleep(0.1)
    raise AssertionError(f"/health still 503 after {CLIENT_TIMEOUT_S:g} s")


def wait_final(judge: JudgeProcess, sid: int, timeout: float = 300.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = httpx.get(f"{judge.url}/result/{sid}", timeout=10).json()
        if answer["status"] != "queued":
            return answer
        time.sleep(0.2)
    raise AssertionError(f"submission {sid} not judged within {timeout} s")


@pytest.mark.skipif(
    os.geteuid() != 0, reason="mounting a small tmpfs as the state directory needs root"
)
def test_full_disk_is_a_503_and_leaves_no_submission_behind(tmp_path: Path) -> None:
    problems = tmp_path / "problems"
    (problems / "0" / "testdata").mkdir(parents=True)
    (problems / "0" / "testdata" / "1.in").write_text(generate_instance(7, 1))
    (problems / "0" / "config.yaml").write_text(
        "time: 2s\nmemory: 256m\nsubtasks:\n- score: 100\n  n_cases: 1\n"
    )
    state = tmp_path / "state"
    state.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(state)], check=True)
    try:
        with JudgeProcess(state, "--problems", str(problems), "--workers", "1") as judge:
            filler = state / "filler"
            fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
            with contextlib.suppress(OSError):  # until the disk is full
                while True:
                    os.write(fd, b"\0" * 4096)
            os.close(fd)
            before = stored_entries_under(state)
            code = b"int main() { return 0; }\n" + b"// padding\n" * 20000
            answer = submit(judge, code)
            assert answer.status_code == 503, answer.text
            assert answer.headers["Retry-After"]
            assert "No space left on device" in answer.json()["error"]
            assert stored_entries_under(state) == before
            filler.unlink()
            assert next_sid(judge) == 1  # the refused submission used up no id
    finally:
        subprocess.run(["umount", "-l", str(state)], check=False)


def test_descriptors_running_out_inside_the_submit_handler_is_a_503_consuming_nothing(
    tmp_path: Path,
) -> None:
    """The connection is already accepted (its descriptor exists); the judge's soft descriptor
    limit is then lowered to 3, so every new descriptor (its number would be 3 or more, as 0-2
    stay open) fails with EMFILE while those already open keep working. The handler's first
    open (the submission's files) fails: a 503 with Retry-After naming it, no folder left, no
    sid used up; with the limit back, the next submission gets the next sid."""
    with JudgeProcess(tmp_path / "state", "--generated-cases", "1", "--workers", "1") as judge:
        pid = judge.process.pid  # type: ignore[union-attr]
        state = tmp_path / "state"
        assert next_sid(judge) == 1
        wait_final(judge, 1)  # nothing is being judged while descriptors are short
        before = stored_entries_under(state)
        body = json.dumps({"pid": "0", "lang": "cpp", "code": "int main() {}\n"}).encode()
        sock = connect(judge)
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: judge\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")  # accepted, kept alive
        limits = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (FEW_DESCRIPTORS, limits[1]))
        try:
            sock.sendall(
                b"POST /submit HTTP/1.1\r\nHost: judge\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
            )
            answer, _ = closed_after(sock)
        finally:
            resource.prlimit(pid, resource.RLIMIT_NOFILE, limits)
            sock.close()
        head, _, payload = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503 "), answer[:300]
        assert b"\r\nRetry-After: 2\r\n" in head + b"\r\n"
        assert "Too many open files" in json.loads(payload)["error"]
        assert stored_entries_under(state) == before
        assert next_sid(judge) == 2  # the refused submission used up no id
        assert "Traceback" not in judge.log_path.read_text()


def test_descriptors_running_out_while_judging_retries_instead_of_failing(tmp_path: Path) -> None:
    """Two submissions are queued (one sleeping 1 s per case, so both wait a while); then the
    judge's descriptors run short until the log says a sandbox start failed for it. Every
    sandbox start in that window fails with EMFILE; the engine must judge those submissions
    again later, not record a `judge` error, and both end with their true results."""
    args = ["--generated-cases", "3", "--seed", "5", "--workers", "1"]
    with JudgeProcess(tmp_path / "state", *args) as judge:
        pid = judge.process.pid  # type: ignore[union-attr]
        sleeper = b"#include <unistd.h>\nint main() { usleep(1000000); return 0; }\n"
        seed = (ROOT / "harbor/polyomino_packing/solution/solution.cpp").read_bytes()
        sids = []
        for code in (sleeper, seed):
            answer = submit(judge, code)
            sids.append(answer.json()["sid"])
        limits = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (FEW_DESCRIPTORS, limits[1]))
        try:
            wait_logged(judge, "the judge ran out of resources")
        finally:
            resource.prlimit(pid, resource.RLIMIT_NOFILE, limits)
        sleeping, seeded = (wait_final(judge, sid) for sid in sids)
        log = judge.log_path.read_text()
        assert "the judge ran out of resources ([Errno 24] Too many open files" in log
        assert "judging it again in 2 s (retry 1 of 6)" in log
        assert sleeping["status"] == "done", sleeping
        assert [case["runStatus"] for case in sleeping["cases"]] == ["Accepted"] * 3
        assert seeded["status"] == "done" and seeded["score"] > 0, seeded
        again = next_sid(judge)
        assert wait_final(judge, again)["status"] == "done"
        submit(judge, seed)
        assert wait_final(judge, again + 1)["score"] == seeded["score"]
        assert "Traceback" not in log


def wait_logged(judge: JudgeProcess, text: str, timeout: float = 120.0) -> None:
    """Return once the judge's log holds `text`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in judge.log_path.read_text():
            return
        time.sleep(0.05)
    raise AssertionError(
        f"the judge's log did not say {text!r} within {timeout:g} s; it ends:\n"
        f"{judge.log_path.read_text()[-3000:]}"
    )


def stored_entries_under(state: Path) -> list[str]:
    root = state / "submissions"
    return sorted(str(path.relative_to(root)) for path in root.rglob("*"))


@pytest.mark.skipif(CGROUP_MISSING is not None, reason=f"{CGROUP_MISSING}")
def test_cgroups_of_a_killed_judge_are_removed_by_the_next_one(tmp_path: Path) -> None:
    first = JudgeProcess(tmp_path / "first", "--generated-cases", "1").start()
    line = next(
        text for text in first.log_path.read_text().splitlines() if "sandbox bound: cgroup" in text
    )
    where = line.split(" under ", 1)[1].split(" (", 1)[0]
    groups = [Path(part) for part in where.split(", ")]
    assert all(group.is_dir() for group in groups)
    assert first.process is not None
    first.process.kill()  # no cleanup
    first.process.wait()
    assert all(group.is_dir() for group in groups)
    with JudgeProcess(tmp_path / "second", "--generated-cases", "1"):
        assert not any(group.exists() for group in groups)


@pytest.mark.skipif(CGROUP_MISSING is not None, reason=f"{CGROUP_MISSING}")
def test_a_second_bound_of_one_process_closing_leaves_the_first_one_working() -> None:
    """Bounds of one process share its `guidance-ttt-judge-<pid>` directories: the launcher's
    probe (`cgroup_missing`), or a test's bound beside another, closing must not remove them
    from under a bound still open (random test order found this)."""
    from judges.cgroups.groups import detect

    first = detect("auto")
    try:
        second = detect("auto")
        group = second.create(64 << 20, 8)
        group.remove()
        second.close()
        second.close()  # idempotent
        assert all(parent.is_dir() for parent in first.parents)
        group = first.create(64 << 20, 8)  # still usable, and its run numbers are its own
        assert all(directory.is_dir() for directory in group.directories)
        group.remove()
    finally:
        first.close()
    assert not any(parent.exists() for parent in first.parents)


def one_second_problem(root: Path) -> Path:
    """A problem folder `0` of one Polyomino case with a 1 s time limit."""
    problems = root / "problems"
    (problems / "0" / "testdata").mkdir(parents=True)
    (problems / "0" / "testdata" / "1.in").write_text(generate_instance(7, 1))
    (problems / "0" / "config.yaml").write_text(
        "time: 1s\nmemory: 256m\nsubtasks:\n- score: 100\n  n_cases: 1\n"
    )
    return problems


@pytest.mark.skipif(CGROUP_MISSING is not None, reason=f"{CGROUP_MISSING}")
def test_cpu_hidden_in_children_the_kernel_reaps_is_a_time_limit_beside_an_innocent(
    tmp_path: Path,
) -> None:
    """A candidate ignoring SIGCHLD burns 5 s of CPU in short-lived children the kernel reaps
    (no cutime, no rusage) on a 1 s problem. The run's cgroup counts them: Time Limit Exceeded
    with at least 1 s of CPU charged, at the first attempt (never "starved", never retried);
    the seed judged beside it gets its own verdict."""
    problems = one_second_problem(tmp_path)
    attack = (PROGRAMS / "unreaped_children_cpu.cpp").read_bytes()
    seed = (ROOT / "harbor/polyomino_packing/solution/solution.cpp").read_bytes()
    args = ["--problems", str(problems), "--workers", "2", "--limit", "verdict-cache-mb=0"]
    with JudgeProcess(tmp_path / "state", *args) as judge:
        sids = [submit(judge, code).json()["sid"] for code in (attack, seed)]
        attacked, innocent = (wait_final(judge, sid, timeout=120) for sid in sids)
        log = judge.log_path.read_text()
    assert attacked["status"] == "done", attacked
    (case,) = attacked["cases"]
    assert case["runStatus"] == "Time Limit Exceeded", case
    assert case["cpuTime"] >= 1_000_000_000, case
    assert "exceeds the limit of 1 s" in case["msg"]
    assert innocent["status"] == "done" and innocent["score"] > 0, innocent
    assert [case["runStatus"] for case in innocent["cases"]] == ["Accepted"]
    assert "judging it again" not in log and "Traceback" not in log


@pytest.mark.skipif(
    os.geteuid() != 0, reason="mounting a small tmpfs as the scratch disk needs root"
)
def test_a_compile_the_judges_full_disk_broke_is_judged_again_and_never_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The judge's scratch folder (under TMPDIR) is a 8 MiB tmpfs, filled after start-up to
    256 KiB short of full; a valid program whose binary takes 4 MiB cannot be linked there.
    That is the judge's fault: the engine judges it again (the log says so, naming the full
    disk), never records or caches a compile error; once the disk has room, the program gets
    its verdict, and the same source again gets that verdict from the cache."""
    problems = one_second_problem(tmp_path)
    scratch = Path(tempfile.mkdtemp(prefix="judge-scratch-"))
    try:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=8m,mode=0755", "tmpfs", str(scratch)],
            check=True,
        )
    except (OSError, subprocess.CalledProcessError) as error:
        scratch.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {error}")
    monkeypatch.setenv("TMPDIR", str(scratch))
    code = (
        b"char big[4 << 20] = {1};  // kept: external linkage\nint main() { return big[0] - 1; }\n"
    )
    try:
        with JudgeProcess(
            tmp_path / "state", "--problems", str(problems), "--workers", "1"
        ) as judge:
            filler = scratch / "filler"
            with open(filler, "wb") as file, contextlib.suppress(OSError):
                while True:
                    file.write(b"\0" * 65536)
                    file.flush()
            os.truncate(filler, max(0, filler.stat().st_size - (256 << 10)))
            sid = submit(judge, code).json()["sid"]
            wait_logged(judge, "the judge ran out of resources")
            filler.unlink()
            record = wait_final(judge, sid, timeout=120)
            again = wait_final(judge, submit(judge, code).json()["sid"], timeout=60)
            log = judge.log_path.read_text()
    finally:
        subprocess.run(["umount", "-l", str(scratch)], check=False)
        scratch.rmdir()
    assert "No space left on device: a compile failed where the judge's scratch folder" in log
    assert record["status"] == "done", record
    assert [case["runStatus"] for case in record["cases"]] == ["Accepted"]
    assert again["verdictCache"]["hit"] is True and again["status"] == "done", again
    assert "Error: compile failed" not in log  # no compile error was recorded
