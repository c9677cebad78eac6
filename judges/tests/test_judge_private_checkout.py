"""A FrontierCS checkout in a private home directory (a mode 700 parent): the judge stages
testlib.h into its scratch folder, as it stages problem programs and cases, so every testlib
checker compiles (bubblewrap opens bind sources as the sandbox user, who cannot enter the
private folder). The judge's own state lives under the private folder too. FrontierCS problem 1
comes from the design data folder (skipped when absent)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_judge_service import submit, wait_final

from judges.service.process import JudgeProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
FRONTIERCS = REPO.parent / "shared" / "data" / "frontiercs"
TASK = REPO / "harbor" / "treasure_packing"


def test_a_checker_of_a_checkout_under_a_private_parent_compiles(tmp_path: Path) -> None:
    if not (FRONTIERCS / "problems" / "1" / "chk.cc").is_file():
        pytest.skip(f"the FrontierCS problems are absent from {FRONTIERCS}")
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    checkout = home / "Frontier-CS" / "algorithmic"
    shutil.copytree(FRONTIERCS / "problems" / "1", checkout / "problems" / "1")
    shutil.copytree(FRONTIERCS / "include", checkout / "judge" / "include")
    program = (TASK / "solution" / "solution.cpp").read_text()
    with JudgeProcess(home / "judge-state", "--frontiercs", str(home / "Frontier-CS")) as judge:
        answer = submit(judge.url, program, pid="1")
        assert answer.status_code == 200, answer.text
        result = wait_final(judge.url, answer.json()["sid"], timeout=540)
    assert "Permission denied" not in str(result)
    assert result["status"] == "done", result
    assert result["score"] > 0, result
