"""Fixtures of the judge's own tests (the judge distribution, judges/README.md).

They need nothing of the recipe: no `harness`, no `tttd`, nothing of its test tree `tests/`
(test_judge_distribution.py holds that). The helpers (gpu_judge_support, cgroup_support) and the
candidate programs (programs/) live here, beside this file, and the tests import the helpers
by bare name.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(autouse=True)
def _judge_environment_restored() -> Iterator[None]:
    """Every judge test ends with the process environment it started with: a variable a test
    sets for the judge it starts (the token, a test mode) must not reach a later test's judge."""
    saved = dict(os.environ)
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)
