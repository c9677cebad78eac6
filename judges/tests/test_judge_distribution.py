"""The judge as a distribution of its own: `pip install ./judges` into a fresh virtual
environment, without the recipe, gives a `guidance-ttt-judge` that starts and scores the
Polyomino seed (judges/README.md, "Installing, starting and stopping"); the wheel leaves out the
judge's tests and benchmarks, and these need nothing of the recipe either.

pip fetches the build backend and the judge's dependencies from the package index (its cache
makes a second run quick); the venv lives in the test's temporary folder.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_judge_service import submit, wait_final

from judges.service.process import JudgeProcess

REPO = Path(__file__).resolve().parents[2]
JUDGE = REPO / "judges"
SEED = REPO / "harbor" / "polyomino_packing" / "solution" / "solution.cpp"
CASES = 3
INSTALL_TIMEOUT_S = 480


def _clean_environment() -> dict[str, str]:
    """This process's environment without what would lead the venv's Python to this checkout."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding `pip install ./judges` and nothing of the recipe."""
    root = tmp_path_factory.mktemp("judge-venv")
    environment = {**_clean_environment(), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    subprocess.run(
        [sys.executable, "-m", "venv", str(root / "venv")], check=True, timeout=120, cwd=root
    )
    python = root / "venv" / "bin" / "python"
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(REPO / "judges")],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        env=environment,
        cwd=root,
    )
    assert installed.returncode == 0, (
        f"pip install ./judges failed (it needs the package index):\n{installed.stderr[-4000:]}"
    )
    return root / "venv"


def _python(venv: Path, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env=_clean_environment(),
        cwd=venv,
    )


@pytest.mark.slow
def test_the_installed_judge_is_its_own_package_without_the_recipe(venv: Path) -> None:
    found = _python(venv, "import judges; print(judges.__file__)")
    assert found.returncode == 0, found.stderr
    assert Path(found.stdout.strip()).is_relative_to(venv)  # the installed copy, not the checkout
    for name in ("harness", "tttd", "service"):  # no recipe, no subpackage at the top level
        missing = _python(venv, f"import {name}")
        assert f"No module named '{name}'" in missing.stderr, (name, missing.stderr)
    runner = _python(venv, "import judges.sandbox.runner_build as b; print(b.RUNNER_SOURCE)")
    assert Path(runner.stdout.strip()).is_file(), runner.stderr  # runner.cpp ships in the wheel
    for name in ("judges.tests", "judges.benchmarks"):  # they stay in the checkout
        shipped = _python(venv, f"import importlib.util as u; print(u.find_spec({name!r}))")
        assert shipped.stdout.strip() == "None", (name, shipped.stdout, shipped.stderr)


def _console_script(script: Path) -> Callable[..., subprocess.Popen[Any]]:
    """A `spawn` for JudgeProcess that starts `script` in place of `python -m judges`."""

    def spawn(command: list[str], **options: Any) -> subprocess.Popen[Any]:
        assert command[1:3] == ["-m", "judges"], command
        environment = {
            k: v for k, v in options.pop("env").items() if k not in ("PYTHONPATH", "PYTHONHOME")
        }
        return subprocess.Popen([str(script), *command[3:]], env=environment, **options)

    return spawn


@pytest.mark.slow
def test_the_console_script_starts_and_scores_the_polyomino_seed(
    venv: Path, tmp_path: Path
) -> None:
    script = venv / "bin" / "guidance-ttt-judge"
    assert script.is_file()
    state = tmp_path / "state"
    judge = JudgeProcess(
        state,
        "--generated-cases",
        str(CASES),
        cwd=tmp_path,
        spawn=_console_script(script),
    )
    with judge:
        answer = submit(judge.url, SEED.read_text())
        assert answer.status_code == 200, answer.text
        result = wait_final(judge.url, answer.json()["sid"])
    assert result["status"] == "done", result
    assert len(result["cases"]) == CASES
    for case in result["cases"]:
        assert case["runStatus"] == "Accepted", case
        assert case["msg"].startswith("points ") and 0 < case["scoreRatio"] < 1, case
    assert result["score"] > 0


#: What the judge's tests and benchmarks may not import: the recipe and the recipe's test tree.
#: (Tests of the recipe together with the judge are the recipe's, under tests/.)
RECIPE = ("harness", "tttd", "tests")


def _imported(path: Path) -> set[str]:
    """The top-level names every import of `path` names, lazy ones inside functions too."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_the_judges_tests_and_benchmarks_import_nothing_of_the_recipe() -> None:
    files = sorted([*(JUDGE / "tests").rglob("*.py"), *(JUDGE / "benchmarks").rglob("*.py")])
    assert JUDGE / "tests" / "conftest.py" in files
    found = [
        f"{path.relative_to(REPO)} imports {name}"
        for path in files
        for name in sorted(_imported(path) & set(RECIPE))
    ]
    assert found == [], (
        "the judge's tests and benchmarks stand alone (a test of the recipe with the judge is "
        "the recipe's, under tests/):\n" + "\n".join(found)
    )
