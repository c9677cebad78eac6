"""Where the judge's access log goes: a file in its state directory unless asked otherwise.

aiohttp logs one line per request on the `judges.access` logger. A judge started in the
background of a terminal (`guidance-ttt judge ... &`, the README's first step) would print
every `POST /submit` and `GET /result` poll over the user's shell, so by default the lines go
to `<state-dir>/access.log`; `--access-log -` sends them to stderr with the other log lines,
`--access-log PATH` to a file of the operator's choice. The file is opened for appending with
`O_NOFOLLOW` (a link planted in its place is refused, not written through).
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

ACCESS_LOGGER = "judges.access"
ACCESS_FILE = "access.log"
FORMAT = "%(asctime)s %(message)s"


def add_access_log_argument(parser: argparse.ArgumentParser) -> None:
    """The `--access-log` flag."""
    parser.add_argument(
        "--access-log",
        metavar="PATH",
        help=f"where the per-request access lines go: a file, or - for stderr (default: "
        f"<state-dir>/{ACCESS_FILE}, so a judge in the background keeps the terminal quiet)",
    )


def route_access_log(choice: str | None, state_dir: Path) -> Path | None:
    """Send the `judges.access` lines to `choice` (None: `<state_dir>/access.log`; `-`:
    stderr); returns the file written, None for stderr. `OSError` naming the file when it
    cannot be opened."""
    logger = logging.getLogger(ACCESS_LOGGER)
    for old in list(logger.handlers):
        logger.removeHandler(old)
        old.close()
    if choice == "-":
        logger.propagate = True  # to the root handler on stderr, as every other log line
        return None
    path = Path(choice) if choice else Path(state_dir) / ACCESS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise OSError(f"--access-log {path}: cannot open it ({exc.strerror})") from exc
    handler = logging.StreamHandler(os.fdopen(fd, "a", encoding="utf-8", buffering=1))
    handler.setFormatter(logging.Formatter(FORMAT))
    logger.addHandler(handler)
    logger.propagate = False
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)
    return path


__all__ = ["ACCESS_FILE", "add_access_log_argument", "route_access_log"]
