"""Where the project's own files are: the repository root and the defaults it holds.

The one module that computes them from its own place in the tree; every other module imports
them from here. In a checkout (or an editable install) the root is the checkout; relative paths
in a settings file start there too (`SETTINGS_BASE`, docs/running.md), so a copy of serve.yaml
anywhere means the same paths.
"""

from __future__ import annotations

from pathlib import Path

#: The `harness/` package directory (an installed wheel keeps the task directories in it).
PACKAGE_DIR = Path(__file__).resolve().parents[1]
#: The repository root: the checkout that holds `harness/`, `serve.yaml` and `run.sh`.
REPO_ROOT = PACKAGE_DIR.parent
#: Where a relative path in a settings file starts, for every reader (run.py, run.sh, doctor,
#: the CLI and ``reef serve``, which run.sh starts there).
SETTINGS_BASE = REPO_ROOT
#: The trained run's settings file, and the frozen-guidance template.
DEFAULT_SERVE_YAML = REPO_ROOT / "serve.yaml"
FROZEN_TEMPLATE = REPO_ROOT / "serve-frozen.yaml"
#: The launcher a trained run is handed to.
RUN_SH = REPO_ROOT / "run.sh"
#: The reference run's published records.
REFERENCE_DIR = REPO_ROOT / "results" / "reference"
#: The checker of exported records.
CHECK_RESULTS = REPO_ROOT / "results" / "check_results.py"
#: Where runs started without a directory keep their state.
WORK_DIR = REPO_ROOT / "work"
#: The task directories: package data of an installed wheel, `harbor/` of a checkout.
TASK_ROOTS = (PACKAGE_DIR / "harbor_tasks", REPO_ROOT / "harbor")
