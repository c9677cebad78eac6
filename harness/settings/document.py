"""``serve.yaml`` as a document: loaded, environment expanded, ``${dotted.path}`` looked up.

Interpolation, as Reef 0.1.3 does it: ``${VAR}`` is the environment variable (empty when unset),
``${VAR:?}`` must be set and non-empty, and ``${dotted.path}`` refers to another setting of the
file. Reef has no default form, so ``${VAR:-default}`` (the variable when set and non-empty, else
``default``) is accepted only under ``training.config.harness``, the harness's own section that Reef
passes through untouched; anywhere else Reef would use that text literally, so it is refused here.
What the values must be is declared in ``harness.settings.run_settings``; this module only produces
them.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.settings import bounded_yaml

#: Reef 0.1.3's environment reference: ``${VAR}`` or ``${VAR:?}``.
_ENV_REFERENCE = re.compile(r"\$\{(\w+)(:\?)?\}")
#: The harness-only default form ``${VAR:-default}``.
_DEFAULT_REFERENCE = re.compile(r"\$\{(\w+):-([^}]*)\}")
#: A reference to another setting, ``${section.key...}``.
_CONFIG_REFERENCE = re.compile(r"\$\{([\w.-]+)\}")
#: The section whose values only the harness reads (and where ``:-`` defaults are allowed).
HARNESS_SECTION = ("training", "config", "harness")
#: Frozen-guidance mode (serve-frozen.yaml): the run settings, a setting of the record-only
#: recipe that only the harness reads, and their harness part (``:-`` defaults allowed there).
FROZEN_SECTION = ("recipe", "config", "guidance-ttt")
FROZEN_HARNESS_SECTION = ("recipe", "config", "guidance_ttt", "harness")


class RunSettingsError(ValueError):
    """``serve.yaml`` is missing a setting, has a wrong value, or disagrees with itself."""


def expand_defaults(value: Any, environ: Mapping[str, str]) -> Any:
    """``${VAR:-default}`` in a string (or in the strings of a mapping or list) expanded."""
    if isinstance(value, Mapping):
        return {key: expand_defaults(item, environ) for key, item in value.items()}
    if isinstance(value, list):
        return [expand_defaults(item, environ) for item in value]
    if not isinstance(value, str):
        return value
    return _DEFAULT_REFERENCE.sub(
        lambda match: environ.get(match.group(1), "").strip() or match.group(2), value
    )


class ServeDocument:
    """``serve.yaml`` with environment references expanded and ``${dotted.path}`` lookups."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.data = data

    @classmethod
    def read(cls, path: Path, environ: Mapping[str, str]) -> ServeDocument:
        """Load the YAML, its aliases and size bounded (`harness.settings.bounded_yaml`); expand
        ``${VAR}``, ``${VAR:?}`` and (harness section only) ``:-``."""
        try:
            loaded = bounded_yaml.read(path)
        except OSError as exc:
            raise RunSettingsError(f"cannot read {path}: {exc.strerror}") from exc
        except bounded_yaml.YamlRefused as exc:
            raise RunSettingsError(str(exc)) from None
        if not isinstance(loaded, dict):
            raise RunSettingsError(f"{path} must hold a YAML mapping at the top level")
        values = {**environ}
        values.setdefault("REEF_PYTHON", sys.executable)
        missing: dict[str, list[str]] = {}
        data = _expand_environment(loaded, values, missing, ())
        if missing:
            listed = "; ".join(f"{name} (at {', '.join(where)})" for name, where in missing.items())
            raise RunSettingsError(
                f"{path}: required environment variables are missing or empty: {listed}; "
                "set them before starting the run"
            )
        return cls(data)

    def raw(self, *path: str) -> Any:
        """The value at a public path (``-`` and ``_`` spellings agree), references unresolved."""
        return _lookup(self.data, path)

    def get(self, *path: str, default: Any = None) -> Any:
        """The value at a public path, references resolved; ``default`` when it is not set."""
        value = _lookup(self.data, path)
        return default if value is None else self.resolve(value, ".".join(path))

    def resolve(self, value: Any, where: str) -> Any:
        """Expand ``${dotted.path}`` references in a string value (Reef's second pass)."""
        if not isinstance(value, str):
            return value
        seen: set[str] = set()
        for _ in range(64):
            whole = _CONFIG_REFERENCE.fullmatch(value.strip())
            if whole is not None:
                # A value that is only a reference takes the referenced value's type.
                target = _lookup(self.data, tuple(whole.group(1).split(".")))
                if target is None:
                    raise RunSettingsError(
                        f"{where} refers to ${{{whole.group(1)}}}, which is not set"
                    )
                if not isinstance(target, str):
                    return target
                expanded = target
            else:
                expanded = _CONFIG_REFERENCE.sub(lambda match: self._text(match, where), value)
            if expanded == value:
                return value
            if expanded in seen:
                raise RunSettingsError(f"{where}: cyclic reference in {value!r}")
            seen.add(value)
            value = expanded
        raise RunSettingsError(f"{where}: references nest more than 64 levels")

    def resolve_all(self, value: Any, where: str) -> Any:
        """:meth:`resolve` applied to every string of a mapping or list (keys kept as written)."""
        if isinstance(value, Mapping):
            return {key: self.resolve_all(item, f"{where}.{key}") for key, item in value.items()}
        if isinstance(value, list):
            return [self.resolve_all(item, f"{where}.{index}") for index, item in enumerate(value)]
        return self.resolve(value, where)

    def _text(self, match: re.Match[str], where: str) -> str:
        target = _lookup(self.data, tuple(match.group(1).split(".")))
        if target is None:
            raise RunSettingsError(f"{where} refers to ${{{match.group(1)}}}, which is not set")
        return str(target)


#: What an unset model variable reads as in an estimate (`estimate_environment`).
UNSET = "unset:"


def estimate_environment(
    path: Path, environ: Mapping[str, str]
) -> tuple[dict[str, str], list[str]]:
    """The environment a settings file is read with for `guidance-ttt estimate`, which calls
    no endpoint: `environ` plus a stand-in for every required variable (`${VAR:?}` in a value)
    that is unset — a loopback URL nothing is sent to for `..._URL`, `unset:VAR` otherwise —
    and the names of those variables. A file that cannot be read is left to `ServeDocument`."""
    try:
        document = bounded_yaml.read(Path(path))
    except (OSError, bounded_yaml.YamlRefused):
        return dict(environ), []
    values = dict(environ)
    required = {
        match.group(1)
        for text in _strings(document)
        for match in _ENV_REFERENCE.finditer(text)
        if match.group(2)
    }
    unset = sorted(name for name in required if not values.get(name, "").strip())
    for name in unset:
        values[name] = "http://127.0.0.1:9" if name.endswith("_URL") else UNSET + name
    return values, unset


def _strings(node: Any) -> list[str]:
    """Every string value of a YAML document (comments are not values)."""
    if isinstance(node, Mapping):
        return [text for value in node.values() for text in _strings(value)]
    if isinstance(node, list):
        return [text for value in node for text in _strings(value)]
    return [node] if isinstance(node, str) else []


def _expand_environment(
    node: Any, environ: Mapping[str, str], missing: dict[str, list[str]], path: tuple[str, ...]
) -> Any:
    if isinstance(node, dict):
        return {
            key: _expand_environment(value, environ, missing, (*path, str(key)))
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [
            _expand_environment(item, environ, missing, (*path, str(index)))
            for index, item in enumerate(node)
        ]
    if not isinstance(node, str):
        return node
    where = ".".join(path)
    if _DEFAULT_REFERENCE.search(node):
        normalized = tuple(part.replace("-", "_") for part in path)
        if normalized[: len(HARNESS_SECTION)] != HARNESS_SECTION and (
            normalized[: len(FROZEN_HARNESS_SECTION)] != FROZEN_HARNESS_SECTION
        ):
            raise RunSettingsError(
                f"{where} uses ${{VAR:-default}}, which Reef 0.1.3 does not expand (it would use "
                f"the text literally); use ${{VAR}} or ${{VAR:?}} there, or move the setting "
                f"under {'.'.join(HARNESS_SECTION)}"
            )
        node = expand_defaults(node, environ)

    def replace(match: re.Match[str]) -> str:
        value = environ.get(match.group(1), "")
        if match.group(2) and not value.strip():
            missing.setdefault(match.group(1), []).append(where)
        return value

    return _ENV_REFERENCE.sub(replace, node)


def _lookup(data: Any, path: tuple[str, ...]) -> Any:
    node = data
    for index, part in enumerate(path):
        if not isinstance(node, Mapping):
            return None
        spellings = [
            name
            for name in dict.fromkeys((part, part.replace("_", "-"), part.replace("-", "_")))
            if name in node
        ]
        if len(spellings) > 1:
            raise RunSettingsError(
                f"serve.yaml spells {'.'.join(path[: index + 1])} twice ({spellings})"
            )
        if not spellings:
            return None
        node = node[spellings[0]]
    return node
