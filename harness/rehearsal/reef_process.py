"""A real ``reef serve`` on loopback in front of a scripted OpenAI-compatible upstream, for the
rehearsal and the tests (``tests.reef_fixtures``).

The process itself is ``harness.adapters.reef.process``; this module adds the stand-in: without
``upstream`` or ``config``, ``running_reef`` starts a fresh :class:`OpenAIFixture` (the scripted
guidance model) for Reef to proxy to, and stops it after Reef.

    with running_reef(workdir) as reef:
        response = httpx.post(reef.url + "/v1/chat/completions", headers=reef.headers(), ...)

Nothing here needs a GPU. Startup takes a few seconds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.adapters.reef import process
from harness.adapters.reef.process import (
    DEFAULT_TOKEN,
    RECORD_ONLY_RECIPE,
    ReefService,
    free_port,
    reef_executable,
)
from harness.rehearsal.openai_server import OpenAIFixture

__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_TOKEN",
    "RECORD_ONLY_RECIPE",
    "ReefService",
    "free_port",
    "reef_executable",
    "running_reef",
]

#: The scripted upstream's model name.
DEFAULT_MODEL = "fixture-model"


@contextlib.contextmanager
def running_reef(
    workdir: Path, *, upstream: OpenAIFixture | None = None, **options: Any
) -> Iterator[ReefService]:
    """``harness.adapters.reef.process.running_reef`` (same options), with a fresh scripted
    upstream when neither ``upstream`` nor ``config`` is given."""
    own = upstream is None and options.get("config") is None
    fixture = OpenAIFixture(model=DEFAULT_MODEL).start() if own else upstream
    try:
        with process.running_reef(workdir, upstream=fixture, **options) as service:
            yield service
    finally:
        if own and fixture is not None:
            fixture.stop()
