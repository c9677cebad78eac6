"""Executor backends and the OpenAI-compatible client that calls them (SPEC §4).

An `ExecutionBackend` is a frozen description of one frozen executor service: it names the
environment variable that holds the API key, never the key itself, so `safe_dict()` can be written
into entries, resume state and logs. `ExecutionClient` turns one chat request into one
`ExecutionResult`, retrying only faults that are worth retrying and bounding concurrent calls.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any

import httpx

log = logging.getLogger(__name__)

#: HTTP statuses that mean "try again later" (SPEC §4); every other status fails at once.
RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
#: How much of an error body an exception carries.
ERROR_BODY_LIMIT = 500
GPT_OSS_EFFORTS = ("low", "medium", "high")
_RESERVED_BODY_KEYS = frozenset({"model", "messages", "temperature", "max_tokens"})
_SECRET_LIKE_KEYS = frozenset({"api_key", "authorization", "headers", "extra_headers"})


def _freeze(value: Any) -> Any:
    """A read-only deep copy of JSON-like data: mappings become proxies, lists become tuples."""
    if isinstance(value, Mapping):
        return MappingProxyType({str(k): _freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    """The plain JSON-serialisable form of data frozen by `_freeze`."""
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


@dataclass(frozen=True)
class ExecutionBackend:
    """One executor service. It holds the *name* of the key's environment variable
    (`api_key_env`, None when the service needs no key) and never a secret, so `safe_dict()` is
    safe to persist anywhere. `request_options` are merged into every request body."""

    name: str
    model: str
    base_url: str
    api_key_env: str | None
    temperature: float
    max_tokens: int | None = None
    timeout_s: float = 1200.0
    concurrency: int = 32
    max_retries: int = 0
    retry_backoff_s: float = 2.0
    request_options: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if not self.name or not self.model:
            raise ValueError(f"executor backend needs a name and a model, got {self!r}")
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(
                f"executor {self.name}: base_url {self.base_url!r} must start with http(s)://"
            )
        if self.api_key_env is not None and not self.api_key_env.isidentifier():
            raise ValueError(
                f"executor {self.name}: api_key_env {self.api_key_env!r} must be the *name* "
                "of an environment variable, not a key"
            )
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise ValueError(f"executor {self.name}: temperature {self.temperature!r} invalid")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"executor {self.name}: max_tokens {self.max_tokens!r} must be ≥ 1")
        if not self.timeout_s > 0:
            raise ValueError(f"executor {self.name}: timeout_s {self.timeout_s!r} must be > 0")
        if self.concurrency < 1:
            raise ValueError(f"executor {self.name}: concurrency {self.concurrency!r} must be ≥ 1")
        if self.max_retries < 0 or not self.retry_backoff_s >= 0:
            raise ValueError(
                f"executor {self.name}: max_retries {self.max_retries!r} and retry_backoff_s "
                f"{self.retry_backoff_s!r} must be ≥ 0"
            )
        bad = sorted(set(self.request_options) & (_RESERVED_BODY_KEYS | _SECRET_LIKE_KEYS))
        if bad:
            raise ValueError(
                f"executor {self.name}: request_options may not set {bad}; model, messages, "
                "temperature and max_tokens are fields, and keys come from api_key_env"
            )
        json.dumps(_thaw(self.request_options))  # must be JSON: it goes into every body
        object.__setattr__(self, "request_options", _freeze(self.request_options))

    def safe_dict(self) -> dict[str, Any]:
        """The only persisted form: every field as plain JSON data. It contains the key's
        environment variable name, never its value."""
        return {f.name: _thaw(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_safe_dict(cls, data: Mapping[str, Any]) -> ExecutionBackend:
        """Rebuild a backend from `safe_dict()` output (e.g. a resume state). Unknown or missing
        keys are an error naming them."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown executor backend keys {unknown}; expected {sorted(names)}")
        try:
            return cls(**dict(data))
        except TypeError as exc:
            raise ValueError(f"incomplete executor backend {dict(data)!r}: {exc}") from None


def _gpt_oss_120b(reasoning_effort: str) -> ExecutionBackend:
    if reasoning_effort not in GPT_OSS_EFFORTS:
        raise ValueError(
            f"unknown reasoning effort {reasoning_effort!r} for gpt_oss_120b; "
            f"choose one of {list(GPT_OSS_EFFORTS)}"
        )
    return ExecutionBackend(
        name="gpt_oss_120b",
        model="openai/gpt-oss-120b",
        base_url="http://127.0.0.1:8000/v1",
        api_key_env=None,
        temperature=0.0,
        concurrency=64,
        max_retries=0,
        request_options={"reasoning_effort": reasoning_effort},
    )


def _openrouter_glm_5_2(reasoning_effort: str) -> ExecutionBackend:
    if reasoning_effort != "high":
        raise ValueError(
            f"openrouter_glm_5_2 always reasons at effort 'high', got {reasoning_effort!r}; "
            "reasoning effort is a gpt_oss_120b setting"
        )
    return ExecutionBackend(
        name="openrouter_glm_5_2",
        model="z-ai/glm-5.2",
        base_url="https://openrouter.ai/api/v1",
        api_key_env="OPENROUTER_API_KEY",
        temperature=1.0,
        concurrency=32,
        max_retries=6,
        request_options={"reasoning": {"effort": "high", "exclude": False}},
    )


BUILTIN_BACKENDS: Mapping[str, Callable[[str], ExecutionBackend]] = MappingProxyType(
    {"gpt_oss_120b": _gpt_oss_120b, "openrouter_glm_5_2": _openrouter_glm_5_2}
)


def backend_from_name(
    name: str,
    *,
    reasoning_effort: str | None = None,
    base_url: str | None = None,
    concurrency: int | None = None,
    max_tokens: int | None = None,
    timeout_s: float | None = None,
    api_key_env: str | None = None,
) -> ExecutionBackend:
    """Build a built-in backend by name, with the deployment settings a run may change.
    `reasoning_effort` (default "high") selects GPT-OSS's effort; GLM-5.2 accepts only "high".
    The OpenRouter key always comes from OPENROUTER_API_KEY; `api_key_env` is for a local
    server started with a key. Unknown names or efforts raise ValueError naming the choices."""
    make = BUILTIN_BACKENDS.get(name)
    if make is None:
        raise ValueError(
            f"unknown executor backend {name!r}; choose one of {list(BUILTIN_BACKENDS)}"
        )
    backend = make(reasoning_effort or "high")
    if api_key_env is not None and backend.api_key_env == "OPENROUTER_API_KEY":
        raise ValueError(f"{name} reads its key from OPENROUTER_API_KEY only, not {api_key_env!r}")
    overrides = {
        "base_url": base_url.rstrip("/") if base_url else None,
        "concurrency": concurrency,
        "max_tokens": max_tokens,
        "timeout_s": timeout_s,
        "api_key_env": api_key_env,
    }
    return replace(backend, **{k: v for k, v in overrides.items() if v is not None})


# --------------------------------------------------------------------------- requests and answers


def build_request_body(
    backend: ExecutionBackend, messages: Sequence[Mapping[str, str]], *, max_tokens: int | None
) -> dict[str, Any]:
    """The JSON body of one chat completion: model, messages, temperature, `max_tokens` only when
    set, then the backend's request options. Messages must be {role, content} string pairs."""
    for i, message in enumerate(messages):
        if set(message) != {"role", "content"} or not all(
            isinstance(v, str) for v in message.values()
        ):
            raise ValueError(f"message {i} must be {{role: str, content: str}}, got {message!r}")
    if not messages:
        raise ValueError("an executor call needs at least one message")
    body: dict[str, Any] = {
        "model": backend.model,
        "messages": [dict(m) for m in messages],
        "temperature": backend.temperature,
    }
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    body.update(_thaw(backend.request_options))
    return body


class ExecutionError(RuntimeError):
    """Base of every executor failure; the rollout loop records `"<Type>: <message>"`."""


class MissingAPIKeyError(ExecutionError):
    """The backend needs a key and its environment variable is unset or empty."""


class ExecutionHTTPError(ExecutionError):
    """The service answered with a non-success status (after retries, when it was retryable)."""

    def __init__(self, message: str, *, status: int, body: str) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class ExecutionTransportError(ExecutionError):
    """The request never got an HTTP answer (connection refused, reset, timeout)."""


class ExecutionResponseError(ExecutionError):
    """The service answered 200 with something that is not a usable completion."""


@dataclass(frozen=True)
class ExecutionResult:
    """One completion. `reasoning` is "" when the service returned none; `attempts` counts HTTP
    attempts; `elapsed_s` runs from the first attempt to the answer, retries included."""

    text: str
    reasoning: str
    finish_reason: str | None
    usage: dict[str, Any] | None
    attempts: int
    elapsed_s: float

    def response_metadata(self) -> dict[str, Any]:
        """What the entry keeps as `execution_response_metadata` (SPEC §6)."""
        return {
            "finish_reason": self.finish_reason,
            "attempts": self.attempts,
            "elapsed_s": self.elapsed_s,
        }


def _first_choice(payload: Any) -> Mapping[str, Any]:
    choices = payload.get("choices") if isinstance(payload, Mapping) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise ExecutionResponseError(f"response has no choices: {str(payload)[:ERROR_BODY_LIMIT]}")
    return choices[0]


def parse_completion(payload: Any) -> tuple[str, str, str | None, dict[str, Any] | None]:
    """Read (text, reasoning, finish_reason, usage) from a chat completion body. Text is
    `message.content`, else `choice.text`, and must be non-empty; reasoning is the first non-empty
    of `message.reasoning_content` and `message.reasoning`."""
    choice = _first_choice(payload)
    message = choice.get("message") if isinstance(choice.get("message"), Mapping) else {}
    text = message.get("content") or choice.get("text")
    if not isinstance(text, str) or not text:
        raise ExecutionResponseError(
            f"executor returned empty content (finish_reason={choice.get('finish_reason')!r})"
        )
    reasoning = next(
        (
            value
            for value in (message.get("reasoning_content"), message.get("reasoning"))
            if isinstance(value, str) and value
        ),
        "",
    )
    finish_reason = choice.get("finish_reason")
    usage = payload.get("usage")
    return (
        text,
        reasoning,
        finish_reason if isinstance(finish_reason, str) else None,
        dict(usage) if isinstance(usage, Mapping) else None,
    )


def _retry_after_s(response: httpx.Response) -> float | None:
    """A numeric `Retry-After` in seconds; an HTTP-date or garbage falls back to backoff."""
    raw = response.headers.get("retry-after")
    try:
        seconds = float(raw) if raw is not None else math.nan
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


# ---------------------------------------------------------------------------------------- client

_SEMAPHORES: dict[ExecutionBackend, threading.BoundedSemaphore] = {}
_SEMAPHORES_LOCK = threading.Lock()


def _backend_slots(backend: ExecutionBackend) -> threading.BoundedSemaphore:
    """The one semaphore shared by every client of an equal backend in this process."""
    with _SEMAPHORES_LOCK:
        return _SEMAPHORES.setdefault(backend, threading.BoundedSemaphore(backend.concurrency))


def _redact(text: str, secret: str | None) -> str:
    """Text from the wire with the key removed: a service may echo request headers back."""
    return text.replace(secret, "[redacted]") if secret else text


class ExecutionClient:
    """Calls one backend's `/chat/completions`; safe to share between the threads of the rollout
    pool. At most `backend.concurrency` calls are in flight per backend (a semaphore held for the
    whole call, retry waits included, so a throttled service sees back-pressure). The API key is
    read from the environment at each call and kept out of every message this client produces."""

    def __init__(
        self, backend: ExecutionBackend, *, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self.backend = backend
        self._sleep = sleep
        self._slots = _backend_slots(backend)
        self._http = httpx.Client(
            timeout=backend.timeout_s,
            limits=httpx.Limits(
                max_connections=backend.concurrency,
                max_keepalive_connections=backend.concurrency,
            ),
        )

    def __repr__(self) -> str:
        return f"ExecutionClient(backend={self.backend.name!r}, base_url={self.backend.base_url!r})"

    def __enter__(self) -> ExecutionClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the connection pool."""
        self._http.close()

    def complete(
        self, messages: Sequence[Mapping[str, str]], *, max_tokens: int | None = None
    ) -> ExecutionResult:
        """One chat completion with the backend's retry policy. `max_tokens` overrides the
        backend's limit for this call. Raises an `ExecutionError` subclass on a missing key, an
        HTTP failure, a transport failure after retries, or an unusable (e.g. empty) answer."""
        limit = max_tokens if max_tokens is not None else self.backend.max_tokens
        body = build_request_body(self.backend, messages, max_tokens=limit)
        key = self._api_key()
        with self._slots:
            started = time.monotonic()
            payload, attempts = self._send(body, key, self.backend.max_retries)
            elapsed = time.monotonic() - started
        try:
            text, reasoning, finish_reason, usage = parse_completion(payload)
        except ExecutionResponseError as exc:
            raise ExecutionResponseError(
                f"executor {self.backend.name}: {_redact(str(exc), key)}"
            ) from None
        log.debug(
            "executor %s answered: %d chars, finish_reason=%s, attempts=%d, %.2fs",
            self.backend.name,
            len(text),
            finish_reason,
            attempts,
            elapsed,
        )
        return ExecutionResult(text, reasoning, finish_reason, usage, attempts, elapsed)

    def probe(self) -> str:
        """A one-token request without retries, to show the service answers (used by the
        preflight). Any 2xx completion with a choice counts, even with empty content; returns a
        short description, raises an `ExecutionError` otherwise."""
        body = build_request_body(
            self.backend, [{"role": "user", "content": "Reply with OK."}], max_tokens=1
        )
        key = self._api_key()
        with self._slots:
            payload, _ = self._send(body, key, max_retries=0)
        try:
            choice = _first_choice(payload)
        except ExecutionResponseError as exc:
            raise ExecutionResponseError(_redact(str(exc), key)) from None
        return f"{self.backend.model} answered (finish_reason={choice.get('finish_reason')!r})"

    def _api_key(self) -> str | None:
        env = self.backend.api_key_env
        if env is None:
            return None
        key = os.environ.get(env, "").strip()
        if not key:
            raise MissingAPIKeyError(
                f"executor {self.backend.name} needs an API key: set the environment variable {env}"
            )
        return key

    def _send(self, body: dict[str, Any], key: str | None, max_retries: int) -> tuple[Any, int]:
        """POST until a 2xx answer, a non-retryable status, or retries run out; returns the
        parsed JSON body and the number of attempts."""
        name = self.backend.name
        url = f"{self.backend.base_url}/chat/completions"
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        attempt = 0
        while True:
            attempt += 1
            wait = self.backend.retry_backoff_s * 2 ** (attempt - 1)
            try:
                response = self._http.post(url, json=body, headers=headers)
            except httpx.TransportError as exc:
                failure: ExecutionError = ExecutionTransportError(
                    f"executor {name}: {type(exc).__name__} calling {url} "
                    f"(attempt {attempt}): {_redact(str(exc), key)}"
                )
            else:
                if response.is_success:
                    try:
                        return response.json(), attempt
                    except ValueError:
                        raise ExecutionResponseError(
                            f"executor {name}: HTTP {response.status_code} with a non-JSON body: "
                            f"{_redact(response.text[:ERROR_BODY_LIMIT], key)}"
                        ) from None
                text = _redact(response.text[:ERROR_BODY_LIMIT], key)
                failure = ExecutionHTTPError(
                    f"executor {name} returned HTTP {response.status_code} "
                    f"(attempt {attempt}): {text}",
                    status=response.status_code,
                    body=text,
                )
                if response.status_code not in RETRYABLE_STATUSES:
                    raise failure
                retry_after = _retry_after_s(response)
                if retry_after is not None:
                    wait = min(retry_after, self.backend.timeout_s)
            if attempt > max_retries:
                raise failure
            log.warning(
                "executor %s: attempt %d of %d failed (%s); retrying in %.2fs",
                name,
                attempt,
                max_retries + 1,
                failure,
                wait,
            )
            self._sleep(wait)
