"""A repeatable flag of `NAME=VALUE` settings, each stored as an argument of its own.

    --limit max-queue=8 --limit body-timeout=5
    --ray-option resource=judge --ray-option label=pool=judge

Related settings that few operators change share one flag (the judge's `--help` stays short)
instead of a flag each. Every name has a destination on the parsed arguments, a converter and a
default, so the service reads `args.max_queue` as if it were a flag of its own. An unknown
name, a missing `=` or a value the converter refuses ends the parse with a one-line error
that names the value and the names known.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Named:
    """One setting of a named-values flag: where it is stored, how it is read, its default."""

    dest: str
    convert: Callable[[str], Any]
    default: Any
    help: str
    metavar: str = "N"
    shown: str | None = None  # the default as the help says it, where the value says too little


def add_named_flag(
    parser: argparse.ArgumentParser, flag: str, names: dict[str, Named], help: str
) -> None:
    """Add `flag NAME=VALUE` (repeatable) setting the arguments `names` describe; each name's
    default is set on the parser and listed in the flag's help."""
    listed = "; ".join(
        f"{name}={item.metavar}: {item.help} (default: {item.shown or _shown(item.default)})"
        for name, item in names.items()
    )
    parser.add_argument(
        flag,
        action=_NamedValues,
        names=names,
        metavar="NAME=VALUE",
        help=f"{help} (repeatable). {listed}",
    )
    parser.set_defaults(**{item.dest: item.default for item in names.values()})


def _shown(value: Any) -> str:
    return "none" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


class _NamedValues(argparse.Action):
    def __init__(
        self, option_strings: Sequence[str], dest: str, names: dict[str, Named], **kwargs: Any
    ) -> None:
        self.names = names
        super().__init__(option_strings, argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        name, equals, text = str(values).partition("=")
        known = ", ".join(self.names)
        if not equals or name not in self.names:
            parser.error(f"{option_string} {values}: expected NAME=VALUE with NAME one of {known}")
        item = self.names[name]
        try:
            value = item.convert(text)
        except ValueError as error:
            parser.error(f"{option_string} {values}: {name} takes {item.metavar} ({error})")
        setattr(namespace, item.dest, value)
