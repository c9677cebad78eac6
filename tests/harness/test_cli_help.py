"""`guidance-ttt --version`, and every subcommand's `--help`: it names itself
`guidance-ttt <sub>`, and every flag has a help text that names its default."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from harness.cli import entry

REPO = Path(__file__).resolve().parents[2]


def _guidance_ttt(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli.entry", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


def test_version_prints_the_installed_distributions_version():
    done = _guidance_ttt("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"guidance-ttt {metadata.version('guidance-ttt')}"


def test_every_subcommand_names_itself_and_gives_every_flag_a_help_text_and_its_default():
    parsers = entry.subcommand_parsers()
    assert {"doctor", "judge", "status", "inspect", "plot", "export"} <= set(parsers)
    problems = []
    for name, parser in parsers.items():
        if parser.prog != f"guidance-ttt {name}":
            problems.append(f"{name}: prog {parser.prog!r}")
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._VersionAction):
                continue
            label = "/".join(action.option_strings) or action.dest
            text = action.help or ""
            if not text.strip():
                problems.append(f"{name} {label}: no help text")
            elif action.option_strings and "default" not in text.lower():
                problems.append(f"{name} {label}: the help does not name the default")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("sub", sorted(entry.subcommand_parsers()))
def test_help_output_starts_with_the_subcommands_own_usage(sub):
    done = _guidance_ttt(sub, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: guidance-ttt {sub} ")
    assert "%(default)" not in done.stdout
    widest = max(len(line) for line in done.stdout.splitlines())
    assert widest <= 80, done.stdout


def test_every_subcommand_has_a_description_and_task_help_lists_its_actions():
    parsers = entry.subcommand_parsers()
    assert set(parsers) == set(entry.SUBCOMMANDS)
    missing = [name for name, parser in parsers.items() if not (parser.description or "").strip()]
    assert missing == []
    done = _guidance_ttt("task", "--help")
    assert done.returncode == 0, done.stderr
    assert all(action in done.stdout for action in ("check", "new", "seed"))


def test_judge_help_lists_at_most_twenty_flags_and_no_test_switch():
    """The judge's `--help` stays short: related settings share a flag (`--limit`,
    `--ray-option`) and the test-only switches are the variable GUIDANCE_TTT_JUDGE_TEST_MODE
    (judges.service.testing), not flags."""
    done = _guidance_ttt("judge", "--help")
    assert done.returncode == 0, done.stderr
    options = done.stdout.split("options:", 1)[1]
    flags = re.findall(r"^  (--[a-z][a-z-]*)", options, flags=re.MULTILINE)
    assert "--port" in flags and "--limit" in flags, flags
    assert len(flags) <= 20, flags
    for switch in ("--sandbox-per-run", "--cgroup", "--gpu-cpu-stand-in", "--gpu-early-spare"):
        assert switch not in done.stdout
