"""``observability.wandb`` in ``serve.yaml`` and ``serve-frozen.yaml``: Reef's own W&B block,
which the harness reads too, so Reef's training metrics and the harness's search metrics land
in one W&B project and group (docs/observability.md, "Watching a run in W&B").

The keys are Reef 0.1.3's (``reef.observability.wandb.WandbConfig``), written with underscores
as Reef reads them; Reef refuses an unknown key itself, so this model ignores keys it does not
read. The API key is never a setting: W&B reads ``WANDB_API_KEY`` from the environment.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from harness.validation import Section

WandbMode = Literal["online", "offline", "disabled"]


class WandbSection(Section):
    """``observability.wandb``: off unless ``enabled: true`` and ``mode`` is not ``disabled``."""

    model_config = Section.model_config | {"extra": "ignore"}

    enabled: bool = False
    #: Reef's default: ``online`` when enabled, else ``disabled``.
    mode: WandbMode | None = None
    project: str | None = None
    entity: str | None = None
    group_prefix: str | None = None
    name_prefix: str | None = None
    tags: tuple[str, ...] = ()
    directory: str | None = None

    @model_validator(mode="after")
    def _default_mode(self) -> WandbSection:
        if self.mode is None:
            object.__setattr__(self, "mode", "online" if self.enabled else "disabled")
        return self

    def as_mapping(self) -> dict[str, Any]:
        """The block as plain values, blank strings as None (as Reef reads them)."""
        values = self.model_dump()
        for key, value in values.items():
            if isinstance(value, str) and not value.strip():
                values[key] = None
        values["tags"] = list(self.tags)
        values["project"] = values["project"] or "reef"  # Reef's default project
        return values


class ObservabilitySection(Section):
    """``observability``: only its ``wandb`` block is read here (Reef owns ``tracing``)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    wandb: WandbSection = Field(default_factory=WandbSection)
