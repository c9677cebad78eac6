"""Print pip's package-source settings as `uv pip install` arguments, one per line.

    .venv/bin/python scripts/pip_config_for_uv.py

scripts/setup.sh installs with uv, which reads no pip configuration; this hands it what pip
would use: `index-url`, `extra-index-url`, `find-links`, `constraint` and `no-index`, from
`pip config list` (the configuration files and the PIP_* variables), the environment's value
before the `install` section's before the `global` one's, as pip takes them.
"""

from __future__ import annotations

import shlex
import subprocess
import sys

#: pip's name -> uv's option; the multi-valued ones hold space-separated values
OPTIONS = {
    "index-url": "--index-url",
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "constraint": "--constraint",
}
PRECEDENCE = (":env:", "install", "global")  # the first that sets a name wins, as in pip


def pip_settings(listing: str) -> dict[str, str]:
    """`pip config list` lines (`section.name='value'`) -> name -> the winning value."""
    found: dict[tuple[str, str], str] = {}
    for line in listing.splitlines():
        key, sep, value = line.partition("=")
        section, dot, name = key.rpartition(".")
        if sep and dot:
            found[section, name] = " ".join(shlex.split(value))
    settings = {}
    for name in (*OPTIONS, "no-index"):
        for section in PRECEDENCE:
            if (section, name) in found:
                settings[name] = found[section, name]
                break
    return settings


def uv_arguments(settings: dict[str, str]) -> list[str]:
    arguments = []
    for name, option in OPTIONS.items():
        for value in settings.get(name, "").split():
            arguments += [option, value]
    if settings.get("no-index", "").lower() in ("1", "true", "yes", "on"):
        arguments.append("--no-index")
    return arguments


def main() -> int:
    listing = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for argument in uv_arguments(pip_settings(listing)):
        print(argument)
    return 0


if __name__ == "__main__":
    sys.exit(main())
