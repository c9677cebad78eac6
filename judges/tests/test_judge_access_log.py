"""The judge's access log: per-request lines go to `<state-dir>/access.log` by default, so a
judge started in the background of a terminal keeps it quiet; `--access-log -` puts them on
stderr. The real service in a child process (`judges.service.process.JudgeProcess`, whose
stderr is its `service.log`), real HTTP requests."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from judges.service.process import JudgeProcess

pytestmark = [pytest.mark.timeout(300)]


def _requests(url: str) -> None:
    for _ in range(3):
        assert httpx.get(f"{url}/health", timeout=30).status_code == 200
    assert httpx.get(f"{url}/problems", timeout=30).status_code == 200


def test_access_lines_go_to_the_state_directory_not_the_terminal(tmp_path: Path) -> None:
    state = tmp_path / "judge"
    with JudgeProcess(state, "--generated-cases", "2", "--workers", "1") as judge:
        _requests(judge.url)
    service_log = (state / "service.log").read_text()
    access = (state / "access.log").read_text()
    assert access.count('"GET /health HTTP/1.1" 200') == 3 and "GET /problems" in access
    assert "GET /health" not in service_log
    assert f"access log {state / 'access.log'}" in service_log


def test_access_log_dash_is_the_terminal(tmp_path: Path) -> None:
    state = tmp_path / "judge"
    with JudgeProcess(state, "--generated-cases", "2", "--workers", "1", "--access-log", "-") as j:
        _requests(j.url)
    assert (state / "service.log").read_text().count('"GET /health HTTP/1.1" 200') == 3
    assert not (state / "access.log").exists()


def test_a_link_in_place_of_the_access_log_is_refused(tmp_path: Path) -> None:
    from judges.service.access_log import route_access_log

    outside = tmp_path / "outside.txt"
    outside.write_text("")
    state = tmp_path / "judge"
    state.mkdir()
    os.symlink(outside, state / "access.log")
    with pytest.raises(OSError, match=r"--access-log .*access\.log: cannot open it"):
        route_access_log(None, state)
    assert outside.read_text() == ""
