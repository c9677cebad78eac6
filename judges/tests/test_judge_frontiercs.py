"""The local judge serves FrontierCS problems of every kind and scores them by FrontierCS's rule.

The judge is started on `../shared/data/frontiercs` (a FrontierCS `algorithmic/` copy: problems
0, 1, 5 and 10 and testlib.h; the test skips when it is absent). Each problem gets several
programs: valid, partially valid and invalid. Every case the judge reports is re-checked here
by an independent oracle: FrontierCS's own checker, compiled by this test with plain g++ and run
on the output the judge recorded; the rule is then applied as FrontierCS's orchestrator does
(`Ratio: <x>` in the checker message, else 1 when the checker exits 0, else 0; the score is
100 x the mean ratio). For problem 0 the judge uses its built-in Python checker (the fast path):
this is the test that it agrees with `chk.cc` on every public case for several programs.
"""

from __future__ import annotations

import math
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from judges.service.process import JudgeProcess

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "frontiercs"
PROBLEMS = SHARED / "problems"
PROGRAMS = Path(__file__).parent / "programs"
RATIO = re.compile(r"Ratio: ([\d.]+)")
# The whole output of every case is kept (the oracle re-checks it), not the default 4 KiB prefix.
JUDGE_FLAGS = ("--frontiercs", str(SHARED), "--workers", "2")
JUDGE_FLAGS += ("--limit", f"output-field-bytes={1 << 24}")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (PROBLEMS / "1" / "chk.cc").is_file(),
        reason="FrontierCS test data ../shared/data/frontiercs is absent",
    ),
]

SUBMISSIONS = {
    "0": ["skyline_packer", "shelf_packer", "frontiercs/polyomino_pile"],
    "1": [
        "frontiercs/treasure_climb",
        "frontiercs/treasure_greedy",
        "frontiercs/treasure_nothing",
        "frontiercs/treasure_everything",
    ],
    "5": [
        "frontiercs/hamiltonian_greedy",
        "frontiercs/hamiltonian_single",
        "frontiercs/hamiltonian_repeat",
    ],
    "10": ["frontiercs/tree_distance", "frontiercs/tree_distance_wrong"],
}


def judge(url: str, pid: str, source: str) -> dict[str, Any]:
    reply = httpx.post(
        f"{url}/submit",
        data={"pid": pid, "lang": "cpp"},
        files={"code": ("solution.cpp", source.encode(), "text/x-c++src")},
        timeout=30,
    )
    reply.raise_for_status()
    sid = reply.json()["sid"]
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        answer = httpx.get(f"{url}/result/{sid}", timeout=30).json()
        if answer["status"] != "queued":
            return answer
        time.sleep(0.5)
    raise AssertionError(f"submission {sid} to problem {pid} did not finish")


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, str], Any]]:
    state = tmp_path_factory.mktemp("judge")
    with JudgeProcess(state, *JUDGE_FLAGS) as process:
        answers = {}
        for pid, names in SUBMISSIONS.items():
            for name in names:
                answers[pid, name] = judge(process.url, pid, (PROGRAMS / f"{name}.cpp").read_text())
    # The same state directory after a restart: the checker comes from the on-disk cache.
    with JudgeProcess(state, *JUDGE_FLAGS) as process:
        source = (PROGRAMS / "frontiercs" / "treasure_nothing.cpp").read_text()
        # One byte more, so it is judged again rather than answered from the verdict cache.
        answers["restart"] = judge(process.url, "1", source + "\n")
    yield answers


@pytest.fixture(scope="module")
def checkers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """FrontierCS's checkers compiled by the test itself: the oracle shares no code with us.
    Unoptimised (-O0): a third of -O2's compile time, and the few small cases run at once."""
    build = tmp_path_factory.mktemp("oracle")
    binaries = {}
    for pid in ("0", "1", "5"):
        binary = build / f"chk{pid}"
        subprocess.run(
            [
                "g++",
                str(PROBLEMS / pid / "chk.cc"),
                "-O0",
                "-pipe",
                "-std=gnu++17",
                "-I",
                str(SHARED / "include"),
                "-o",
                str(binary),
            ],
            check=True,
            timeout=600,
        )
        binaries[pid] = binary
    return binaries


def oracle(checker: Path, pid: str, number: int, output: str, tmp: Path) -> tuple[str, float]:
    """(checker message, ratio) by FrontierCS's rule, for one recorded output."""
    out = tmp / "out.txt"
    out.write_text(output)
    data = PROBLEMS / pid / "testdata"
    answer = data / f"{number}.ans"
    run = subprocess.run(
        [str(checker), str(data / f"{number}.in"), str(out), str(answer)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    message = run.stdout or run.stderr
    found = RATIO.search(message)
    ratio = float(found.group(1)) if found else (1.0 if run.returncode == 0 else 0.0)
    return message.strip(), ratio


@pytest.mark.parametrize(
    ("pid", "name"), [(pid, name) for pid in ("0", "1", "5") for name in SUBMISSIONS[pid]]
)
def test_every_case_scores_by_the_frontiercs_rule(
    results: dict, checkers: dict[str, Path], pid: str, name: str, tmp_path: Path
) -> None:
    answer = results[pid, name]
    assert answer["status"] == "done", answer
    assert answer["suite"]["comparableToFrontierCS"] is True
    ratios = []
    for number, case in enumerate(answer["cases"], start=1):
        if case["runStatus"] != "Accepted":
            pytest.fail(f"problem {pid} {name} case {number}: run failed: {case['msg']}")
        assert not case["outputTruncated"], "the oracle needs the whole output"
        message, ratio = oracle(checkers[pid], pid, number, case["output"], tmp_path)
        assert case["msg"].strip() == message, f"case {number}"
        assert case["scoreRatio"] == ratio, f"case {number}: {message}"
        ratios.append(ratio)
    assert math.isclose(answer["score"], 100 * sum(ratios) / len(ratios), abs_tol=1e-9)


def test_programs_cover_valid_partial_and_invalid_answers(results: dict) -> None:
    for pid in ("0", "1", "5"):
        scores = [results[pid, name]["score"] for name in SUBMISSIONS[pid]]
        assert max(scores) > 0, f"problem {pid}: no program scored"
        assert min(scores) == 0, f"problem {pid}: no invalid program"
        verdicts = {
            case["msg"].split()[0]
            for name in SUBMISSIONS[pid]
            for case in results[pid, name]["cases"]
        }
        assert "points" in verdicts or "ok" in verdicts
        rejected = [
            case
            for name in SUBMISSIONS[pid]
            for case in results[pid, name]["cases"]
            if case["scoreRatio"] == 0
            and (case["msg"].split()[0] in ("wrong", "FAIL") or "Invalid" in case["msg"])
        ]
        assert rejected, f"problem {pid}: no rejected output ({verdicts})"
    partial = [results["1", name]["score"] for name in SUBMISSIONS["1"]]
    assert any(0 < score < 100 for score in partial), partial


def test_interactor_accepts_a_correct_program(results: dict) -> None:
    answer = results["10", "frontiercs/tree_distance"]
    assert answer["status"] == "done"
    for case in answer["cases"]:
        assert case["runStatus"] == "Accepted"
        assert case["msg"].startswith("points "), case["msg"]
        assert case["scoreRatio"] > 0.9
    assert answer["score"] > 90


def test_interactor_rejects_a_wrong_answer(results: dict) -> None:
    answer = results["10", "frontiercs/tree_distance_wrong"]
    assert answer["status"] == "done"
    assert answer["score"] == 0
    for case in answer["cases"]:
        assert case["msg"].startswith("wrong answer Error is test 1"), case["msg"]
        assert case["scoreRatio"] == 0 and case["ok"] is False


def test_checkers_compile_once_and_a_restart_reuses_them(results: dict, tmp_path: Path) -> None:
    origins = [results["1", name]["timing"]["checkerCache"] for name in SUBMISSIONS["1"]]
    assert origins[0] == "compiled" and set(origins[1:]) == {"memory"}
    assert results["0", "skyline_packer"]["timing"]["checkerCache"] == "none"  # the fast path
    assert results["restart"]["timing"]["checkerCache"] == "disk"
    assert results["restart"]["score"] == results["1", "frontiercs/treasure_nothing"]["score"]
