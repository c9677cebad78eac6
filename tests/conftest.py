"""Suite-wide fixtures."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# The shared helpers (judge_fakes, archive_builders, ...) live in tests/, beside this file;
# the tests live one folder down, by the package they test (tests/harness, tests/tttd), and
# import the helpers by bare name or as tests.<name>. The judge's own tests are judges/tests.
sys.path.insert(0, str(Path(__file__).parent))


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
