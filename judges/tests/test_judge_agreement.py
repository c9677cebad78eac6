"""The local judge agrees with the FrontierCS rules on all 70 public Polyomino cases.

The judge serves `../shared/data/frontiercs-p0` laid out as a FrontierCS problem package (the
real limits: 2 s, 256 MiB) and judges two different valid packers. Every case is then re-judged
here by an independent oracle written straight from the rules (judges/README.md, "The Polyomino
checker") — a naive cell set, no shared code with the judge — which also rebuilds the checker's
exact `msg` text. Validity, message and ratio must agree on every case, and the score must be
100 x the mean ratio.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from judges.service.process import JudgeProcess

SHARED = Path(__file__).resolve().parents[3] / "shared"
PUBLIC_CASES = SHARED / "data" / "frontiercs-p0"
PROGRAMS = Path(__file__).parent / "programs"
CASES = 70

pytestmark = pytest.mark.slow


def oracle(input_text: str, output_text: str) -> tuple[bool, str, float]:
    """(valid, expected msg, ratio) for one case, from the problem rules alone."""
    numbers = iter(int(token) for token in input_text.split())
    pieces = []
    for _ in range(next(numbers)):
        pieces.append([(next(numbers), next(numbers)) for _ in range(next(numbers))])
    tokens = [int(token) for token in output_text.split()]
    if len(tokens) != 2 + 4 * len(pieces):
        return False, "", 0.0
    width, height = tokens[0], tokens[1]
    taken: set[tuple[int, int]] = set()
    for index, piece in enumerate(pieces):
        x0, y0, turns, flip = tokens[2 + 4 * index : 6 + 4 * index]
        if turns not in range(4) or flip not in (0, 1):
            return False, "", 0.0
        for x, y in piece:
            if flip:
                x = -x  # reflect across the y-axis first
            for _ in range(turns):
                x, y = y, -x  # one clockwise quarter turn
            cell = (x + x0, y + y0)
            if not (0 <= cell[0] < width and 0 <= cell[1] < height) or cell in taken:
                return False, "", 0.0
            taken.add(cell)
    cells = len(taken)
    ratio = cells / (width * height)
    points = f"{ratio:.10f}".rstrip("0")
    points += "0" if points.endswith(".") else ""
    area = width * height
    message = (
        f"points {points} Ratio: {ratio:.9f} (cells={cells}, W={width}, H={height}, area={area})\n"
    )
    return True, message, ratio


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JudgeProcess]:
    if not all((PUBLIC_CASES / f"{case}.in").is_file() for case in range(1, CASES + 1)):
        pytest.skip(f"the 70 public FrontierCS cases are not in {PUBLIC_CASES} (../shared absent)")
    root = tmp_path_factory.mktemp("frontiercs-layout")
    problem = root / "problems" / "0"
    (problem / "testdata").mkdir(parents=True)
    for case in range(1, CASES + 1):  # copied: the judge serves no link out of a package
        shutil.copyfile(PUBLIC_CASES / f"{case}.in", problem / "testdata" / f"{case}.in")
    (problem / "config.yaml").write_text(
        "type: default\nchecker: chk.cc\ntime: 2s\nmemory: 256m\n"
        f"subtasks:\n- score: 100\n  n_cases: {CASES}\n"
    )
    args = ["--problems", str(root / "problems"), "--limit", f"output-field-bytes={1 << 20}"]
    with JudgeProcess(root / "state", *args) as running:  # whole outputs, for the oracle
        yield running


@pytest.fixture(scope="module")
def results(judge: JudgeProcess) -> dict[str, dict[str, Any]]:
    """Both packers, each judged once on the 70 cases."""
    return {
        program: judged(judge, program) for program in ("shelf_packer.cpp", "skyline_packer.cpp")
    }


def judged(judge: JudgeProcess, program: str) -> dict[str, Any]:
    answer = httpx.post(
        f"{judge.url}/submit",
        data={"pid": "0", "lang": "cpp"},
        files={"code": ("solution.cpp", (PROGRAMS / program).read_bytes(), "text/x-c++src")},
        timeout=30,
    )
    sid = answer.json()["sid"]
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        result = httpx.get(f"{judge.url}/result/{sid}", timeout=10).json()
        if result["status"] != "queued":
            return result
        time.sleep(0.5)
    raise AssertionError(f"{program} not judged in time")


@pytest.mark.parametrize("program", ["shelf_packer.cpp", "skyline_packer.cpp"])
def test_every_public_case_agrees_with_the_rules(results: dict, program: str) -> None:
    result = results[program]
    assert result["status"] == "done", result
    assert result["suite"]["kind"] == "package"
    assert len(result["cases"]) == CASES
    ratios = []
    for number, case in enumerate(result["cases"], start=1):
        valid, message, ratio = oracle((PUBLIC_CASES / f"{number}.in").read_text(), case["output"])
        assert valid, f"case {number}: the oracle finds {program}'s output invalid"
        assert case["runStatus"] == "Accepted"
        assert case["msg"] == message, f"case {number}"
        assert case["scoreRatio"] == pytest.approx(ratio, abs=1e-9)
        assert case["scoreRatio"] == float(f"{ratio:.9f}")  # read back from the printed ratio
        ratios.append(case["scoreRatio"])
    assert result["score"] == pytest.approx(100 * sum(ratios) / CASES, abs=1e-9)


def test_the_two_packers_really_differ(results: dict) -> None:
    shelf, skyline = results["shelf_packer.cpp"], results["skyline_packer.cpp"]
    assert skyline["score"] > shelf["score"] + 10
    flips = sum(line.split()[3] == "1" for line in skyline["cases"][0]["output"].splitlines()[1:])
    assert flips > 0  # the skyline packer exercises reflections on real cases
