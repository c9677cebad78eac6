"""What the loopback stand-in (`harness.rehearsal.openai_server`) refuses, per service, taken
from each service's own definition of a chat-completions request, never from this project's.

- ``strict`` — OpenAI's API: the request types of the installed ``openai`` package
  (``openai.types.chat.completion_create_params.CompletionCreateParamsNonStreaming`` /
  ``...Streaming``, validated with a pydantic ``TypeAdapter``); a top-level field those types
  do not declare is refused as the API refuses it, ``400 Unrecognized request argument
  supplied: <field>``. Needs ``openai`` (the ``test`` extra).
- ``sglang`` — SGLang's OpenAI-compatible server: its ``ChatCompletionRequest`` (sglang
  ``python/sglang/srt/entrypoints/openai/protocol.py`` at commit
  004c82e07d876f6e4a0ad6e15325706b0f478f1a) is a pydantic model with pydantic's default
  ``extra="ignore"``: unknown fields are ignored, declared ones are type-checked. The extras it
  declares beyond OpenAI's fields are ``SGLANG_EXTRAS`` (the types of the ones the harness can
  send are checked); the OpenAI fields are checked with the ``openai`` types as above.
- ``openrouter`` — OpenRouter's documented request parameters
  (https://openrouter.ai/docs/api-reference/overview and .../parameters): OpenRouter passes
  unknown parameters on to providers, so only the documented ones' types are checked
  (``reasoning.effort`` one of xhigh/high/medium/low/minimal/none, ``top_k`` ≥ 0, ...).

Each check returns None for an accepted body or the endpoint's error message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import cache
from typing import Any

from harness.request_shapes import OPENROUTER_FIELDS

MODES = ("lenient", "strict", "sglang", "openrouter")

#: SGLang ChatCompletionRequest's declared fields beyond OpenAI's (protocol.py, commit above).
SGLANG_EXTRAS = frozenset(
    {
        "return_hidden_states",
        "return_routed_experts",
        "routed_experts_start_len",
        "return_cached_tokens_details",
        "return_prompt_token_ids",
        "return_token_ids",
        "return_meta_info",
        "task",
        "top_k",
        "min_p",
        "min_tokens",
        "regex",
        "ebnf",
        "repetition_penalty",
        "stop_token_ids",
        "stop_regex",
        "no_stop_trim",
        "ignore_eos",
        "continue_final_message",
        "skip_special_tokens",
        "lora_path",
        "session_id",
        "session_params",
        "separate_reasoning",
        "stream_reasoning",
        "chat_template_kwargs",
        "max_dynamic_patch",
        "min_dynamic_patch",
        "use_audio_in_video",
        "images_config",
        "custom_logit_processor",
        "custom_params",
        "input_ids",
        "rid",
        "extra_key",
        "cache_salt",
        "ngram_corpus_id",
        "priority",
        "bootstrap_host",
        "bootstrap_port",
        "bootstrap_room",
        "routed_dp_rank",
        "disagg_prefill_dp_rank",
        "data_parallel_rank",
    }
)

#: OpenRouter's documented request parameters (the pages above): one list, the project's own
#: (`harness.request_shapes.OPENROUTER_FIELDS`, copied from those pages), so the two cannot drift.
OPENROUTER_DOCUMENTED = OPENROUTER_FIELDS

OPENROUTER_EFFORTS = ("xhigh", "high", "medium", "low", "minimal", "none")


@cache
def _openai_adapters() -> tuple[Any, Any, frozenset[str]]:
    try:
        from openai.types.chat import completion_create_params as params
    except ImportError as exc:  # pragma: no cover - the test extra installs it
        raise RuntimeError(
            "the strict OpenAI stand-in needs the `openai` package (pip install -e '.[test]')"
        ) from exc
    from pydantic import TypeAdapter

    buffered = params.CompletionCreateParamsNonStreaming
    streamed = params.CompletionCreateParamsStreaming
    declared = frozenset(buffered.__required_keys__ | buffered.__optional_keys__)
    return TypeAdapter(buffered), TypeAdapter(streamed), declared


def warm_up(mode: str) -> None:
    """Build the validators `mode` uses (the openai types take seconds to compile)."""
    if mode in ("strict", "sglang"):
        _openai_adapters()


def openai_fields() -> frozenset[str]:
    """The top-level fields OpenAI's Chat Completions request declares (installed `openai`)."""
    return _openai_adapters()[2]


def _materialise(value: Any) -> Any:
    """Consume the lazy iterables pydantic returns for `Iterable[...]` fields, so every item is
    validated."""
    if isinstance(value, Mapping):
        return {key: _materialise(item) for key, item in value.items()}
    if isinstance(value, str | bytes):
        return value
    if isinstance(value, Iterable):
        return [_materialise(item) for item in value]
    return value


def _type_errors(adapter: Any, body: Mapping[str, Any]) -> str | None:
    from pydantic import ValidationError

    try:
        _materialise(adapter.validate_python(dict(body)))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return f"Invalid value for '{where}': {first['msg']}"
    return None


def openai_refusal(body: Any) -> str | None:
    """OpenAI's answer to `body`: None when its Chat Completions request types accept it."""
    if not isinstance(body, Mapping):
        return "We could not parse the JSON body of your request."
    buffered, streamed, declared = _openai_adapters()
    unknown = [key for key in body if key not in declared]
    if unknown:
        return f"Unrecognized request argument supplied: {unknown[0]}"
    return _type_errors(streamed if body.get("stream") else buffered, body)


def _sglang_extra_errors(body: Mapping[str, Any]) -> str | None:
    """The declared types of the SGLang extras the harness can send (protocol.py)."""
    checks: dict[str, Callable[[Any], bool]] = {
        "top_k": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "min_p": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "min_tokens": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "repetition_penalty": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "chat_template_kwargs": lambda v: v is None or isinstance(v, dict),
        "separate_reasoning": lambda v: isinstance(v, bool),
        "stream_reasoning": lambda v: isinstance(v, bool),
        "skip_special_tokens": lambda v: isinstance(v, bool),
        "lora_path": lambda v: v is None or isinstance(v, str | list),
    }
    for key, accepted in checks.items():
        if key in body and body[key] is not None and not accepted(body[key]):
            return f"Invalid value for '{key}': {body[key]!r}"
    return None


def sglang_refusal(body: Any) -> str | None:
    """SGLang's answer to `body`: unknown fields ignored, declared fields type-checked."""
    if not isinstance(body, Mapping):
        return "body is not a JSON object"
    buffered, streamed, declared = _openai_adapters()
    known = {key: value for key, value in body.items() if key in declared}
    problem = _type_errors(streamed if body.get("stream") else buffered, known)
    return problem or _sglang_extra_errors(body)


def openrouter_refusal(body: Any) -> str | None:
    """OpenRouter's answer to `body`: the documented parameters' types checked."""
    if not isinstance(body, Mapping):
        return "body is not a JSON object"
    if not isinstance(body.get("messages"), list) and not isinstance(body.get("prompt"), str):
        return "Either 'messages' or 'prompt' is required"
    for key in ("max_tokens", "seed", "top_k", "top_logprobs"):
        value = body.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            return f"Invalid value for '{key}': expected an integer"
    if isinstance(body.get("top_k"), int) and body["top_k"] < 0:
        return "Invalid value for 'top_k': must be 0 or above"
    temperature = body.get("temperature")
    if temperature is not None and not (
        isinstance(temperature, int | float) and 0 <= temperature <= 2
    ):
        return "Invalid value for 'temperature': must be between 0 and 2"
    reasoning = body.get("reasoning")
    if reasoning is not None:
        if not isinstance(reasoning, Mapping):
            return "Invalid value for 'reasoning': expected an object"
        effort = reasoning.get("effort")
        if effort is not None and effort not in OPENROUTER_EFFORTS:
            return f"Invalid value for 'reasoning.effort': {effort!r}"
        for flag in ("exclude", "enabled"):
            if flag in reasoning and not isinstance(reasoning[flag], bool):
                return f"Invalid value for 'reasoning.{flag}': expected a boolean"
    return None


def undocumented_openrouter_fields(body: Mapping[str, Any]) -> list[str]:
    """The top-level fields of `body` OpenRouter does not document (it forwards them as-is)."""
    return sorted(key for key in body if key not in OPENROUTER_DOCUMENTED)


CHECKS: Mapping[str, Callable[[Any], str | None]] = {
    "strict": openai_refusal,
    "sglang": sglang_refusal,
    "openrouter": openrouter_refusal,
}
