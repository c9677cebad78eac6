"""Suite-wide fixtures."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _environment_restored() -> Iterator[None]:
    """Every test ends with the process environment it started with. Code under test may set
    variables for its children (run.py's episode exports GUIDANCE_TTT_SERVE_YAML, the judge URL
    and the task directory, as a real run does); left behind, they would point later tests'
    subprocesses at another test's deleted files."""
    saved = dict(os.environ)
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)
