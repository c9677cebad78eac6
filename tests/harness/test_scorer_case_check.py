"""The Polyomino task's case check (harbor/polyomino_packing/tests/score_check.py), loaded the way
the harness loads it: by file path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from judge_fakes import checker_case, failed_run_case

from harness.adapters.judge.verdict import SCORE_CHECK_PATH, load_case_check

CHECK = load_case_check(
    Path(__file__).resolve().parents[2] / "harbor/polyomino_packing" / SCORE_CHECK_PATH
)


@pytest.mark.parametrize(
    "cells, width, height", [(400, 25, 20), (9, 3, 3), (7, 1, 10), (57, 4_000_000_000_000, 1)]
)
def test_checker_verdicts_are_accepted(cells: int, width: int, height: int) -> None:
    assert CHECK(checker_case(cells, width, height)) is None


def test_zero_ratio_needs_no_provenance() -> None:
    assert CHECK(failed_run_case("Segmentation fault", status="Runtime Error")) is None
    assert CHECK({"scoreRatio": 0, "msg": None}) is None


def test_stderr_ratio_is_not_a_checker_verdict() -> None:
    problem = CHECK(failed_run_case("Ratio: 1.0"))
    assert problem is not None and "does not come from a checker verdict" in problem


def test_checker_line_copied_to_stderr_fails_for_lack_of_output() -> None:
    forged = failed_run_case("points 0.5 Ratio: 0.500000000 (cells=50, W=10, H=10, area=100)")
    assert "no program output" in CHECK(forged)


def _tampered(**changes: Any) -> dict[str, Any]:
    return {**checker_case(400, 25, 20), **changes}


@pytest.mark.parametrize(
    "case, expected",
    [
        (_tampered(scoreRatio=0.9), "scoreRatio 0.9 differs"),
        (
            _tampered(msg="points 0.8 Ratio: 0.800000000 (cells=400, W=25, H=20, area=501)"),
            "area=501",
        ),
        (
            _tampered(msg="points 0.8 Ratio: 0.900000000 (cells=400, W=25, H=20, area=500)"),
            "checker ratio",
        ),
        (
            _tampered(msg="points 0.7 Ratio: 0.800000000 (cells=400, W=25, H=20, area=500)"),
            "checker points",
        ),
        (
            _tampered(msg="points 1.0 Ratio: 1.000000000 (cells=900, W=25, H=20, area=500)"),
            "900 cells",
        ),
        (_tampered(output="20 25\n"), "output starts '20 25"),
        (_tampered(output=""), "output starts ''"),
        (_tampered(msg="points 0.8 Ratio: nan (cells=400, W=25, H=20, area=500)"), "checker ratio"),
    ],
)
def test_tampered_verdicts_name_the_inconsistency(case: dict[str, Any], expected: str) -> None:
    problem = CHECK(case)
    assert problem is not None and expected in problem


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=80),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(
    ratio=JSON | st.floats(min_value=0.0, max_value=1.0),
    msg=JSON
    | st.from_regex(r"points \S+ Ratio: \S+ \(cells=\d+, W=\d+, H=\d+, area=\d+\)", fullmatch=True),
    output=JSON,
)
def test_check_never_raises_on_any_json_values(ratio: Any, msg: Any, output: Any) -> None:
    result = CHECK({"scoreRatio": ratio, "msg": msg, "output": output})
    assert result is None or isinstance(result, str)
