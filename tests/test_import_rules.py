"""The layout of `harness/` (docs/design.md, "The layout") and its import rules.

The rules are import-linter contracts in pyproject.toml; `lint-imports` reads every import of
`harness` and `tttd`, lazy ones inside functions included. These tests run it on the tree, show
that it fails on a broken rule (a copy of the tree with one lazy import added), and check what
the contracts cannot say: no import cycle between modules, a cheap `import harness, tttd`, the
seed's module names, the size of the top level and the paths the docs cite.
"""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

REPO = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
#: The seed's eleven module names (README, docs/design.md): the core ones are real modules, the
#: others permanent faces of their module in a role package.
CORE = ("state", "arms", "puct", "library", "prompts", "search", "scorer", "contract")
FACES = {
    "execution": "harness.adapters.executor.client",
    "agent": "harness.run.agent",
    "run_controller": "harness.run.controller",
    "harbor_agent": "harness.run.harbor_agent",
}
HEAVY = ("httpx", "reef_client", "ray", "matplotlib", "torch")


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(cwd)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_tree_keeps_every_import_rule() -> None:
    done = _lint_imports(REPO)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        # storage may not reach up into the loop, not even from inside a function
        (
            "harness/storage/atomic.py",
            "def _broken():\n    from harness.run.runner import run_steps\n",
            "harness packages form layers",
        ),
        # only adapters/reef/channel may talk to reef_client
        (
            "harness/observe/events.py",
            "def _broken():\n    import reef_client\n",
            "reef_client only in adapters.reef.channel",
        ),
    ],
)
def test_a_broken_rule_fails_the_check(tmp_path: Path, module: str, line: str, contract: str):
    for name in ("harness", "tttd"):
        shutil.copytree(REPO / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / module
    target.write_text(target.read_text() + "\n\n" + line, encoding="utf-8")
    done = _lint_imports(tmp_path)
    assert done.returncode != 0
    assert f"{contract}" in done.stdout and "BROKEN" in done.stdout


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of more than one module (or a module importing itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(sorted(component))

    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_between_modules_or_packages() -> None:
    graph = grimp.build_graph("harness", "tttd")
    modules = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    assert _strongly_connected(modules) == []

    def package(name: str) -> str:
        parts = name.split(".")
        return ".".join(parts[:2]) if parts[0] == "harness" else parts[0]

    packages: dict[str, set[str]] = {}
    for source, targets in modules.items():
        for target in targets:
            if package(source) != package(target):
                packages.setdefault(package(source), set()).add(package(target))
    # the package `harness` itself only holds the lazy HarborAgent face
    packages.pop("harness", None)
    assert _strongly_connected(packages) == []


def test_importing_harness_and_tttd_stays_cheap() -> None:
    code = (
        "import sys, harness, tttd; "
        f"print(','.join(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


@pytest.mark.parametrize("face", sorted(FACES))
def test_each_face_re_exports_its_module(face: str) -> None:
    shown = importlib.import_module(f"harness.{face}")
    real = importlib.import_module(FACES[face])
    assert shown.__all__ == real.__all__ and shown.__all__
    for name in real.__all__:
        assert getattr(shown, name) is getattr(real, name), name
    assert FACES[face] in (shown.__doc__ or "")


def test_the_core_names_are_real_modules() -> None:
    for name in CORE:
        module = importlib.import_module(f"harness.{name}")
        assert Path(module.__file__).parent == REPO / "harness"
        assert "import *" not in Path(module.__file__).read_text(encoding="utf-8")


def test_the_top_level_is_the_core_and_the_faces() -> None:
    top = sorted(p.stem for p in (REPO / "harness").glob("*.py") if p.stem != "__init__")
    assert len(top) <= 14, top
    assert set(top) == {*CORE, "validation", *FACES}


def test_no_module_repeats_its_package_name() -> None:
    for path in (REPO / "harness").rglob("*.py"):
        package = path.parent.name
        stem = path.stem
        if stem.startswith("__") or path.parent == REPO / "harness":
            continue
        prefix = stem.split("_", 1)[0]
        assert prefix not in {package, package.rstrip("s")}, path.relative_to(REPO)


def test_every_package_says_its_role() -> None:
    for init in (REPO / "harness").rglob("__init__.py"):
        module = ".".join(init.relative_to(REPO).parent.parts)
        doc = importlib.import_module(module).__doc__
        assert doc and len(doc.split()) >= 8, module


CITED = re.compile(r"(?<![\w./-])((?:harness|tttd|judges)/[\w./-]*\w)")


def test_every_cited_path_exists() -> None:
    texts = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    missing = []
    for text in texts:
        for match in CITED.finditer(text.read_text(encoding="utf-8")):
            cited = match.group(1).rstrip(".")
            if "<" in cited or "*" in cited:
                continue
            if not (REPO / cited).exists():
                missing.append(f"{text.name}: {cited}")
    assert missing == []
