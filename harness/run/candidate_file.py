"""Writing the run's best candidate into the Harbor task environment, as the reference does.

The reference's agent writes the program with one `environment.exec` of a `cat` here-document
(`cat > <path> <<'REEF_GUIDANCE_EOF'`), and fails when the command's exit status is not 0; its
test's fake environment offers `exec` and nothing else. This module keeps that path, with two
guards for a program the run does not trust:

* the here-document's delimiter is the reference's unless a line of the program is exactly that
  word (which would end the document early and run the rest as shell commands); then a longer
  one that no line equals is chosen;
* a command longer than `EXEC_COMMAND_LIMIT` bytes (a single argument of `bash -c` may not
  exceed 128 KiB on Linux) is not sent through `exec`: the file is uploaded with
  `upload_file` instead (docs/differences.md, row 67).

Only `exec` (and, for an over-long program, `upload_file`) is called, so any Harbor environment
works; nothing here imports `harbor`.
"""

from __future__ import annotations

import secrets
import shlex
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

__all__ = ["DELIMITER", "EXEC_COMMAND_LIMIT", "here_document", "write_candidate"]

#: The reference's here-document delimiter.
DELIMITER = "REEF_GUIDANCE_EOF"
#: The longest command sent through `exec`, in bytes (Linux's MAX_ARG_STRLEN is 131072).
EXEC_COMMAND_LIMIT = 100_000


def here_document(target: str, program: str) -> str:
    """The shell command that creates `target`'s directory and writes `program` plus a final
    newline to it, through a quoted here-document (no expansion inside)."""
    lines = set(program.split("\n"))
    delimiter = DELIMITER
    while delimiter in lines:
        delimiter = f"{DELIMITER}_{secrets.token_hex(8)}"
    parent = shlex.quote(str(PurePosixPath(target).parent))
    return (
        f"mkdir -p {parent} && cat > {shlex.quote(target)} <<'{delimiter}'\n{program}\n{delimiter}"
    )


async def write_candidate(environment: Any, target: str, program: str) -> None:
    """Write `program` (plus a final newline) to `target` in the environment: one `exec` of a
    here-document, or an `upload_file` when the command would be too long. Raises RuntimeError
    naming the path and the environment's stderr when the write fails."""
    command = here_document(target, program)
    if len(command.encode("utf-8")) <= EXEC_COMMAND_LIMIT:
        result = await environment.exec(command)
        if result.return_code != 0:
            raise RuntimeError(
                f"writing {target} in the task environment failed "
                f"(exit {result.return_code}): {(result.stderr or '').strip()[:500]}"
            )
        return
    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch) / PurePosixPath(target).name
        source.write_text(program + "\n", encoding="utf-8")
        await environment.exec(f"mkdir -p {shlex.quote(str(PurePosixPath(target).parent))}")
        await environment.upload_file(source, target)
