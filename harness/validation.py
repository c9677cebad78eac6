"""The shared machinery of the boundary models: strict section models and one error format.

Every file the harness reads from a user — ``serve.yaml`` (``harness.settings.serve``), a task's
``contract.json`` and ``task.toml`` (``harness.contract``) — is declared as pydantic models built
on :class:`Section`. The rules live in those declarations; this module only turns a pydantic
``ValidationError`` into one message per problem that names the key by its path in the file and
the value found there, e.g. ``recipe.config.groups-per-step: must be ≥ 1, got 0``. The harness,
the tttd recipe (under ``reef serve``) and the preflight all format errors here, so the same
mistake reads the same wherever it is caught.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

#: The end of a rule's message whose value must not be echoed (it may be a pasted key), or
#: that names everything itself.
WITHHELD = "(value not shown)"
#: How a required key that is not set is described.
MISSING = "is required but not set"


class Section(BaseModel):
    """A frozen model of one section of a file: unknown keys are refused, not ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class HyphenSection(Section):
    """A section whose keys are written with hyphens (``groups-per-step``), as Reef's own are."""

    model_config = ConfigDict(alias_generator=lambda name: name.replace("_", "-"))


def _strict_integer(value: Any) -> Any:
    # pydantic's lax mode reads True as 1; a YAML `true` where a count belongs is a mistake.
    if isinstance(value, bool):
        raise ValueError("must be an integer, not a boolean")
    return value


#: An integer that may be written as a number or a numeric string (``${VAR}`` expands to text).
Integer = Annotated[int, BeforeValidator(_strict_integer)]


def non_empty(value: str) -> str:
    """A string field's rule: something besides whitespace."""
    if not value.strip():
        raise ValueError("must not be empty")
    return value


def http_url(value: str) -> str:
    """A URL field's rule: ``http://`` or ``https://`` with a host (trailing ``/`` removed)."""
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            "must be an http:// or https:// URL with a host (e.g. http://127.0.0.1:8081)"
        )
    try:
        parts.port  # noqa: B018 - raises for a port outside 0-65535 or not a number
    except ValueError as exc:
        raise ValueError(f"has an invalid port ({exc})") from None
    return value.strip().rstrip("/")


def fold_keys(data: Any, spelling: str, where: str) -> Any:
    """A mapping with its keys in one spelling (``-`` or ``_``), as Reef folds them.

    Raises ``ValueError`` when a key is written both ways, naming it at ``where``.
    """
    if not isinstance(data, Mapping):
        return data
    other = "_" if spelling == "-" else "-"
    folded: dict[Any, Any] = {}
    for key, value in data.items():
        name = key.replace(other, spelling) if isinstance(key, str) else key
        if name in folded:
            raise ValueError(f"{where}.{name}: written twice (with - and with _); keep one")
        folded[name] = value
    return folded


def _describe(item: Mapping[str, Any], model: type[BaseModel] | None, loc: tuple) -> str:
    kind, ctx, value = item["type"], item.get("ctx") or {}, item.get("input")
    if kind == "missing":
        return MISSING
    if kind == "extra_forbidden":
        refused = getattr(_model_at(model, loc[:-1]), "REFUSED_KEYS", {})
        if str(loc[-1]) in refused:  # a key the section knows it cannot honour, and why
            return f"{refused[str(loc[-1])]}, got {value!r}"
        known = _known_keys(model, loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return f"unknown key (value {value!r}); {hint}known keys: {', '.join(known)}"
    bounds = {
        "greater_than_equal": ("≥", "ge"),
        "greater_than": (">", "gt"),
        "less_than_equal": ("≤", "le"),
        "less_than": ("<", "lt"),
    }
    if kind in bounds:
        symbol, key = bounds[kind]
        bound = ctx[key]
        if isinstance(bound, float) and bound.is_integer():
            bound = int(bound)  # a float field's bound reads as written: "> 0", not "> 0.0"
        return f"must be {symbol} {bound}, got {value!r}"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')}, got {value!r}"
    if kind.startswith("int_") or kind.startswith("float_"):
        return (
            f"must be a {'number' if kind.startswith('float_') else 'whole number'}, got {value!r}"
        )
    if kind in ("string_type", "dict_type", "model_type", "model_attributes_type"):
        wanted = "a string" if kind == "string_type" else "a mapping of keys"
        return f"must be {wanted}, got {value!r}"
    message = str(item["msg"]).removeprefix("Value error, ")
    if message.endswith(WITHHELD):  # a value that may be a secret is never echoed
        return message
    # A rule across keys (loc is the section itself) says everything in its own message, and so
    # does a rule whose message already quotes the value.
    return f"{message}, got {value!r}" if loc and repr(value) not in message else message


def _known_keys(model: type[BaseModel] | None, loc: tuple) -> list[str]:
    """The keys the (sub)model at ``loc`` declares, in their written spelling."""
    model = _model_at(model, loc)
    if model is None:
        return []
    return [info.alias or name for name, info in model.model_fields.items()]


def _model_at(model: type[BaseModel] | None, loc: tuple) -> type[BaseModel] | None:
    """The (sub)model that validates the mapping at ``loc`` (None where it is not a model)."""
    for part in loc:
        if model is None:
            return None
        field = next(
            (info for name, info in model.model_fields.items() if part in (name, info.alias)),
            None,
        )
        annotation = getattr(field, "annotation", None)
        model = (
            annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseModel)
            else None
        )
    return model


def error_lines(
    error: ValidationError, prefix: str = "", model: type[BaseModel] | None = None
) -> list[str]:
    """One ``<path>: <problem>, got <value>`` line per problem of ``error``.

    ``prefix`` is where the validated mapping sits in its file (``recipe.config``); ``model``
    (the validated class) lets an unknown key be answered with the keys that are known.
    """
    lines = []
    for item in error.errors():
        loc = tuple(item["loc"])
        path = ".".join(str(part) for part in (prefix, *loc) if str(part))
        lines.append(
            f"{path}: {_describe(item, model, loc)}" if path else _describe(item, model, loc)
        )
    return lines


def join(lines: Iterable[str]) -> str:
    """Problems as one message: each on its own line after the first."""
    return "\n  ".join(lines)
