"""The one order in which a run's settings are taken, for every command that reads them.

    1. a command-line flag;
    2. the run's own settings copy in its state directory (`<state>/serve.yaml` or
       `<state>/serve-frozen.yaml`, written by `guidance-ttt run` from the settings file with
       what its command lines changed, `harness.settings.run_copy`);
    3. the settings file (`--config`, else the project's `serve.yaml`), where a `${VAR:-…}`
       value lets the environment set it (`FRONTIERCS_JUDGE_URL`, `GUIDANCE_TTT_EXECUTOR`, …);
    4. the built-in default the flag's help names.

`guidance-ttt run` applies it by writing the copy (flags over earlier overrides over the file);
`guidance-ttt doctor` (`harness.preflight.doctor`) and the commands that read a run (`status`,
`export`, `inspect`, … through `harness.cli.flags`) read through `settings_file_for`, so that a
value one command line gave a run is what every later command sees, until a flag says otherwise.
"""

from __future__ import annotations

from pathlib import Path

from harness.settings.paths import DEFAULT_SERVE_YAML

#: The names a run's settings copy takes in its state directory (frozen mode first).
COPY_NAMES = ("serve-frozen.yaml", "serve.yaml")


def run_copy_in(state_dir: Path | None) -> Path | None:
    """The run's own settings copy in `state_dir`, or None (no state directory, or no copy)."""
    if state_dir is None:
        return None
    for name in COPY_NAMES:
        path = Path(state_dir) / name
        if path.is_file():
            return path
    return None


def settings_file_for(config: Path | None, state_dir: Path | None) -> Path:
    """The settings file a command reads: `--config` when given (a flag), else the run's own
    copy in `state_dir` when it has one, else the project's serve.yaml."""
    if config is not None:
        return Path(config)
    return run_copy_in(state_dir) or DEFAULT_SERVE_YAML


def first_given[T](*values: T | None) -> T | None:
    """The first value that is given (not None and not empty text), in the order above."""
    for value in values:
        if value is not None and value != "":
            return value
    return None
