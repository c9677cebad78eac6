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


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Modules with a test marked slow (real stacks, full runs, clusters) first, each group in
    pytest-randomly's shuffled order: ./test.sh hands whole modules to its workers in this
    order (`--dist loadfile --no-loadscope-reorder`), so the long ones start early and the
    short ones fill the end, instead of a long module starting last on one worker while the
    other waits."""
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow)  # stable: keeps the shuffle within
