"""The OpenAI-compatible client that calls an executor backend (docs/design.md §4).

`ExecutionClient` turns one chat request to an `ExecutionBackend`
(`harness.adapters.executor.backends`) into one
`ExecutionResult`, retrying only faults that are worth retrying and bounding concurrent calls.
A failed call raises an `ExecutionError` subclass; no message it produces contains the API key.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from harness.adapters.executor.backends import ExecutionBackend, build_request_body
from harness.model_text import valid_text

__all__ = [
    "ACCESS_STATUSES",
    "ERROR_BODY_LIMIT",
    "LOCAL_BEARER",
    "RETRYABLE_STATUSES",
    "ExecutionClient",
    "ExecutionError",
    "ExecutionHTTPError",
    "ExecutionResponseError",
    "ExecutionResult",
    "ExecutionTransportError",
    "ExecutorAccessError",
    "MissingAPIKeyError",
    "parse_completion",
    "require_api_key",
]

log = logging.getLogger(__name__)

#: HTTP statuses that mean "try again later"; every other status fails at once, except a 200
#: that carries an error object or a non-JSON body, which is transient too (docs/executors.md).
RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
#: The bearer value a backend without a key sends (the reference's).
LOCAL_BEARER = "local-executor"
#: How much of an error body an exception carries.
ERROR_BODY_LIMIT = 500


# --------------------------------------------------------------------------- requests and answers


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


class ExecutorAccessError(ExecutionHTTPError):
    """401, 402 or 403: the key is wrong or revoked, or the account is out of credit. Every
    later call would fail the same way, so the run stops instead of scoring reward 0."""


#: Statuses that mean the executor refuses this key or account (`ExecutorAccessError`).
ACCESS_STATUSES = frozenset({401, 402, 403})


class ExecutionTransportError(ExecutionError):
    """The request never got an HTTP answer (connection refused, reset, timeout)."""


class ExecutionResponseError(ExecutionError):
    """The service answered 200 with something that is not a usable completion."""


@dataclass(frozen=True)
class ExecutionResult:
    """One completion. `reasoning` is "" when the service returned none; `attempts` counts HTTP
    attempts; `elapsed_s` runs from the first attempt to the answer, retries included;
    `response_model` / `response_provider` are the body's `model` and `provider` when it names
    them (OpenRouter names the upstream provider); `backend` is the backend's name."""

    text: str
    reasoning: str
    finish_reason: str | None
    usage: dict[str, Any] | None
    attempts: int
    elapsed_s: float
    response_model: str | None = None
    response_provider: str | None = None
    backend: str = ""
    #: Characters of `text` and `reasoning` replaced to make them valid UTF-8 without NUL
    #: (`harness.model_text`); empty when the answer needed none.
    repairs: dict[str, int] | None = None

    def response_metadata(self) -> dict[str, Any]:
        """What the entry keeps as `execution_response_metadata`, with the reference's keys
        (its harness/execution.py and agent.py): `provider`, `backend`, `api_attempts`,
        `api_elapsed_s`, `purpose`, `api_response_model` and `api_response_provider` when the
        body names them, and `finish_reason` ("" when the service gave none)."""
        metadata: dict[str, Any] = {
            "provider": "openai_compatible",
            "backend": self.backend,
            "api_attempts": self.attempts,
            "api_elapsed_s": self.elapsed_s,
            "purpose": "execution",
        }
        if self.response_model:
            metadata["api_response_model"] = self.response_model
        if self.response_provider:
            metadata["api_response_provider"] = self.response_provider
        metadata["finish_reason"] = self.finish_reason or ""
        return metadata

    def response_usage(self) -> dict[str, Any]:
        """What the entry keeps as `execution_response_usage`: the body's `usage`, `{}` when it
        has none (the reference's)."""
        return dict(self.usage or {})


def _named(payload: Any, key: str) -> str | None:
    """A completion body's string field `key` (`model`, `provider`), None when absent."""
    value = payload.get(key) if isinstance(payload, Mapping) else None
    return str(value) if value else None


def _first_choice(payload: Any) -> Mapping[str, Any]:
    choices = payload.get("choices") if isinstance(payload, Mapping) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise ExecutionResponseError(f"response has no choices: {str(payload)[:ERROR_BODY_LIMIT]}")
    return choices[0]


def parse_completion(payload: Any) -> tuple[str, str, str | None, dict[str, Any] | None]:
    """Read (text, reasoning, finish_reason, usage) from a chat completion body, as the reference
    does. Text is `message.content`, else `choice.text`, and must hold more than whitespace;
    reasoning is the first non-empty of `message.reasoning_content`, `message.reasoning`,
    `choice.reasoning_content` and `choice.reasoning`. Both are returned as received except
    for lone surrogates and NULs (`harness.model_text`; `repaired_completion` counts them)."""
    choice = _first_choice(payload)
    message = choice.get("message") if isinstance(choice.get("message"), Mapping) else {}
    text = message.get("content") or choice.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ExecutionResponseError(
            f"executor returned empty content (finish_reason={choice.get('finish_reason')!r})"
        )
    reasoning = next(
        (
            value
            for value in (
                message.get("reasoning_content"),
                message.get("reasoning"),
                choice.get("reasoning_content"),
                choice.get("reasoning"),
            )
            if isinstance(value, str) and value
        ),
        "",
    )
    finish_reason = choice.get("finish_reason")
    usage = payload.get("usage")
    return (
        valid_text(text)[0],
        valid_text(reasoning)[0],
        finish_reason if isinstance(finish_reason, str) else None,
        dict(usage) if isinstance(usage, Mapping) else None,
    )


def _repairs(payload: Any) -> dict[str, int]:
    """How many characters of the answer's text and reasoning `parse_completion` replaced."""
    choice = _first_choice(payload)
    message = choice.get("message") if isinstance(choice.get("message"), Mapping) else {}
    text = message.get("content") or choice.get("text")
    reasoning = next(
        (
            value
            for value in (
                message.get("reasoning_content"),
                message.get("reasoning"),
                choice.get("reasoning_content"),
                choice.get("reasoning"),
            )
            if isinstance(value, str) and value
        ),
        "",
    )
    counts = {
        "execution_text": valid_text(text)[1] if isinstance(text, str) else 0,
        "execution_thinking": valid_text(reasoning)[1],
    }
    return {key: count for key, count in counts.items() if count}


def require_api_key(
    backend: ExecutionBackend, environ: Mapping[str, str] | None = None
) -> str | None:
    """The backend's API key from the environment (None for a keyless backend). A backend that
    needs a key whose variable is unset or blank raises `MissingAPIKeyError`, one line naming
    the variable: every entry point calls this before its first step, so a missing key stops
    the run at start instead of turning every rollout into reward 0. The key is never kept."""
    env = backend.api_key_env
    if env is None:
        return None
    key = (os.environ if environ is None else environ).get(env, "").strip()
    if not key:
        raise MissingAPIKeyError(
            f"executor {backend.name} needs an API key: set the environment variable {env}"
        )
    return key


def _retry_after_s(response: httpx.Response) -> float | None:
    """A numeric `Retry-After` in seconds; an HTTP-date or garbage falls back to backoff."""
    raw = response.headers.get("retry-after")
    try:
        seconds = float(raw) if raw is not None else math.nan
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _success_payload(response: httpx.Response) -> tuple[Any, str | None]:
    """The JSON body of a 2xx answer, and what makes it a transient failure (None when it is an
    answer), as the reference retries them: a body that is not JSON, JSON that is not an
    object, or an object whose `"error"` is set (an object or a string)."""
    try:
        payload = response.json()
    except ValueError:
        return None, "a non-JSON body"
    if not isinstance(payload, Mapping):
        return payload, "JSON that is not an object"
    if payload.get("error"):
        return payload, "an error in the body"
    return payload, None


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
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        max_tokens: int | None = None,
        seed: int | None = None,
    ) -> ExecutionResult:
        """One chat completion with the backend's retry policy. `max_tokens` overrides the
        backend's limit for this call; `seed`, when given, is sent as the request's sampling
        `seed` (OpenAI-compatible services that take one sample reproducibly). Raises an
        `ExecutionError` subclass on a missing key, an HTTP failure, a transport failure after
        retries, or an unusable (e.g. empty) answer."""
        limit = max_tokens if max_tokens is not None else self.backend.max_tokens
        body = build_request_body(self.backend, messages, max_tokens=limit, seed=seed)
        key = self._api_key()
        with self._slots:
            started = time.monotonic()
            payload, attempts = self._send(body, key, self.backend.max_retries)
            elapsed = time.monotonic() - started
        try:
            text, reasoning, finish_reason, usage = parse_completion(payload)
            repairs = _repairs(payload)
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
        return ExecutionResult(
            text,
            reasoning,
            finish_reason,
            usage,
            attempts,
            elapsed,
            _named(payload, "model"),
            _named(payload, "provider"),
            self.backend.name,
            repairs or None,
        )

    def probe(self) -> tuple[str, dict[str, Any] | None]:
        """A one-token request of the run's own shape (the backend's options, dialect and drop,
        a sampling seed) without retries, to show the service takes it (used by the preflight).
        Any 2xx completion with a choice counts, even with empty content; returns a
        short description and the answer's `usage` (None when it has none), raises an
        `ExecutionError` otherwise."""
        body = build_request_body(
            self.backend, [{"role": "user", "content": "Reply with OK."}], max_tokens=1, seed=0
        )
        key = self._api_key()
        with self._slots:
            payload, _ = self._send(body, key, max_retries=0)
        try:
            choice = _first_choice(payload)
        except ExecutionResponseError as exc:
            raise ExecutionResponseError(_redact(str(exc), key)) from None
        usage = payload.get("usage") if isinstance(payload, Mapping) else None
        detail = f"{self.backend.model} answered (finish_reason={choice.get('finish_reason')!r})"
        return detail, dict(usage) if isinstance(usage, Mapping) else None

    def _api_key(self) -> str | None:
        return require_api_key(self.backend)

    def _send(self, body: dict[str, Any], key: str | None, max_retries: int) -> tuple[Any, int]:
        """POST until a 2xx answer, a non-retryable status, or retries run out; returns the
        parsed JSON body and the number of attempts."""
        name = self.backend.name
        url = f"{self.backend.base_url}/chat/completions"
        # A keyless (local) server gets the reference's placeholder bearer: OpenAI-compatible
        # servers commonly want a syntactically present one even with authentication off.
        headers = {"Authorization": f"Bearer {key or LOCAL_BEARER}"}
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
                text = _redact(response.text[:ERROR_BODY_LIMIT], key)
                payload, problem = _success_payload(response)
                if response.is_success and problem is None:
                    return payload, attempt
                if response.is_success:
                    # OpenRouter answers 200 with an error object, or with a body that is not
                    # JSON, when an upstream provider fails: transient, as the reference treats
                    # them (retried while retries remain; the local backend has none).
                    failure = ExecutionResponseError(
                        f"executor {name}: HTTP {response.status_code} with {problem} "
                        f"(attempt {attempt}): {text}"
                    )
                else:
                    kind = (
                        ExecutorAccessError
                        if response.status_code in ACCESS_STATUSES
                        else ExecutionHTTPError
                    )
                    failure = kind(
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
