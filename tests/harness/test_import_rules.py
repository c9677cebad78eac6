"""The layout of `harness/` (docs/design.md, "The layout") and its import rules.

The rules are import-linter contracts in pyproject.toml (`lint-imports` reads every import of
`harness`, `tttd` and `judges`, lazy ones inside functions included) and ruff's TID253 for the
heavy packages that must be imported lazily. These tests run the contracts on the tree, plant
each forbidden import of the layout review in one scratch copy of it and see the rule that names
it fail, and check what the contracts cannot say: no import cycle between modules, every package
a layer, a cheap `import harness, tttd` and a cheap `reef serve` path, the seed's module names,
the size of the top level and the paths the docs cite."""

from __future__ import annotations

import ast
import importlib
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

REPO = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
RUFF = Path(sys.executable).with_name("ruff")
#: The top level (README, docs/design.md): the core's real modules, and the seed's other names as
#: permanent faces of their real module.
CORE = (
    "state",
    "arms",
    "puct",
    "library",
    "prompts",
    "answers",
    "scorer",
    "contract",
    "request_shapes",
    "model_text",
)
FACES = {
    "execution": "harness.adapters.executor.client",
    "agent": "harness.run.step",
    "run_controller": "harness.run.controller",
    "harbor_agent": "harness.run.harbor_agent",
    "search": "harness.answers",
}
HEAVY = ("httpx", "reef_client", "ray", "matplotlib", "torch")


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=cwd,
        # wide enough that no contract's name is wrapped in the report
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(cwd), "COLUMNS": "400"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_tree_keeps_every_import_rule() -> None:
    done = _lint_imports(REPO)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


LAZY = "\n\ndef _planted():\n    {}\n"
#: The forbidden imports of the layout review (docs/design.md, "The layout"), each planted in a
#: scratch copy of the tree: (file, what is written there, the rule that must name it, the edge
#: it reports). A file that exists gets the line appended; a new one is a module written
#: tomorrow, which an allow-list covers without being told. `TID253` is ruff's
#: banned-module-level-imports; every other rule is an import-linter contract.
PLANTS = [
    (
        "harness/run/trial_copy.py",
        "import harbor\n",
        "harbor only in run.harbor_agent and run.local_environment",
        "harness.run.trial_copy -> harbor",
    ),
    (
        "harness/cli/sandbox_shell.py",
        LAZY.format("from harbor.environments import base"),
        "harbor only in run.harbor_agent and run.local_environment",
        "harness.cli.sandbox_shell -> harbor",
    ),
    (
        "tttd/step_gate.py",
        "from harness.run.gate import StepGate\n",
        "tttd uses the harness's settings, validation, resume_state and qualification only",
        "tttd.step_gate -> harness.run.gate",
    ),
    (
        "tttd/recipe.py",
        LAZY.format("from harness.run.spend import SpendLimit"),
        "tttd uses the harness's settings, validation, resume_state and qualification only",
        "tttd.recipe -> harness.run.spend",
    ),
    (
        "harness/adapters/judge/verdict_files.py",
        "from harness.storage.atomic import atomic_write_bytes\n",
        "adapters import the core and their own family only",
        "harness.adapters.judge.verdict_files -> harness.storage.atomic",
    ),
    (
        "harness/adapters/reef/status.py",
        LAZY.format("from harness.settings.serve import ServeSettings"),
        "adapters import the core and their own family only",
        "harness.adapters.reef.status -> harness.settings.serve",
    ),
    (
        "harness/agent.py",
        LAZY.format("from harness.cli.entry import main"),
        "a face imports its one module only",
        "harness.agent -> harness.cli.entry",
    ),
    (
        "harness/adapters/executor/backends.py",
        "import ray\n",
        "TID253",
        "harness/adapters/executor/backends.py",
    ),
    (
        "harness/adapters/executor/backends.py",
        "import httpx\n",
        "the executor catalogue imports the standard library only",
        "harness.adapters.executor.backends -> httpx",
    ),
    (
        "harness/observe/cluster_sink.py",
        LAZY.format("import ray"),
        "ray only in adapters.reef.training_bridge",
        "harness.observe.cluster_sink -> ray",
    ),
    (
        "harness/results/live.py",
        LAZY.format("import reef_client"),
        "reef_client only in adapters.reef.channel",
        "harness.results.live -> reef_client",
    ),
    (
        "harness/rehearsal/proxy_stand_in.py",
        "import aiohttp\n",
        "aiohttp only in adapters.guidance_proxy.server",
        "harness.rehearsal.proxy_stand_in -> aiohttp",
    ),
    (
        "harness/run/step_metrics.py",
        LAZY.format("import wandb"),
        "wandb and playwright only in observe.wandb_sink",
        "harness.run.step_metrics -> wandb",
    ),
    (
        "harness/observe/wandb_sink.py",
        "import wandb\n",
        "TID253",
        "harness/observe/wandb_sink.py",
    ),
    (
        "harness/cli/plots.py",
        "import matplotlib\n",
        "TID253",
        "harness/cli/plots.py",
    ),
    (
        "harness/run/step_plot.py",
        LAZY.format("import matplotlib"),
        "matplotlib only in cli",
        "harness.run.step_plot -> matplotlib",
    ),
    (
        "harness/adapters/judge/verdict.py",
        LAZY.format("from judges.verdicts import cache"),
        "the recipe reaches the judge only through its protocol and judges.api",
        "harness.adapters.judge.verdict -> judges.verdicts.cache",
    ),
    (
        "harness/cli/judge_state.py",
        LAZY.format("from judges.service import engine"),
        "the recipe reaches the judge only through its protocol and judges.api",
        "harness.cli.judge_state -> judges.service.engine",
    ),
    (
        "harness/adapters/executor/client.py",
        LAZY.format("from harness.adapters.judge import verdict"),
        "the adapter families are independent of each other",
        "harness.adapters.executor.client -> harness.adapters.judge.verdict",
    ),
    (
        "harness/storage/atomic.py",
        LAZY.format("from harness.run.step_loop import run_steps"),
        "harness packages form layers: a package imports only the layers below it",
        "harness.storage.atomic -> harness.run.step_loop",
    ),
    (
        "harness/state.py",
        LAZY.format("from harness.storage import atomic"),
        "the core imports only the core",
        "harness.state -> harness.storage.atomic",
    ),
    (
        "harness/settings/serve.py",
        LAZY.format("from harness.adapters.judge import frontiercs"),
        "settings import the core and the executor catalogue only",
        "harness.settings.serve -> harness.adapters.judge.frontiercs",
    ),
    (
        "harness/run/rollout.py",
        LAZY.format("import harness.agent"),
        "nothing inside the project imports a face",
        "harness.run.rollout -> harness.agent",
    ),
    (
        "harness/cli/status.py",
        LAZY.format("import subprocess"),
        "cli parses, dispatches and renders: no process start-up, YAML or run",
        "harness.cli.status -> subprocess",
    ),
    (
        "harness/cli/export.py",
        LAZY.format("import yaml"),
        "cli parses, dispatches and renders: no process start-up, YAML or run",
        "harness.cli.export -> yaml",
    ),
    (
        "harness/cli/rehearse.py",
        LAZY.format("from harness.run.step_loop import run_steps"),
        "cli parses, dispatches and renders: no process start-up, YAML or run",
        "harness.cli.rehearse -> harness.run.step_loop",
    ),
    (
        "judges/verdicts/archive_view.py",
        "from harness import state\n",
        "judges imports nothing of harness or tttd (it is deployed alone)",
        "judges.verdicts.archive_view -> harness.state",
    ),
]


def _broken_sections(report: str) -> dict[str, str]:
    """lint-imports' "Broken contracts" part, by contract name (a name, then a rule of dashes)."""
    lines = report.split("Broken contracts", 1)[-1].splitlines()
    sections: dict[str, list[str]] = {}
    current: list[str] = []
    for line, below in zip(lines, [*lines[1:], ""], strict=True):
        if below and set(below) == {"-"} and line.strip() and set(line) != {"-"}:
            current = sections.setdefault(line.strip(), [])
        current.append(line)
    return {name: "\n".join(body) for name, body in sections.items()}


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], str]:
    """One scratch copy of the tree with every plant in it, checked once by both tools."""
    root = tmp_path_factory.mktemp("planted")
    for name in ("harness", "tttd", "judges"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    for path, text, _, _ in PLANTS:
        target = root / path
        before = target.read_text(encoding="utf-8") if target.exists() else ""
        target.write_text(before + text, encoding="utf-8")
    linted = _lint_imports(root)
    assert linted.returncode != 0, linted.stdout[-2000:] + linted.stderr[-2000:]
    ruff = subprocess.run(
        [str(RUFF), "check", "--no-cache", "--select", "TID253", "--output-format", "concise"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return _broken_sections(linted.stdout), ruff.stdout


def test_the_review_plants_twenty_forbidden_imports() -> None:
    assert len(PLANTS) >= 20
    assert len({(path, text) for path, text, _, _ in PLANTS}) == len(PLANTS)


@pytest.mark.parametrize(("path", "text", "rule", "edge"), PLANTS, ids=[p[3] for p in PLANTS])
def test_each_planted_import_breaks_its_rule(
    planted: tuple[dict[str, str], str], path: str, text: str, rule: str, edge: str
) -> None:
    broken, ruff_report = planted
    if rule == "TID253":
        name = text.split()[1]
        assert f"{edge}:" in ruff_report and f"`{name}` is banned at the module level" in (
            ruff_report
        ), ruff_report
        return
    assert rule in broken, f"{rule!r} kept; broken: {sorted(broken)}"
    assert edge in broken[rule], broken[rule]


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

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(10_000, limit))
    try:  # restored: a raised limit would make every later test's deep recursion slower
        for node in sorted(graph):
            if node not in index:
                visit(node)
    finally:
        sys.setrecursionlimit(limit)
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


#: What `reef serve` imports of this project: the recipe and the deployment serve.yaml names
#: (`recipe.implementation`, `deployment.backend`).
REEF_SERVE_PATH = ("tttd.recipe", "tttd.deployment")


@pytest.mark.parametrize(
    "modules", [("harness", "tttd"), REEF_SERVE_PATH], ids=["packages", "reef"]
)
def test_importing_harness_and_tttd_stays_cheap(modules: tuple[str, ...]) -> None:
    heavy = (*HEAVY, "wandb", "aiohttp", "rich")
    code = (
        f"import sys; import {', '.join(modules)}; "
        f"print(','.join(sorted(m for m in {heavy!r} if m in sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


def test_every_harness_package_is_a_layer() -> None:
    """A package the layers contract does not name would be bound by no layer rule."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    (layers,) = [c for c in contracts if c["type"] == "layers" and c["containers"] == ["harness"]]
    named = {name.strip() for layer in layers["layers"] for name in layer.split("|")}
    packages = {p.parent.name for p in (REPO / "harness").glob("*/__init__.py")}
    assert packages == named


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
    assert len(top) <= 16, top
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


def test_only_settings_writes_a_settings_file() -> None:
    """`harness.settings.run_copy` is the one writer of YAML in the harness (a run's copy of its
    settings file): no other module calls `yaml.dump` or `yaml.safe_dump`."""
    writers = []
    for path in sorted((REPO / "harness").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            called = node.func if isinstance(node, ast.Call) else None
            if (
                isinstance(called, ast.Attribute)
                and called.attr in {"dump", "safe_dump"}
                and isinstance(called.value, ast.Name)
                and called.value.id == "yaml"
            ):
                writers.append(path.relative_to(REPO).as_posix())
    assert set(writers) == {"harness/settings/run_copy.py"}


def test_no_cli_function_is_over_a_hundred_lines() -> None:
    """`cli/` parses, dispatches and renders: none of its functions grows past 100 lines
    (issue 33's bound; a longer one is split by what it draws or reads)."""
    long = []
    for path in sorted((REPO / "harness" / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > 100:
                    long.append(f"{path.name}::{node.name} ({size} lines)")
    assert long == []
