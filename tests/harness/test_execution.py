"""Executor client against a real OpenAI-compatible HTTP server on 127.0.0.1.

The server below is scripted: each POST takes the next scripted reply (status, headers, body,
delay, or a dropped connection) and records the arrival time, headers and body, so retries,
backoff waits and concurrency are measured on the server side. A request counts as in flight from
its arrival until the server starts to answer it, so a client that waits for one answer before
sending the next request can never be seen overlapping with it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import secrets
import socket
import threading
import time
import traceback
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from harness.adapters.executor.backends import ExecutionBackend, backend_from_name
from harness.adapters.executor.client import (
    ExecutionClient,
    ExecutionError,
    ExecutionHTTPError,
    ExecutionResponseError,
    ExecutionTransportError,
    MissingAPIKeyError,
)

pytestmark = pytest.mark.timeout(60)

MESSAGES = [
    {"role": "system", "content": "You write C++."},
    {"role": "user", "content": "Improve the parent."},
]


def completion(content: Any = "<solution>x</solution>", **message: Any) -> dict[str, Any]:
    return {
        "choices": [{"message": {"content": content, **message}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7},
    }


@dataclass
class Reply:
    status: int = 200
    body: Any = field(default_factory=completion)  # dict, str, or callable(headers) -> str
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    drop: bool = False  # close the connection without answering
    # Hold the answer until this many requests are in flight at once (at most HOLD_LIMIT_S), so a
    # test can prove that concurrent calls really overlap without betting on thread scheduling.
    await_in_flight: int = 0


HOLD_LIMIT_S = 5.0


@dataclass
class Seen:
    at: float
    headers: dict[str, str]
    body: dict[str, Any]


class ScriptedServer:
    """A real HTTP server: replies come from `script` in order, then `Reply()` forever."""

    def __init__(self) -> None:
        self.script: deque[Reply] = deque()
        self.seen: list[Seen] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        self.in_flight_changed = threading.Condition(self.lock)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                arrived = time.monotonic()
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                headers = {k.lower(): v for k, v in self.headers.items()}
                with outer.in_flight_changed:
                    outer.seen.append(Seen(arrived, headers, json.loads(raw)))
                    reply = outer.script.popleft() if outer.script else Reply()
                    outer.in_flight += 1
                    outer.max_in_flight = max(outer.max_in_flight, outer.in_flight)
                    outer.in_flight_changed.notify_all()
                    outer.in_flight_changed.wait_for(
                        lambda: outer.in_flight >= reply.await_in_flight, timeout=HOLD_LIMIT_S
                    )
                try:
                    time.sleep(reply.delay_s)
                finally:
                    # Leave the count before the first byte goes out: the client may send its
                    # next request as soon as it has this answer.
                    with outer.in_flight_changed:
                        outer.in_flight -= 1
                        outer.in_flight_changed.notify_all()
                if reply.drop:
                    self.close_connection = True
                    return
                body = reply.body(headers) if callable(reply.body) else reply.body
                data = (body if isinstance(body, str) else json.dumps(body)).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client gave up waiting (read timeout)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def gaps(self) -> list[float]:
        return [b.at - a.at for a, b in zip(self.seen, self.seen[1:], strict=False)]


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer()
    srv.thread.start()
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()
    srv.thread.join(timeout=5)


def fast(backend: ExecutionBackend, **changes: Any) -> ExecutionBackend:
    """The same backend with a tiny backoff, so waits are measurable but short."""
    return replace(backend, **{"retry_backoff_s": 0.05, **changes})


def call(backend: ExecutionBackend, messages: list[dict[str, str]] = MESSAGES) -> Any:
    with ExecutionClient(backend) as client:
        return client.complete(messages)


# ------------------------------------------------------------------------- request bodies


def test_gpt_oss_body_has_model_temperature_effort_placeholder_bearer_and_no_max_tokens(server):
    backend = backend_from_name("gpt_oss_120b", base_url=server.url, reasoning_effort="medium")
    server.script.append(Reply(body=completion("answer", reasoning_content="thoughts")))

    result = call(backend)

    (seen,) = server.seen
    assert seen.body == {
        "model": "openai/gpt-oss-120b",
        "messages": MESSAGES,
        "temperature": 0.0,
        "reasoning_effort": "medium",
    }
    assert seen.headers["authorization"] == "Bearer local-executor"  # the reference's placeholder
    assert (result.text, result.reasoning, result.finish_reason) == ("answer", "thoughts", "stop")
    assert result.usage == {"prompt_tokens": 11, "completion_tokens": 7}
    assert result.attempts == 1
    # The reference's keys (its harness/execution.py and agent.py); the fake names no model.
    assert result.response_metadata() == {
        "provider": "openai_compatible",
        "backend": backend.name,
        "api_attempts": 1,
        "api_elapsed_s": result.elapsed_s,
        "purpose": "execution",
        "finish_reason": "stop",
    }


def test_openrouter_body_has_reasoning_options_max_tokens_and_bearer_key(server, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-body-test")
    backend = backend_from_name("openrouter_glm_5_2", base_url=server.url, max_tokens=4096)

    call(backend)

    (seen,) = server.seen
    assert seen.body == {
        "model": "z-ai/glm-5.2",
        "messages": MESSAGES,
        "temperature": 1.0,
        "max_tokens": 4096,
        "reasoning": {"effort": "high", "exclude": False},
    }
    assert seen.headers["authorization"] == "Bearer sk-or-body-test"


def test_missing_openrouter_key_fails_naming_the_variable_without_calling(server, monkeypatch):
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    backend = backend_from_name("openrouter_glm_5_2", base_url=server.url)

    with pytest.raises(MissingAPIKeyError, match="OPENROUTER_API_KEY"):
        call(backend)
    assert server.seen == []


def test_local_server_key_is_sent_only_when_configured(server, monkeypatch):
    monkeypatch.setenv("LOCAL_EXECUTOR_KEY", "local-secret")
    backend = backend_from_name(
        "gpt_oss_120b", base_url=server.url, api_key_env="LOCAL_EXECUTOR_KEY"
    )

    call(backend)

    assert server.seen[0].headers["authorization"] == "Bearer local-secret"


# ------------------------------------------------------------------------------- retries


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
def test_each_transient_status_is_retried(server, status):
    backend = fast(backend_from_name("gpt_oss_120b", base_url=server.url), max_retries=1)
    server.script.append(Reply(status=status, body={"error": "busy"}))

    result = call(backend)

    assert result.attempts == 2
    assert len(server.seen) == 2


def test_retries_wait_with_exponential_backoff(server):
    backend = fast(backend_from_name("gpt_oss_120b", base_url=server.url), max_retries=3)
    server.script.extend([Reply(status=503), Reply(status=429), Reply(status=500)])

    result = call(backend)

    assert result.attempts == 4
    for gap, expected in zip(server.gaps(), [0.05, 0.1, 0.2], strict=True):
        assert expected <= gap < expected + 0.5


def test_retries_stop_after_max_retries_with_the_last_status(server):
    backend = fast(backend_from_name("gpt_oss_120b", base_url=server.url), max_retries=2)
    server.script.extend([Reply(status=502, body="bad gateway")] * 3)

    with pytest.raises(ExecutionHTTPError) as caught:
        call(backend)

    assert caught.value.status == 502
    assert "attempt 3" in str(caught.value)
    assert len(server.seen) == 3


def test_gpt_oss_default_policy_makes_a_single_attempt(server):
    backend = backend_from_name("gpt_oss_120b", base_url=server.url)
    server.script.append(Reply(status=503))

    with pytest.raises(ExecutionHTTPError):
        call(backend)
    assert len(server.seen) == 1


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_non_transient_status_fails_at_once_with_status_and_truncated_body(server, status):
    backend = fast(backend_from_name("gpt_oss_120b", base_url=server.url), max_retries=5)
    long_body = "context length exceeded " + "x" * 3000
    server.script.append(Reply(status=status, body=long_body))

    with pytest.raises(ExecutionHTTPError) as caught:
        call(backend)

    assert len(server.seen) == 1
    assert caught.value.status == status
    assert f"HTTP {status}" in str(caught.value)
    assert "context length exceeded" in str(caught.value)
    assert len(caught.value.body) == 500


def test_openrouter_retries_a_200_with_an_error_object_then_succeeds(server, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-error-body")
    backend = fast(backend_from_name("openrouter_glm_5_2", base_url=server.url))
    upstream_failed = {"error": {"message": "Provider returned error", "code": 502}}
    server.script.extend([Reply(body=upstream_failed), Reply(body=upstream_failed)])

    result = call(backend)

    assert result.attempts == 3
    assert result.text == "<solution>x</solution>"
    assert len(server.seen) == 3
    for gap, expected in zip(server.gaps(), [0.05, 0.1], strict=True):
        assert expected <= gap < expected + 0.5


def test_openrouter_retries_a_200_with_a_non_json_body_then_succeeds(server, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-non-json")
    backend = fast(backend_from_name("openrouter_glm_5_2", base_url=server.url))
    server.script.append(Reply(body="<html>upstream gateway timed out</html>"))

    result = call(backend)

    assert result.attempts == 2
    assert len(server.seen) == 2


def test_openrouter_gives_up_on_error_bodies_after_six_retries(server, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-give-up")
    backend = fast(backend_from_name("openrouter_glm_5_2", base_url=server.url), retry_backoff_s=0)
    server.script.extend([Reply(body={"error": {"message": "overloaded"}})] * 7)

    with pytest.raises(ExecutionResponseError, match=r"error in the body.*attempt 7.*overloaded"):
        call(backend)
    assert len(server.seen) == 7


@pytest.mark.parametrize(
    "body", [{"error": {"message": "Provider returned error"}}, "not json at all"]
)
def test_local_backend_fails_a_200_error_body_at_once(server, body):
    backend = backend_from_name("gpt_oss_120b", base_url=server.url)
    server.script.append(Reply(body=body))

    with pytest.raises(ExecutionResponseError, match="attempt 1"):
        call(backend)
    assert len(server.seen) == 1


def test_numeric_retry_after_replaces_the_backoff(server):
    backend = fast(
        backend_from_name("gpt_oss_120b", base_url=server.url), max_retries=1, retry_backoff_s=0.01
    )
    server.script.append(Reply(status=429, headers={"Retry-After": "1"}))

    call(backend)

    (gap,) = server.gaps()
    assert 1.0 <= gap < 1.8


@pytest.mark.parametrize(
    ("header", "slept"),
    [("7200", 30.0), ("12.5", 12.5), ("inf", 0.25), ("1e400", 0.25), ("-5", 0.25), ("nan", 0.25)],
    ids=["hours-capped", "honoured", "inf", "overflows-to-inf", "negative", "nan"],
)
def test_retry_after_is_honoured_up_to_the_timeout_and_otherwise_is_the_backoff(
    server, header, slept
):
    """Differences row 38. The reference (its harness/execution.py `_backoff`) sleeps
    `max(0, float(header))`: hours as given, a negative value or NaN as 0, and `inf` raises
    OverflowError out of `time.sleep`, which ends the rollout as its execution_error. Ours
    honours a finite value ≥ 0 up to the backend's `timeout_s` and takes the backoff for the
    rest."""
    backend = replace(
        backend_from_name("gpt_oss_120b", base_url=server.url),
        max_retries=1,
        retry_backoff_s=0.25,
        timeout_s=30.0,
    )
    server.script.append(Reply(status=503, headers={"Retry-After": header}))
    waits: list[float] = []
    with ExecutionClient(backend, sleep=waits.append) as client:
        result = client.complete(MESSAGES)
    assert waits == [slept] and result.attempts == 2


def test_http_date_retry_after_falls_back_to_backoff(server):
    backend = fast(backend_from_name("gpt_oss_120b", base_url=server.url), max_retries=1)
    server.script.append(
        Reply(status=503, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})
    )

    call(backend)

    (gap,) = server.gaps()
    assert 0.05 <= gap < 0.6


def test_dropped_connection_is_retried_as_a_transport_fault(server):
    backend = fast(backend_from_name("gpt_oss_120b", base_url=server.url), max_retries=1)
    server.script.append(Reply(drop=True))

    result = call(backend)

    assert result.attempts == 2


def test_read_timeout_is_retried_as_a_transport_fault(server):
    backend = fast(
        backend_from_name("gpt_oss_120b", base_url=server.url, timeout_s=1.0), max_retries=1
    )
    server.script.append(Reply(delay_s=2.5))

    result = call(backend)

    assert result.attempts == 2


def test_refused_connection_fails_after_retries_as_transport_error():
    with socket.socket() as probe:  # a port that was free a moment ago and has no listener
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    backend = fast(
        backend_from_name("gpt_oss_120b", base_url=f"http://127.0.0.1:{port}/v1"), max_retries=2
    )

    started = time.monotonic()
    with pytest.raises(ExecutionTransportError, match="attempt 3"):
        call(backend)
    assert time.monotonic() - started >= 0.05 + 0.1


# ---------------------------------------------------------------------------- responses


def test_empty_content_is_an_error(server):
    backend = backend_from_name("gpt_oss_120b", base_url=server.url)
    server.script.append(Reply(body=completion("", reasoning_content="ran out of tokens")))

    with pytest.raises(ExecutionResponseError, match="empty content"):
        call(backend)


def test_missing_choices_is_an_error_naming_the_body(server):
    backend = backend_from_name("gpt_oss_120b", base_url=server.url)
    server.script.append(Reply(body={"object": "error", "message": "model not loaded"}))

    with pytest.raises(ExecutionResponseError, match="model not loaded"):
        call(backend)


def test_choice_text_and_reasoning_field_are_fallbacks(server):
    backend = backend_from_name("gpt_oss_120b", base_url=server.url)
    body = {
        "choices": [
            {
                "message": {"content": None, "reasoning_content": "", "reasoning": "why"},
                "text": "legacy text",
                "finish_reason": "length",
            }
        ]
    }
    server.script.append(Reply(body=body))

    result = call(backend)

    assert (result.text, result.reasoning, result.finish_reason) == ("legacy text", "why", "length")
    assert result.usage is None


def test_whitespace_only_content_is_an_error_as_in_the_reference(server):
    backend = backend_from_name("gpt_oss_120b", base_url=server.url)
    server.script.append(Reply(body=completion(" \n\t ")))

    with pytest.raises(ExecutionResponseError, match="empty content"):
        call(backend)


def test_reasoning_on_the_choice_is_the_last_fallback(server):
    backend = backend_from_name("gpt_oss_120b", base_url=server.url)
    body = {"choices": [{"message": {"content": "answer"}, "reasoning_content": "on choice"}]}
    server.script.append(Reply(body=body))
    assert call(backend).reasoning == "on choice"
    server.script.append(Reply(body={"choices": [{"text": "t", "reasoning": "plain"}]}))
    assert call(backend).reasoning == "plain"


@pytest.mark.parametrize(
    "body",
    [[1, 2], '"a JSON string"', {"error": "upstream overloaded", "choices": []}],
    ids=["json-list", "json-string", "string-error"],
)
def test_a_200_that_is_not_an_answer_object_is_retried_as_in_the_reference(server, body):
    backend = fast(backend_from_name("gpt_oss_120b", base_url=server.url), max_retries=1)
    server.script.extend([Reply(body=body), Reply(body=completion("answer"))])

    result = call(backend)

    assert (result.text, result.attempts) == ("answer", 2)


# -------------------------------------------------------------------------- concurrency


def test_concurrency_bound_limits_in_flight_requests_across_clients(server):
    backend = backend_from_name("gpt_oss_120b", base_url=server.url, concurrency=2)
    # The first two calls are held until both are in flight; a third call, if the bound let one
    # through, would arrive during those holds or the 0.2 s each later call is held.
    server.script.extend([Reply(delay_s=0.2, await_in_flight=2) for _ in range(2)])
    server.script.extend([Reply(delay_s=0.2) for _ in range(4)])
    clients = [ExecutionClient(backend), ExecutionClient(backend)]  # equal backends share a bound

    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda i: clients[i % 2].complete(MESSAGES), range(6)))
    for client in clients:
        client.close()

    assert len(results) == 6
    assert server.max_in_flight == 2


# ------------------------------------------------------------------------ backend records


def test_unknown_backend_and_effort_are_refused_with_the_choices():
    with pytest.raises(ValueError, match=r"'gpt4'.*gpt_oss_120b.*openrouter_glm_5_2"):
        backend_from_name("gpt4")
    with pytest.raises(ValueError, match=r"'extreme'.*'low', 'medium', 'high'"):
        backend_from_name("gpt_oss_120b", reasoning_effort="extreme")
    with pytest.raises(ValueError, match="'low'"):
        backend_from_name("openrouter_glm_5_2", reasoning_effort="low")
    with pytest.raises(ValueError, match="OPENROUTER_API_KEY only"):
        backend_from_name("openrouter_glm_5_2", api_key_env="OTHER_KEY")


def test_builtin_backends_match_the_spec_table():
    oss = backend_from_name("gpt_oss_120b")
    glm = backend_from_name("openrouter_glm_5_2")
    assert oss.safe_dict() == {
        "name": "gpt_oss_120b",
        "model": "openai/gpt-oss-120b",
        "base_url": "http://127.0.0.1:8000/v1",
        "api_key_env": None,
        "temperature": 0.0,
        "max_tokens": None,
        "timeout_s": 1200.0,
        "concurrency": 8,  # the reference's executor limit
        "max_retries": 0,
        "retry_backoff_s": 2.0,
        "request_options": {"reasoning_effort": "high"},
    }
    assert oss.dialect == "sglang" and oss.drop == ()  # the body as built: the reference's
    assert glm.dialect == "openrouter"
    assert (glm.model, glm.base_url, glm.temperature, glm.max_retries, glm.concurrency) == (
        "z-ai/glm-5.2",
        "https://openrouter.ai/api/v1",
        1.0,
        6,
        8,
    )
    assert glm.api_key_env == "OPENROUTER_API_KEY"
    assert glm.safe_dict()["request_options"] == {"reasoning": {"effort": "high", "exclude": False}}


def test_backend_is_frozen_and_round_trips_through_safe_dict():
    backend = backend_from_name("openrouter_glm_5_2", concurrency=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        backend.model = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        backend.request_options["reasoning"] = {}  # type: ignore[index]

    restored = ExecutionBackend.from_safe_dict(json.loads(json.dumps(backend.safe_dict())))

    assert restored == backend
    with pytest.raises(ValueError, match="unknown executor backend keys"):
        ExecutionBackend.from_safe_dict({**backend.safe_dict(), "api_key": "x"})


def test_backend_refuses_secrets_and_body_fields_in_request_options():
    base = backend_from_name("gpt_oss_120b")
    with pytest.raises(ValueError, match="api_key"):
        replace(base, request_options={"api_key": "sk-123"})
    with pytest.raises(ValueError, match="temperature"):
        replace(base, request_options={"temperature": 0.5})
    with pytest.raises(ValueError, match="name"):
        replace(base, api_key_env="sk-or-v1-abc-def")


# --------------------------------------------------------------------------- secret scan


def echo_auth(headers: dict[str, str]) -> str:
    """A careless service that echoes the request's Authorization header in its error body."""
    return json.dumps({"error": "rejected", "echo": headers.get("authorization", "")})


def test_openrouter_key_never_reaches_logs_errors_safe_dict_or_state_files(
    server, monkeypatch, caplog, tmp_path
):
    key = "sk-or-v1-" + secrets.token_hex(24)
    monkeypatch.setenv("OPENROUTER_API_KEY", key)
    caplog.set_level(logging.DEBUG)  # every logger, httpx and httpcore included
    backend = fast(backend_from_name("openrouter_glm_5_2", base_url=server.url), max_retries=2)
    echo_200 = {"no_choices": True, "leak": key}
    scenarios: list[list[Reply]] = [
        [Reply(status=503, body=echo_auth), Reply()],  # retried, then fine
        [Reply(status=400, body=echo_auth)],  # immediate failure with the echoing body
        [Reply(status=502, body=echo_auth)] * 3,  # retries exhausted
        [Reply(body=echo_200)],  # 200 without choices, echoing the key
        [Reply(body=completion(""))],  # empty content
        [Reply(drop=True)] * 3,  # transport faults
    ]
    state = tmp_path / "state"
    state.mkdir()
    persisted: list[dict[str, Any]] = []
    failures: list[BaseException] = []
    with ExecutionClient(backend) as client:
        for replies in scenarios:
            server.script.extend(replies)
            record: dict[str, Any] = {"execution_backend": backend.safe_dict()}
            try:
                result = client.complete(MESSAGES)
                record["execution_response_metadata"] = result.response_metadata()
                record["execution_response_usage"] = result.usage
                record["execution_text"] = result.text
            except ExecutionError as exc:
                failures.append(exc)
                record["execution_error"] = f"{type(exc).__name__}: {exc}"
            persisted.append(record)
        client_repr = repr(client)
    (state / "entries.jsonl").write_text("\n".join(json.dumps(r) for r in persisted))
    (state / "resume-state.json").write_text(json.dumps({"executor_backend": backend.safe_dict()}))

    # The test would prove nothing if the key never travelled: the server saw it and echoed it.
    assert all(s.headers.get("authorization") == f"Bearer {key}" for s in server.seen)
    assert len(failures) == 5
    texts = [repr(backend), client_repr, json.dumps(backend.safe_dict())]
    for exc in failures:
        texts += [str(exc), repr(exc), "".join(traceback.format_exception(exc))]
        texts += [getattr(exc, "body", "")]
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    texts += [formatter.format(record) for record in caplog.records]
    assert caplog.records, "expected retry warnings in the captured log"
    leaks = [text for text in texts if key in text]
    assert leaks == []
    for path in state.rglob("*"):
        assert key.encode() not in path.read_bytes(), path


def test_key_is_read_at_call_time_not_at_construction(server, monkeypatch):
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    client = ExecutionClient(backend_from_name("openrouter_glm_5_2", base_url=server.url))
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-late")

    client.complete(MESSAGES)
    client.close()

    assert server.seen[0].headers["authorization"] == "Bearer sk-or-late"
