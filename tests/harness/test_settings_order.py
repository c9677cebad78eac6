"""One order of settings for every command (`harness.settings.precedence`): a flag, then the
run's own settings copy, then the settings file (the environment through its `${VAR:-…}`), then
the default. The same run's judge URL read by `guidance-ttt run`'s copy, `doctor`, the commands
that read a run (`status` & co.) and the ones that read no run (`score`, `task`), with and
without a flag and with the environment set. Real files: the project's serve.yaml, a copy
written by `write_run_copy`, the real parsers."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from harness.cli.flags import judge_url_of, services_from_flags
from harness.preflight import doctor
from harness.settings.precedence import first_given, run_copy_in, settings_file_for
from harness.settings.run_copy import write_run_copy
from harness.settings.run_settings import DEFAULT_SERVE_YAML, RunSettings

GIVEN = "http://127.0.0.1:7001"  # what an earlier `guidance-ttt run --judge-url` gave the run
FLAG = "http://127.0.0.1:7002"
ENVIRONMENT = "http://127.0.0.1:7003"


def read_by_every_command(state: Path, flag: str | None) -> dict[str, str]:
    """The judge URL each command takes for the run in `state`, given `--judge-url flag`."""
    argv = ["--state-dir", str(state)] + (["--judge-url", flag] if flag else [])
    checked = doctor.resolve_defaults(doctor.build_parser().parse_args(argv))
    service_flags = argparse.Namespace(config=None, reef_url=None, judge_url=flag, scenario=None)
    copy = run_copy_in(state)
    assert copy is not None
    return {
        "run": flag or RunSettings.load(copy).judge_url,  # the flag is written into the copy
        "doctor": checked.judge_url,
        "status": services_from_flags(service_flags, state_dir=state).judge_url,
    }


@pytest.mark.parametrize("flag", [None, FLAG])
def test_a_value_the_run_was_given_is_what_every_command_reads_until_a_flag_says_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flag: str | None
) -> None:
    monkeypatch.setenv("FRONTIERCS_JUDGE_URL", ENVIRONMENT)  # the copy's value outranks it
    state = tmp_path / "state"
    write_run_copy(DEFAULT_SERVE_YAML, state, {"judge_url": GIVEN})
    assert set(read_by_every_command(state, flag).values()) == {flag or GIVEN}


def test_without_an_override_the_environment_sets_it_through_the_settings_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FRONTIERCS_JUDGE_URL", ENVIRONMENT)
    state = tmp_path / "state"
    write_run_copy(DEFAULT_SERVE_YAML, state, {"steps": 2})
    assert set(read_by_every_command(state, None).values()) == {ENVIRONMENT}
    # The commands that read no run start at the settings file: the same value.
    assert judge_url_of(None) == ENVIRONMENT and judge_url_of(FLAG) == FLAG


def test_the_settings_file_is_the_flag_then_the_runs_copy_then_the_projects(tmp_path: Path) -> None:
    assert settings_file_for(None, tmp_path) == DEFAULT_SERVE_YAML  # no copy yet
    copy = write_run_copy(DEFAULT_SERVE_YAML, tmp_path, {"steps": 2})
    assert settings_file_for(None, tmp_path) == copy
    other = tmp_path / "other.yaml"
    assert settings_file_for(other, tmp_path) == other
    assert first_given(None, "", "x", "y") == "x" and first_given(None) is None
