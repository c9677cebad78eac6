"""docs/knobs.md is the table `scripts/knob_table.py` generates from the live parsers, settings
models, GPU package keys and the `GUIDANCE_TTT_*` variables the code names: a flag, key or
variable added, removed or reworded without regenerating it fails here."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "knob_table.py"
REGENERATE = "python scripts/knob_table.py --write"


def _generate(*arguments: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *arguments],
        cwd=cwd,
        env={**os.environ, "GUIDANCE_TTT_SERVE_YAML": "serve-frozen.yaml", "MODEL_ID": "other"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_docs_knobs_md_is_the_generated_table():
    result = _generate()
    assert result.returncode == 0, result.stderr
    current = (REPO / "docs" / "knobs.md").read_text(encoding="utf-8")
    assert current == result.stdout, f"docs/knobs.md is out of date: run {REGENERATE}"


def test_the_table_does_not_depend_on_where_it_is_run_from(tmp_path):
    # The ambient variables set above and another working directory change nothing.
    result = _generate("--check", cwd=tmp_path)
    assert result.returncode == 0, result.stderr or f"docs/knobs.md is out of date: {REGENERATE}"


def test_the_table_lists_every_kind_of_knob():
    text = (REPO / "docs" / "knobs.md").read_text(encoding="utf-8")
    for row in (
        "| `--config CONFIG` | `guidance-ttt run` |",
        "| `--port PORT` | `guidance-ttt judge` |",
        "| `<run>.harness.max_rollout_workers` | serve.yaml, serve-frozen.yaml, "
        "serve-tinker.yaml |",
        "| `training.options.learning-rate` | serve-tinker.yaml |",
        "| `inference.upstream-url` | serve-frozen.yaml (`$GUIDANCE_TTT_GUIDANCE_URL`) |",
        "| `warmup_time` | `<package>/config.yaml` |",
        "| `GUIDANCE_TTT_SERVE_YAML` |",
    ):
        assert row in text, f"docs/knobs.md lacks a row starting {row!r}"
    internal = text.split("## Not knobs", 1)[1]
    assert "`GUIDANCE_TTT_CRASH_AT`" in internal
    assert "`GUIDANCE_TTT_CRASH_AT`" not in text.split("## Not knobs", 1)[0]


def _generator(monkeypatch):
    """The script as a module (registered for the test's length: its dataclasses need it)."""
    spec = importlib.util.spec_from_file_location("knob_table", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "knob_table", module)
    spec.loader.exec_module(module)
    return module


def test_a_variable_that_is_neither_interpolated_nor_classified_stops_the_generator(monkeypatch):
    knob_table = _generator(monkeypatch)
    readers = knob_table.variable_readers()
    monkeypatch.setattr(
        knob_table,
        "variable_readers",
        lambda: {**readers, "GUIDANCE_TTT_SOMETHING_NEW": ["harness/run/x.py"]},
    )
    with pytest.raises(
        SystemExit, match="not classified in VARIABLES: \\['GUIDANCE_TTT_SOMETHING_NEW"
    ):
        knob_table.render()


def test_a_classified_variable_no_code_names_stops_the_generator(monkeypatch):
    knob_table = _generator(monkeypatch)
    readers = knob_table.variable_readers()
    del readers["GUIDANCE_TTT_CRASH_AT"]
    monkeypatch.setattr(knob_table, "variable_readers", lambda: readers)
    with pytest.raises(SystemExit, match=r"named by no code any more.*GUIDANCE_TTT_CRASH_AT"):
        knob_table.render()
