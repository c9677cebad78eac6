"""The judge's folded flags (`--limit`, `--ray-option`) and its test-only switches
(GUIDANCE_TTT_JUDGE_TEST_MODE, `judges.service.testing`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from judges.service import testing
from judges.service.app import build_parser


def test_limits_and_ray_options_set_their_own_arguments_with_defaults() -> None:
    defaults = build_parser().parse_args([])
    assert (defaults.max_queue, defaults.body_timeout, defaults.compile_memory) == (64, 30.0, "1g")
    assert defaults.ray_retries == 3 and defaults.ray_label is None
    limits = ["--limit", "max-queue=3", "--limit", "verdict-cache-mb=0"]
    limits += ["--limit", "idle-timeout=2.5"]
    ray = ["--ray-option", "label=pool=judge", "--ray-option", "retries=0"]
    args = build_parser().parse_args([*limits, *ray])
    assert (args.max_queue, args.verdict_cache_mb, args.idle_timeout) == (3, 0.0, 2.5)
    assert args.ray_label == ("pool", "judge") and args.ray_retries == 0
    assert args.max_connections == defaults.max_connections  # the others keep their defaults


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--limit", "max-queu=3"], "--limit max-queu=3: expected NAME=VALUE with NAME one of"),
        (["--limit", "max-queue"], "expected NAME=VALUE with NAME one of max-queue,"),
        (["--limit", "max-queue=many"], "--limit max-queue=many: max-queue takes N"),
        (["--ray-option", "retries=-1"], "retries takes N (-1 is below 0)"),
        (["--ray-option", "in-flight=0"], "in-flight takes N (0 is not at least 1)"),
        (["--ray-option", "label=pool"], "label takes KEY=VALUE ('pool' is not KEY=VALUE)"),
    ],
)
def test_a_wrong_named_value_is_one_line_naming_it_and_the_names(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as ended:
        build_parser().parse_args(argv)
    assert ended.value.code == 2
    assert said in capsys.readouterr().err


def test_the_test_mode_reads_its_words_and_refuses_others_by_name() -> None:
    assert testing.read({}) == testing.Switches()
    words = {testing.VARIABLE: "kept-sandbox, cgroup=off,gpu-cpu-stand-in"}
    assert testing.read(words) == testing.Switches(True, "off", True)
    for wrong in ("kept_sandbox", "cgroup=v3", "cgroup"):
        with pytest.raises(ValueError, match=f"unknown word '{wrong}'; known: kept-sandbox"):
            testing.read({testing.VARIABLE: wrong})


def test_a_judge_with_a_wrong_test_mode_word_stops_at_start(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "judges", "--port", "0", "--generated-cases", "1"]
    command += ["--state-dir", str(tmp_path / "state")]
    environ = {**os.environ, testing.VARIABLE: "early-spare"}
    finished = subprocess.run(command, capture_output=True, text=True, timeout=120, env=environ)
    assert finished.returncode == 2
    (line,) = [x for x in finished.stderr.splitlines() if x.startswith("guidance-ttt-judge:")]
    assert f"{testing.VARIABLE}: unknown word 'early-spare'" in line
