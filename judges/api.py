"""What the judge exports to the programs that use it (the recipe, tests, benchmarks); everything
else in `judges` is internal. The judge is reached over its HTTP protocol (judges/README.md);
this module gives the rest:

- `JudgeProcess`, `cgroup_missing`: the launcher (the service as a subprocess);
- `build_parser`, `main`: the console entry (`guidance-ttt-judge`), for a program that embeds
  it under its own command name;
- `ProblemError`, `read_config`, `read_statement`, `member`, `load_yaml`: the rules the judge
  reads a problem folder by (links, sizes, bounded YAML), so a folder written for it can be
  checked the same way before it is served.

The service's modules (aiohttp among them) are imported only when `build_parser` or `main` is
called.
"""

from __future__ import annotations

import argparse
from typing import Any

from judges.problems.bounded_yaml import load as load_yaml
from judges.problems.folders import ProblemError, member, read_config, read_statement
from judges.service.process import JudgeProcess, cgroup_missing

__all__ = [
    "JudgeProcess",
    "ProblemError",
    "build_parser",
    "cgroup_missing",
    "load_yaml",
    "main",
    "member",
    "read_config",
    "read_statement",
]


def build_parser(prog: str) -> argparse.ArgumentParser:
    """The judge's flags, as the console entry parses them, under the name `prog`."""
    from judges.service import app

    return app.build_parser(prog=prog)


def main(argv: list[str] | None, prog: str) -> Any:
    """Serve until SIGTERM/SIGINT, as `guidance-ttt-judge ARGV` does (exits 2 with one line when
    the problems, the state directory, the port or the sandbox cannot be set up)."""
    from judges.service import app

    return app.main(argv, prog=prog)
