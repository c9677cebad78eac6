"""serve.yaml and serve-frozen.yaml are read with their aliases and size bounded (issue 35, item
10): a billion-laughs document, a recursive alias, deep nesting or an oversized file is refused
in one line naming the file, by `RunSettings.load` and by `run.py --describe` (what run.sh runs
first), quickly and without a MemoryError; the shipped files and ordinary anchors read as
`yaml.safe_load` reads them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.settings import bounded_yaml
from harness.settings.run_copy import load_document
from harness.settings.run_settings import RunSettings, RunSettingsError

REPO = Path(__file__).resolve().parents[2]
BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(8)
)
CASES = {
    "billion laughs": (BOMB, "expands to more than 100000 values through aliases"),
    "recursive alias": ("loop: &l [1, *l]\n", "an alias refers to a value that contains it"),
    "deep nesting": ("deep: " + "[" * 20000 + "]" * 20000 + "\n", "nested too deeply"),
    "oversized": ("#" * (1 << 20) + "\n", "over 1 MiB; a settings file is smaller"),
}


def _settings(tmp_path: Path, shipped: str, case: str) -> Path:
    prefix, _ = CASES[case]
    path = tmp_path / shipped
    path.write_text(prefix + (REPO / shipped).read_text(encoding="utf-8"), encoding="utf-8")
    return path


@pytest.mark.parametrize("shipped", ["serve.yaml", "serve-frozen.yaml"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_settings_file_is_refused_in_one_line(
    tmp_path: Path, shipped: str, case: str
) -> None:
    path = _settings(tmp_path, shipped, case)
    with pytest.raises(RunSettingsError) as refusal:
        RunSettings.load(path, environ={}, base_dir=tmp_path)
    message = str(refusal.value)
    assert message.startswith(str(path)) and CASES[case][1] in message
    assert "\n" not in message


@pytest.mark.slow
def test_run_py_describe_refuses_a_bomb_in_one_line(tmp_path: Path) -> None:
    path = _settings(tmp_path, "serve.yaml", "billion laughs")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, str(REPO / "run.py"), "--describe", "--serve-yaml", str(path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "expands to more than 100000 values" in lines[0], done.stderr
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr


@pytest.mark.parametrize("shipped", ["serve.yaml", "serve-frozen.yaml"])
def test_the_shipped_settings_read_as_safe_load_reads_them(shipped: str) -> None:
    path = REPO / shipped
    assert bounded_yaml.read(path) == yaml.safe_load(path.read_text(encoding="utf-8"))


def test_ordinary_anchors_and_merge_keys_still_load() -> None:
    text = "base: &b {port: 1, host: h}\nuse: {<<: *b, port: 2}\nlist: [*b, *b]\n"
    assert bounded_yaml.load(text, "x.yaml") == yaml.safe_load(text)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_runs_settings_copy_is_read_with_the_same_bounds(tmp_path: Path, case: str) -> None:
    """`load_document`, what the rehearsal and an experiment read a settings file with before
    writing a run's own copy, refuses the same documents in one line."""
    path = _settings(tmp_path, "serve-frozen.yaml", case)
    with pytest.raises(ValueError, match=CASES[case][1]) as refusal:
        load_document(path)
    assert "\n" not in str(refusal.value)
