"""The executor backend catalogue (docs/design.md §4): what an executor service is, how to call it.

An `ExecutionBackend` is a frozen description of one frozen executor service: it names the
environment variable that holds the API key, never the key itself, so `safe_dict()` can be written
into entries, resume state and logs. `backend_from_name` builds the two built-in backends with a
run's deployment settings, and `build_request_body` turns chat messages into the JSON body a
backend is sent. The HTTP client that sends it is
`harness.adapters.executor.client.ExecutionClient`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any

from harness.request_shapes import DEFAULT_DIALECT, DIALECTS, REQUIRED_FIELDS, RequestShape

GPT_OSS_EFFORTS = ("low", "medium", "high")
#: The reference's record of a backend (its harness/execution.py `ExecutionBackend.safe_dict`),
#: in its order: what `safe_dict()` writes, plus the request shape where a run chose one.
REFERENCE_RECORD_KEYS = (
    "name",
    "model",
    "base_url",
    "api_key_env",
    "temperature",
    "max_tokens",
    "timeout_s",
    "concurrency",
    "max_retries",
    "retry_backoff_s",
    "request_options",
)
#: The dialect a preset's body is shaped in unless a run picks another; any other backend's is
#: `DEFAULT_DIALECT`. Each preset's own dialect sends the reference's body unchanged.
PRESET_DIALECTS: Mapping[str, str] = MappingProxyType({"openrouter_glm_5_2": "openrouter"})
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
    safe to persist anywhere. `request_options` are merged into every request body; `dialect`
    shapes the base fields for the service (`harness.request_shapes`: `openai` sends
    `max_completion_tokens` for `max_tokens`) and `drop` removes top-level fields last."""

    name: str
    model: str
    base_url: str
    api_key_env: str | None
    temperature: float
    max_tokens: int | None = None
    timeout_s: float = 1200.0
    concurrency: int = 8
    max_retries: int = 0
    retry_backoff_s: float = 2.0
    request_options: Mapping[str, Any] = field(default_factory=dict, hash=False)
    dialect: str = "sglang"
    drop: tuple[str, ...] = ()

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
        if self.dialect not in DIALECTS:
            raise ValueError(
                f"executor {self.name}: request dialect {self.dialect!r} is unknown; choose one "
                f"of {', '.join(DIALECTS)}"
            )
        drop = tuple(sorted({str(name) for name in self.drop}))
        if REQUIRED_FIELDS & set(drop):
            raise ValueError(f"executor {self.name}: request drop may not remove model or messages")
        object.__setattr__(self, "drop", drop)
        object.__setattr__(self, "request_options", _freeze(self.request_options))

    @property
    def chosen_shape(self) -> bool:
        """Whether a run chose a request shape other than the backend's own: a dialect other
        than its preset's (`PRESET_DIALECTS`) or fields to drop."""
        return bool(self.drop) or self.dialect != PRESET_DIALECTS.get(self.name, DEFAULT_DIALECT)

    def safe_dict(self) -> dict[str, Any]:
        """The only persisted form, as plain JSON data: the reference's keys
        (`REFERENCE_RECORD_KEYS`, its record of the same backend), and `dialect` and `drop`
        beside them only where a run chose its request shape (`chosen_shape`), so that the
        record of a body the reference never sends says so. It contains the key's environment
        variable name, never its value."""
        record = {key: _thaw(getattr(self, key)) for key in REFERENCE_RECORD_KEYS}
        if self.chosen_shape:
            record.update(dialect=self.dialect, drop=list(self.drop))
        return record

    @classmethod
    def from_safe_dict(cls, data: Mapping[str, Any]) -> ExecutionBackend:
        """Rebuild a backend from `safe_dict()` output (e.g. a resume state) or the reference's
        record; without `dialect` and `drop` it has its preset's shape. Unknown or missing keys
        are an error naming them."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown executor backend keys {unknown}; expected {sorted(names)}")
        values = dict(data)
        values.setdefault("dialect", PRESET_DIALECTS.get(str(values.get("name")), DEFAULT_DIALECT))
        values["drop"] = tuple(values.get("drop") or ())
        try:
            return cls(**values)
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
        concurrency=8,
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
        concurrency=8,
        max_retries=6,
        request_options={"reasoning": {"effort": "high", "exclude": False}},
        dialect=PRESET_DIALECTS["openrouter_glm_5_2"],
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


#: The preset-less executor: any OpenAI-compatible endpoint, named by base URL and model.
GENERIC_BACKEND = "openai_compatible"
#: Every value `executor_backend` may take: the two presets and the generic endpoint.
EXECUTOR_CHOICES = (*BUILTIN_BACKENDS, GENERIC_BACKEND)
#: The generic endpoint's defaults where the settings name none.
GENERIC_TEMPERATURE = 1.0
GENERIC_MAX_RETRIES = 2


def configured_backend(
    preset: str,
    *,
    base_url: str | None = None,
    model: str | None = None,
    api_key_env: str | None = None,
    temperature: float | None = None,
    reasoning_effort: str | None = None,
    extra_body: Mapping[str, Any] | None = None,
    max_tokens: int | None = None,
    timeout_s: float | None = None,
    max_retries: int | None = None,
    concurrency: int | None = None,
    dialect: str | None = None,
    drop: tuple[str, ...] | list[str] | None = None,
) -> ExecutionBackend:
    """The executor a run's settings describe (docs/executors.md): a preset (`gpt_oss_120b`,
    `openrouter_glm_5_2`: the reference's values) with any field replaced, or `openai_compatible`,
    any endpoint named by `base_url` and `model`. None means "the preset's value". `extra_body`
    is merged into every request body; `reasoning_effort` is GPT-OSS's effort for that preset
    and `reasoning_effort` in the body of a generic endpoint. `dialect` and `drop` shape every
    body (`harness.request_shapes`; None: the preset's dialect, `sglang` for a generic one)."""
    shape: dict[str, Any] = {}
    if dialect is not None:
        shape["dialect"] = dialect
    if drop:
        shape["drop"] = tuple(drop)
    if preset == GENERIC_BACKEND:
        if not base_url or not model:
            raise ValueError(
                f"executor_backend {GENERIC_BACKEND} needs executor.base_url and executor.model "
                "(e.g. http://127.0.0.1:8000/v1 and the id /v1/models lists); set them, or "
                f"choose a preset: {', '.join(BUILTIN_BACKENDS)}"
            )
        options = {"reasoning_effort": reasoning_effort} if reasoning_effort else {}
        return ExecutionBackend(
            name=GENERIC_BACKEND,
            model=model,
            base_url=base_url.rstrip("/"),
            api_key_env=api_key_env,
            temperature=GENERIC_TEMPERATURE if temperature is None else temperature,
            max_tokens=max_tokens,
            timeout_s=1200.0 if timeout_s is None else timeout_s,
            concurrency=8 if concurrency is None else concurrency,
            max_retries=GENERIC_MAX_RETRIES if max_retries is None else max_retries,
            request_options={**options, **dict(extra_body or {})},
            **shape,
        )
    if preset not in BUILTIN_BACKENDS:
        raise ValueError(
            f"unknown executor backend {preset!r}; choose one of {list(EXECUTOR_CHOICES)}"
        )
    if api_key_env is not None and api_key_env == make_default_key(preset):
        api_key_env = None  # the preset's own variable, named again
    backend = backend_from_name(
        preset,
        reasoning_effort=reasoning_effort,
        base_url=base_url,
        concurrency=concurrency,
        max_tokens=max_tokens,
        timeout_s=timeout_s,
        api_key_env=api_key_env,
    )
    changes: dict[str, Any] = {
        "model": model,
        "temperature": temperature,
        "max_retries": max_retries,
    }
    changes = {key: value for key, value in changes.items() if value is not None}
    changes.update(shape)
    if extra_body:
        changes["request_options"] = {**_thaw(backend.request_options), **dict(extra_body)}
    return replace(backend, **changes) if changes else backend


def make_default_key(preset: str) -> str | None:
    """The environment variable a preset reads its key from (None: it needs none)."""
    return {"openrouter_glm_5_2": "OPENROUTER_API_KEY"}.get(preset)


def build_request_body(
    backend: ExecutionBackend,
    messages: Sequence[Mapping[str, str]],
    *,
    max_tokens: int | None,
    seed: int | None = None,
) -> dict[str, Any]:
    """The JSON body of one chat completion: model, messages, temperature, `max_tokens` only when
    set, the sampling `seed` when given, shaped by the backend's dialect; then the backend's
    request options; then its `drop` removed. Messages must be {role, content} string pairs."""
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
    if seed is not None:
        body["seed"] = int(seed)
    body = RequestShape(backend.dialect).apply(body)
    body.update(_thaw(backend.request_options))
    for name in backend.drop:
        body.pop(name, None)
    return body
