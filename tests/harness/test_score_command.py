"""`guidance-ttt score FILE`: one program through the real local judge, as the user runs it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from judge_fakes import LocalJudge, closed_port_url

from harness.rehearsal.stand_ins import VARIANTS, seed_source, task_dir

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalJudge]:
    root = tmp_path_factory.mktemp("score")
    with LocalJudge(root / "judge", "--generated-cases", "2", "--seed", "11") as running:
        yield running


def score(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli.entry", "score", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=200,
    )


def test_seed_prints_its_cases_score_and_suite(judge: LocalJudge) -> None:
    seed = task_dir() / "solution" / "solution.cpp"
    done = score(str(seed), "--task", str(task_dir()), "--judge-url", judge.url)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    rows = [line.split() for line in lines if line.strip()[:1] in ("1", "2")]
    assert [row[0] for row in rows] == ["1", "2"] and all(row[2] == "yes" for row in rows)
    mean = 100 * sum(float(row[1]) for row in rows) / 2
    # The generated suite is labelled as what it is, not as a FrontierCS score.
    (result,) = [line for line in lines if "not comparable to FrontierCS" in line]
    assert f"score on generated:11:2 (not comparable to FrontierCS) {mean:.4f} (valid)" in result
    assert "FrontierCS score" not in done.stdout
    assert f"suite: generated:11:2 (judge {judge.url}, problem 0)" in done.stdout


def test_a_program_that_does_not_compile_exits_one_with_its_verdict(
    judge: LocalJudge, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.cpp"
    broken.write_text(VARIANTS["broken"](seed_source()))
    done = score(str(broken), "--judge-url", judge.url)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "score on generated:11:2 (not comparable to FrontierCS) -- (invalid)" in done.stdout
    assert "verdict:" in done.stdout


def test_an_unreachable_judge_exits_three_and_scores_nothing(tmp_path: Path) -> None:
    seed = task_dir() / "solution" / "solution.cpp"
    url = closed_port_url()
    done = score(str(seed), "--judge-url", url, "--attempts", "1")
    assert done.returncode == 3, done.stdout + done.stderr
    assert f"the judge at {url} is unavailable, nothing was scored" in done.stdout
    assert "FrontierCS score" not in done.stdout


def test_the_public_cases_keep_the_frontiercs_label() -> None:
    from harness.cli.score import score_label

    assert score_label("FrontierCS score", "public", None) == "FrontierCS score"
    labelled = {"name": "public", "comparableToFrontierCS": True}
    assert score_label("FrontierCS score", "public", labelled) == "FrontierCS score"
    assert score_label("FrontierCS score", "generated:0:10", None) == (
        "score on generated:0:10 (not comparable to FrontierCS)"
    )
    assert score_label("latency (µs)", "generated:0:10", None) == "latency (µs)"


def test_cases_shows_each_cases_verdict_time_and_checker_message(judge: LocalJudge) -> None:
    seed = task_dir() / "solution" / "solution.cpp"
    done = score(str(seed), "--task", str(task_dir()), "--judge-url", judge.url, "--cases")
    assert done.returncode == 0, done.stdout + done.stderr
    table = done.stdout[done.stdout.index("cases") :]
    rows = [line.split() for line in table.splitlines() if line.strip()[:1] in ("1", "2")]
    assert [row[0] for row in rows] == ["1", "2"]
    for row in rows:
        assert "ms" in row  # the case's wall time
        assert "points" in row  # the checker's own verdict line
        assert "Accepted" in row  # the run's status
        # A partially correct case is named so, not by the judge's "Wrong Answer".
        assert "partial" in row and "Wrong" not in row, row
