"""A small scripted OpenAI-compatible HTTP server on 127.0.0.1 with an ephemeral port.

It answers ``POST /v1/chat/completions`` (buffered JSON, or SSE when the request sets
``"stream": true``), ``POST /v1/completions`` and ``GET /v1/models``, records every request it
receives, and replies with queued or default :class:`Reply` values, so a caller can script
content, reasoning, HTTP errors and latency. It is a stand-in for any frozen model service (an
executor backend, or Reef's upstream guidance model); it does not generate anything. The test
suite and ``guidance-ttt rehearse`` both use it (the tests import it as ``tests.openai_fixture``).

    with OpenAIFixture(reply="<guidance>try a spiral</guidance>") as server:
        server.queue(Reply(status=503), Reply(content="second try"))
        client_base_url = server.v1_url      # http://127.0.0.1:PORT/v1
        ...
        assert server.requests[0].body["model"] == "..."

``mode`` says which service's request definition it holds chat requests to
(`harness.rehearsal.request_checks`): ``lenient`` (any JSON body), ``strict`` (OpenAI's API: the
installed ``openai`` package's request types; an unknown top-level field is ``400
Unrecognized request argument supplied: <field>``), ``sglang`` (SGLang's server: unknown fields
ignored, declared ones type-checked) or ``openrouter`` (OpenRouter's documented parameters). A
refused request is recorded (``refused`` holds the message) and answered 400 with OpenAI's error
object; it takes no scripted reply.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from harness.rehearsal.loopback_server import LoopbackServer
from harness.rehearsal.request_checks import CHECKS, MODES, warm_up


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    ``status`` other than 200 sends ``{"error": {"message": error}}`` (with ``Retry-After`` when
    ``retry_after`` is set). ``delay_s`` sleeps before answering. ``body`` replaces the whole
    JSON answer of a buffered request when given.
    """

    content: str = "ok"
    reasoning: str | None = None
    finish_reason: str = "stop"
    status: int = 200
    error: str = "scripted failure"
    retry_after: float | None = None
    delay_s: float = 0.0
    usage: Mapping[str, int] = field(
        default_factory=lambda: {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    )
    body: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class RecordedRequest:
    """A request the fixture received: method, path, headers (lower-cased names) and JSON body."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any


ReplySource = str | Reply | Callable[[RecordedRequest], Reply | str]


class OpenAIFixture(LoopbackServer):
    """The server, as a context manager (``start``/``stop`` also work).

    ``reply`` is the default answer: a string (the content), a :class:`Reply`, or a callable
    that builds one from the request. Replies added with :meth:`queue` are used first, in order.
    ``model`` is what ``/v1/models`` lists and what answers name when the request names none.
    """

    def __init__(
        self, reply: ReplySource = "ok", *, model: str = "fixture-model", mode: str = "lenient"
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"OpenAIFixture mode {mode!r}; choose one of {', '.join(MODES)}")
        self.model = model
        self.mode = mode
        #: The messages of the requests this fixture refused, in arrival order.
        self.refused: list[str] = []
        self._default = reply
        self._queued: deque[Reply | str] = deque()
        self._lock = threading.Lock()
        self.requests: list[RecordedRequest] = []

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> OpenAIFixture:
        """Bind 127.0.0.1 on a free port and serve on a daemon thread."""
        if self._server is not None:
            return self
        if self.mode != "lenient":
            warm_up(self.mode)  # build the validators now, not inside the first request
        fixture = self

        class Handler(_Handler):
            owner = fixture

        self._serve(_Server(("127.0.0.1", 0), Handler), "openai-fixture")
        return self

    # ------------------------------------------------------------------ addresses

    @property
    def port(self) -> int:
        """The bound port (the server must be running)."""
        if self._server is None:
            raise RuntimeError("the OpenAI fixture is not running")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` without ``/v1`` (what Reef's upstream setting takes)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def v1_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` (what an OpenAI client's base URL takes)."""
        return self.base_url + "/v1"

    # ------------------------------------------------------------------ scripting

    def queue(self, *replies: Reply | str) -> None:
        """Answer the next requests with ``replies``, in order, before the default."""
        with self._lock:
            self._queued.extend(replies)

    def completion_requests(self) -> list[RecordedRequest]:
        """The recorded POSTs to a completions route, in arrival order."""
        with self._lock:
            return [request for request in self.requests if request.method == "POST"]

    def _next_reply(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            chosen: ReplySource = self._queued.popleft() if self._queued else self._default
        if callable(chosen) and not isinstance(chosen, Reply):
            chosen = chosen(request)
        return chosen if isinstance(chosen, Reply) else Reply(content=str(chosen))


class _Server(ThreadingHTTPServer):
    # socketserver's default listen backlog is 5: on a loaded host a burst of concurrent clients
    # (a step's rollouts) overflows it and a connection is dropped before any answer.
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that went away (a run stopped by Ctrl-C resets its keep-alive connections)
        # is the client's business, not a fault of this server: no traceback on stderr.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    owner: OpenAIFixture
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        return

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._json(
                200, {"object": "list", "data": [{"id": self.owner.model, "object": "model"}]}
            )
        elif self.path.rstrip("/") in ("/health", "/healthz"):
            self._json(200, {"ok": True})
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            self._json(400, {"error": {"message": "body is not JSON"}})
            return
        request = RecordedRequest(
            "POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body
        )
        route = self.path.split("?")[0].rstrip("/")
        if route not in ("/v1/chat/completions", "/v1/completions"):
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        check = CHECKS.get(self.owner.mode)
        refusal = check(body) if check is not None and route == "/v1/chat/completions" else None
        if refusal is not None:
            with self.owner._lock:
                self.owner.requests.append(request)
                self.owner.refused.append(refusal)
            error = {"message": refusal, "type": "invalid_request_error", "param": None}
            self._json(400, {"error": {**error, "code": None}})
            return
        reply = self.owner._next_reply(request)
        if reply.delay_s > 0:
            time.sleep(reply.delay_s)
        if reply.status != 200:
            headers = {} if reply.retry_after is None else {"Retry-After": str(reply.retry_after)}
            self._json(reply.status, {"error": {"message": reply.error}}, headers)
            return
        model = body.get("model") if isinstance(body, dict) else None
        model = model if isinstance(model, str) and model else self.owner.model
        chat = route == "/v1/chat/completions"
        if isinstance(body, dict) and body.get("stream"):
            self._stream(reply, model, chat)
        else:
            self._json(
                200, dict(reply.body) if reply.body is not None else _answer(reply, model, chat)
            )

    def _json(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, reply: Reply, model: str, chat: bool) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()
        for chunk in _chunks(reply, model, chat):
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


def _answer(reply: Reply, model: str, chat: bool) -> dict[str, Any]:
    if chat:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.reasoning is not None:
            message["reasoning_content"] = reply.reasoning
        choice: dict[str, Any] = {
            "index": 0,
            "message": message,
            "finish_reason": reply.finish_reason,
        }
    else:
        choice = {"index": 0, "text": reply.content, "finish_reason": reply.finish_reason}
    return {
        "id": f"fixture-{time.monotonic_ns()}",
        "object": "chat.completion" if chat else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": dict(reply.usage),
    }


def _chunks(reply: Reply, model: str, chat: bool) -> Iterator[dict[str, Any]]:
    base = {
        "id": f"fixture-{time.monotonic_ns()}",
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": int(time.time()),
        "model": model,
    }
    if chat:
        yield {
            **base,
            "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}],
        }
        if reply.reasoning is not None:
            delta = {"reasoning_content": reply.reasoning}
            yield {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        delta = {"content": reply.content}
        yield {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        yield {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": reply.finish_reason}]}
    else:
        yield {**base, "choices": [{"index": 0, "text": reply.content, "finish_reason": None}]}
        yield {**base, "choices": [{"index": 0, "text": "", "finish_reason": reply.finish_reason}]}
    yield {**base, "choices": [], "usage": dict(reply.usage)}
