"""judge-runner is compiled once per machine and reused while its source and compiler are
unchanged (judges/sandbox/runner_build.py): real g++, real files."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from judges.sandbox import runner_build

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "cache-home"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home


def _entries(cache_home: Path) -> list[Path]:
    return sorted((cache_home / runner_build.CACHE_NAME).glob("judge-runner-*"))


def _without_compiling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A `g++` first on PATH that answers --version as the real one and fails every compile."""
    real = shutil.which("g++")
    fake = tmp_path / "fake-bin"
    fake.mkdir()
    script = fake / "g++"
    script.write_text(
        f'#!/bin/sh\nif [ "$1" = --version ]; then exec {real} --version; fi\n'
        'echo "compiling is not allowed here" >&2\nexit 1\n'
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")


def test_a_second_install_copies_the_cached_build_without_compiling(
    cache_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = runner_build.install_runner(tmp_path / "first")
    [entry] = _entries(cache_home)
    _without_compiling(tmp_path, monkeypatch)

    second = runner_build.install_runner(tmp_path / "second")

    assert second.read_bytes() == first.read_bytes() == entry.read_bytes()
    assert os.access(second, os.X_OK)
    assert _entries(cache_home) == [entry]
    # the installed copy is a working judge-runner, not just bytes: without arguments it
    # refuses with a usage line and a non-zero status
    result = subprocess.run([str(second)], capture_output=True, check=False, timeout=30)
    assert result.returncode != 0


def test_a_changed_source_gets_its_own_build(
    cache_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner_build.install_runner(tmp_path / "before")
    changed = tmp_path / "runner.cpp"
    changed.write_text(runner_build.RUNNER_SOURCE.read_text() + "\n// changed\n")
    monkeypatch.setattr(runner_build, "RUNNER_SOURCE", changed)

    runner_build.install_runner(tmp_path / "after")

    assert len(_entries(cache_home)) == 2


def test_a_cache_others_can_write_is_not_used(
    cache_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = cache_home / runner_build.CACHE_NAME
    shared.mkdir(parents=True)
    shared.chmod(0o777)

    installed = runner_build.install_runner(tmp_path / "runner")

    assert os.access(installed, os.X_OK)
    assert _entries(cache_home) == []


def test_a_compile_error_names_the_source_and_the_compiler_message(
    cache_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "runner.cpp"
    broken.write_text("this is not C++\n")
    monkeypatch.setattr(runner_build, "RUNNER_SOURCE", broken)

    with pytest.raises(runner_build.RunnerBuildError, match=r"runner\.cpp.*error"):
        runner_build.install_runner(tmp_path / "runner")
    assert list((cache_home / runner_build.CACHE_NAME).iterdir()) == []
