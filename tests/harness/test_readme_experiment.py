"""The README's "Running an experiment" block, run as written: the shell block is taken from
README.md itself and run by bash, line for line, in a fresh directory holding a copy of
serve-frozen.yaml (the user's repository root), with the `guidance-ttt` of this environment on
PATH and no endpoint variable set. Real: the CLI, the local judge, `reef serve` for the guided
runs, the run loop; stand-ins: the rehearsal's scripted models (the plan's `stand_ins: true`)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

REPO = Path(__file__).resolve().parents[2]
ENDPOINTS = ("GUIDANCE_TTT_GUIDANCE_URL", "GUIDANCE_TTT_GUIDANCE_MODEL", "GUIDANCE_TTT_PRICING")


def readme_block(section: str) -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", body, re.S)
    assert block is not None, f"no bash block under '## {section}'"
    return block.group(1)


def test_the_readmes_experiment_commands_run_as_written(tmp_path: Path) -> None:
    block = readme_block("Running an experiment")
    assert "guidance-ttt estimate --config serve-frozen.yaml" in block
    shutil.copy(REPO / "serve-frozen.yaml", tmp_path / "serve-frozen.yaml")
    env = {k: v for k, v in os.environ.items() if k not in ENDPOINTS}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=1100,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    out = done.stdout
    assert "estimate for serve-frozen.yaml:" in out
    assert "9/9 runs finished" in out
    for name in ("compare.png", "compare.csv", "compare-table.csv"):
        assert (tmp_path / "work" / "arms" / name).stat().st_size > 0
    assert (tmp_path / "work/arms/unguided-s0/guidance-run/reevaluation.json").is_file()
