"""What a model request is shaped like for each service it goes to: the dialects, the fields
each keeps, and `RequestShape`.

docs/frozen.md ("What each dialect sends") and docs/executors.md tell it for users. A
chat-completions body is built once by its caller (`harness.prompts.guidance_request_body`,
`harness.adapters.executor.backends.build_request_body`) and then shaped for the endpoint that
receives it by a `RequestShape`:

1. the **dialect** keeps the fields that service accepts:
   - ``sglang``: the body as built (SGLang's OpenAI-compatible server takes every field the
     harness builds, ``top_k`` and ``chat_template_kwargs`` included; the reference's body);
   - ``openai``: only the top-level fields of OpenAI's Chat Completions request
     (``OPENAI_CHAT_FIELDS``; OpenAI answers 400 "Unrecognized request argument supplied" to any
     other), ``max_tokens`` renamed ``max_completion_tokens``;
   - ``openrouter``: only OpenRouter's documented request parameters (``OPENROUTER_FIELDS``),
     ``max_completion_tokens`` renamed ``max_tokens``, a negative ``top_k`` (SGLang's "off")
     left out (OpenRouter documents 0 or above);
2. ``extra_body`` is merged over the result (a key set there is always sent);
3. ``drop`` removes top-level fields last (``model`` and ``messages`` cannot be dropped).

The field lists are facts from the services' published definitions; the tests check them
against the installed ``openai`` package's request types and OpenRouter's documented parameters.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

DIALECTS = ("sglang", "openai", "openrouter")
DEFAULT_DIALECT = "sglang"
#: Fields no shape may remove: without them there is no request.
REQUIRED_FIELDS = frozenset({"model", "messages"})

#: OpenAI Chat Completions' top-level request fields (`openai.types.chat.
#: completion_create_params.CompletionCreateParamsBase`, openai-python 3.x).
OPENAI_CHAT_FIELDS = frozenset(
    {
        "messages",
        "model",
        "audio",
        "frequency_penalty",
        "function_call",
        "functions",
        "logit_bias",
        "logprobs",
        "max_completion_tokens",
        "max_tokens",
        "metadata",
        "modalities",
        "n",
        "parallel_tool_calls",
        "prediction",
        "presence_penalty",
        "prompt_cache_key",
        "reasoning_effort",
        "response_format",
        "safety_identifier",
        "seed",
        "service_tier",
        "stop",
        "store",
        "stream",
        "stream_options",
        "temperature",
        "tool_choice",
        "tools",
        "top_logprobs",
        "top_p",
        "user",
        "verbosity",
        "web_search_options",
    }
)

#: OpenRouter's documented chat-completions request parameters
#: (https://openrouter.ai/docs/api-reference/overview, "Request Schema", and
#: https://openrouter.ai/docs/api-reference/parameters).
OPENROUTER_FIELDS = frozenset(
    {
        "messages",
        "prompt",
        "model",
        "response_format",
        "stop",
        "stream",
        "max_tokens",
        "temperature",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "seed",
        "top_p",
        "top_k",
        "frequency_penalty",
        "presence_penalty",
        "repetition_penalty",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "min_p",
        "top_a",
        "prediction",
        "transforms",
        "models",
        "route",
        "provider",
        "user",
        "reasoning",
        "usage",
        "structured_outputs",
        "verbosity",
    }
)

_KEPT = {"openai": OPENAI_CHAT_FIELDS, "openrouter": OPENROUTER_FIELDS}


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_thaw(v) for v in value]
    return value


@dataclass(frozen=True)
class RequestShape:
    """How one endpoint's requests are shaped (module doc): a dialect, fields merged over it,
    fields dropped. Plain JSON data only, so `safe_dict()` goes into the run identity."""

    dialect: str = DEFAULT_DIALECT
    drop: tuple[str, ...] = ()
    extra_body: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if self.dialect not in DIALECTS:
            raise ValueError(
                f"request dialect {self.dialect!r} is unknown; choose one of {', '.join(DIALECTS)}"
            )
        drop = tuple(sorted({str(name) for name in self.drop}))
        protected = sorted(REQUIRED_FIELDS & set(drop))
        if protected:
            raise ValueError(f"request drop may not remove {protected}: every request needs them")
        extra = _thaw(self.extra_body)
        if not isinstance(extra, dict):
            raise ValueError(f"request extra_body must be a mapping, got {self.extra_body!r}")
        json.dumps(extra)  # it goes into every body
        object.__setattr__(self, "drop", drop)
        object.__setattr__(self, "extra_body", MappingProxyType(extra))

    def apply(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """`body` shaped for this endpoint (a new dict; `body` is not changed)."""
        shaped = _thaw(body)
        kept = _KEPT.get(self.dialect)
        if self.dialect == "openai" and "max_tokens" in shaped:
            limit = shaped.pop("max_tokens")
            shaped.setdefault("max_completion_tokens", limit)
        if self.dialect == "openrouter":
            if "max_completion_tokens" in shaped:
                limit = shaped.pop("max_completion_tokens")
                shaped.setdefault("max_tokens", limit)
            top_k = shaped.get("top_k")
            if isinstance(top_k, int) and top_k < 0:  # SGLang's "off" is OpenRouter's absence
                shaped.pop("top_k")
        if kept is not None:
            shaped = {key: value for key, value in shaped.items() if key in kept}
        shaped.update(_thaw(self.extra_body))
        for name in self.drop:
            shaped.pop(name, None)
        return shaped

    def removed(self, body: Mapping[str, Any]) -> list[str]:
        """The top-level fields of `body` this shape does not send (for `status` and docs)."""
        shaped = self.apply(body)
        return sorted(key for key in body if key not in shaped)

    def safe_dict(self) -> dict[str, Any]:
        """The shape as plain JSON data (run identity, entries, `status`)."""
        return {
            "dialect": self.dialect,
            "drop": list(self.drop),
            "extra_body": _thaw(self.extra_body),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> RequestShape:
        """From `safe_dict()` output (None: the default shape)."""
        if not data:
            return cls()
        unknown = sorted(set(data) - {"dialect", "drop", "extra_body"})
        if unknown:
            raise ValueError(f"unknown request shape keys {unknown}")
        return cls(
            dialect=str(data.get("dialect", DEFAULT_DIALECT)),
            drop=tuple(data.get("drop") or ()),
            extra_body=dict(data.get("extra_body") or {}),
        )

    def describe(self) -> str:
        """One line that tells shapes apart (the run identity's value, `status`, the
        preflight): ``openai``, ``openai; drop top_p; extra_body {"user": "me"}``."""
        parts = [self.dialect]
        if self.drop:
            parts.append("drop " + ", ".join(self.drop))
        if self.extra_body:
            parts.append("extra_body " + json.dumps(_thaw(self.extra_body), sort_keys=True))
        return "; ".join(parts)
