"""Per-endpoint request options: ``harness.guidance.request`` and ``harness.executor.request``.

Each block says how that endpoint's chat-completions bodies are shaped
(``harness.request_shapes``; docs/frozen.md, "What each dialect sends"):

    harness:
      guidance:
        request:
          dialect: openai          # sglang (default: the reference's body) | openai | openrouter
          drop: [top_p]            # top-level fields never sent
          extra_body: {user: me}   # fields merged into every body (sent whatever the dialect)
      executor:
        request: {dialect: openai}

The guidance block matters in frozen mode, where the guidance endpoint is any OpenAI-compatible
service behind Reef; a trained run's guidance model is Reef's SGLang, which takes the reference's
body, so a trained run refuses any other guidance shape. The shapes are part of the run identity
(another shape on resume is refused naming the key) and ``guidance-ttt status`` shows them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from harness.request_shapes import DEFAULT_DIALECT, REQUIRED_FIELDS, RequestShape
from harness.validation import Section

Dialect = Literal["sglang", "openai", "openrouter"]


class RequestSettings(Section):
    """``request``: the dialect, the fields dropped, the fields added."""

    dialect: Dialect = DEFAULT_DIALECT
    drop: list[str] = Field(default_factory=list)
    extra_body: dict[str, Any] = Field(default_factory=dict)

    @field_validator("drop")
    @classmethod
    def _not_the_request_itself(cls, value: list[str]) -> list[str]:
        protected = sorted(REQUIRED_FIELDS & set(value))
        if protected:
            raise ValueError(f"may not drop {', '.join(protected)}: every request needs them")
        return value

    @model_validator(mode="after")
    def _a_valid_shape(self) -> RequestSettings:
        try:
            self.shape()
        except (TypeError, ValueError) as exc:
            raise ValueError(str(exc)) from None
        return self

    def shape(self) -> RequestShape:
        """The block as the `RequestShape` the run applies."""
        return RequestShape(self.dialect, tuple(self.drop), dict(self.extra_body))


class GuidanceSettings(Section):
    """``harness.guidance``: the guidance endpoint's request options."""

    request: RequestSettings = Field(default_factory=RequestSettings)
