"""A metadata hook that stops `pip install` on an interpreter older than the project needs, in
one line, before pip's resolver looks at a single dependency (hatchling loads this file while
pip prepares the project's metadata, with the interpreter that is being installed into).
Without it, pip on Python 3.11 reports `No matching distribution found for harbor==0.20.0`
after hundreds of version numbers instead of the version the project needs."""

from __future__ import annotations

import sys

NEEDED = (3, 12)

if sys.version_info < NEEDED:
    found = ".".join(map(str, sys.version_info[:3]))
    sys.stderr.write(
        f"guidance-ttt needs Python >= {NEEDED[0]}.{NEEDED[1]} (this pip runs Python {found}): "
        "install Python 3.12 or newer and use its pip, or let ./run.sh set it up\n"
    )
    raise SystemExit(1)

from hatchling.metadata.plugin.interface import MetadataHookInterface  # noqa: E402 (after the check)


class PythonVersionHook(MetadataHookInterface):
    """Nothing to change in the metadata: the check above runs when hatchling loads the file."""

    def update(self, metadata: dict) -> None:
        return None
