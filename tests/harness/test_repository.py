"""Copy-paste traps in the repository itself: no path of a developer's machine in any tracked
file; a .gitignore that keeps run state, the virtualenv, caches and build output out; code and
docs that cite only the repository's own docs (a clone has nothing beside it), with only tests
and benchmarks reading data from ../shared and saying so when it is absent; reference docs
(README.md, docs/) that name no rounds or machines (history goes to a measurement log), name only
paths and commands that exist, and a judge reference of at most 600 lines.

Needs a git checkout (the tracked files are `git ls-files`); skipped, saying so, elsewhere."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# An absolute path under a home, work or temp folder: /home/<name>/, /Users/<name>/, /root/,
# /work/, /tmp/, macOS's /private/var/ and /var/folders/, /mnt/. A path inside a longer one
# (`/proc/1/root/`, `./work/`, `~/`) is not one.
MACHINE_PATH = re.compile(
    r"(?<![\w.~$}-])/(?:home/[\w.-]+|Users/[\w.-]+|root|work|tmp|private/var|var/folders|mnt)/"
)
# Clearly placeholder examples: `/home/<user>/`, `/Users/$USER/`, and the user names you, user, USER
PLACEHOLDER = re.compile(r"/(?:home|Users)/(?:<[^>]+>|you|user|USER|\$USER|\$\{USER\})/")
# Tracked files where some absolute paths are not on a developer's machine: the folders those
# paths may name, and why. Every other folder (/work/, /home/<name>/, ...) is still refused there.
SANDBOX = ("tmp", "root")
ALLOWED = {
    "judges/": (
        SANDBOX,
        "the judge builds command lines for its sandbox (/tmp is the sandbox's); its tests and "
        "candidate programs (judges/tests/) assert on what a candidate wrote to its /tmp",
    ),
    "tests/harness/test_repository.py": (("*",), "this test's own patterns"),
}


def _allowed(name: str, match: re.Match[str]) -> bool:
    folder = match.group(0).strip("/").split("/")[0]
    for prefix, (folders, _why) in ALLOWED.items():
        if name.startswith(prefix) and ("*" in folders or folder in folders):
            return True
    return False


def _tracked() -> list[str]:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the tracked files cannot be listed")
    listing = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True, timeout=60
    )
    return [name for name in listing.stdout.decode().split("\0") if name]


def _text(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data[:8192]:
        return None  # binary (images, archives)
    return data.decode("utf-8", errors="replace")


def test_no_tracked_file_contains_a_path_of_a_developers_machine():
    found = []
    for name in _tracked():
        text = _text(REPO / name)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for match in MACHINE_PATH.finditer(line):
                if not PLACEHOLDER.match(line, match.start()) and not _allowed(name, match):
                    found.append(f"{name}:{number}: {line.strip()[:120]}")
    assert not found, (
        "machine-specific paths (use relative paths, .venv, $PWD or a <placeholder>):\n"
        + "\n".join(found)
    )


#: Joins the example paths below, so this file does not itself name a machine path.
SEP = "/"


@pytest.mark.parametrize(
    "line, machine",
    [
        (f"{SEP}work/devvenv/bin/python -m pytest", True),
        ("VERIFIER_LOG_DIR=/tmp/verifier", True),
        (f"see {SEP}home/alice/src/guidance-ttt", True),
        (f"cd {SEP}Users/bob/guidance-ttt", True),
        ("cp x /root/.cache/", True),
        ("/home/<user>/guidance-ttt", False),
        ("state in work/polyomino_packing/", False),
        ("/proc/1/root/etc/shadow", False),
        (f"~{SEP}work/thing", False),
        ("$PWD/solution.cpp", False),
        ("/logs/verifier/reward.json", False),
        ("/workspace/solution.cpp", False),
    ],
)
def test_the_machine_path_pattern_tells_real_paths_from_placeholders(line, machine):
    hits = [m for m in MACHINE_PATH.finditer(line) if not PLACEHOLDER.match(line, m.start())]
    assert bool(hits) is machine


@pytest.mark.parametrize(
    "path",
    [
        "work/polyomino_packing/guidance-run/events.jsonl",
        ".venv/bin/python",
        "harness/__pycache__/cli.cpython-312.pyc",
        ".pytest_cache/v/cache/nodeids",
        ".ruff_cache/0.1/x",
        ".hypothesis/examples/x",
        "build/lib/harness/cli/entry.py",
        "dist/guidance_ttt-0.1.0-py3-none-any.whl",
        "guidance_ttt.egg-info/PKG-INFO",
    ],
)
def test_gitignore_keeps_state_venv_caches_and_build_output_out(path):
    _tracked()  # skips outside a checkout
    done = subprocess.run(["git", "check-ignore", "--no-index", "-q", path], cwd=REPO, timeout=30)
    assert done.returncode == 0, f"{path} is not ignored by .gitignore"


# Documents that live outside the repository: a reader of a clone has none of them.
OUTSIDE_DOC = re.compile(r"\bSPEC\b|\b(?:SPEC|JUDGE|REEF|STYLE)\.md\b")
SHARED = re.compile(r"\.\./shared\b|[\"']shared[\"']")
# Only tests and benchmarks may read data from ../shared, and they must say so when it is absent.
DATA_READERS = ("tests/", "benchmarks/", "judges/tests/", "judges/benchmarks/")


def test_code_and_docs_cite_only_the_repositorys_own_docs():
    cited, shared = [], []
    for name in _tracked():
        if name == "tests/harness/test_repository.py":
            continue
        text = _text(REPO / name)
        if text is None:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE_DOC.search(line):
                cited.append(f"{name}:{number}: {line.strip()[:120]}")
            if SHARED.search(line) and not name.startswith(DATA_READERS):
                shared.append(f"{name}:{number}: {line.strip()[:120]}")
    assert not cited, "cite docs/ (e.g. docs/design.md §n) instead of:\n" + "\n".join(cited)
    assert not shared, "only tests and benchmarks may read ../shared:\n" + "\n".join(shared)


def test_tests_and_benchmarks_that_read_shared_data_say_so_when_it_is_absent():
    silent = []
    for name in _tracked():
        if not name.startswith(DATA_READERS) or name == "tests/harness/test_repository.py":
            continue
        text = _text(REPO / name) or ""
        reads = re.search(r"[\"']shared[\"']\s*/|\.\./shared/data", text)
        if reads and "absent" not in text:
            silent.append(name)
    assert not silent, "read ../shared data without saying when it is absent: " + ", ".join(silent)


# --- Reference docs: present tense, and every path and command they name exists ----------------

#: The reference docs: how things are and how to use them. Measurement logs (`*/MEASUREMENTS.md`)
#: and `results/` keep dated history and are not reference docs.
REFERENCE_DOCS = ("README.md", "docs/*.md", "judges/README.md")
#: "round 7", "machine 4", "Round7", "machines 1" — a dated measurement run named as history.
HISTORY = re.compile(r"\b(?:rounds?|machines?)[ _-]?\d+\b", re.IGNORECASE)
#: The repository's top-level folders a doc may name a path under.
TOP_FOLDERS = (
    "harness",
    "tttd",
    "judges",
    "tests",
    "benchmarks",
    "scripts",
    "docs",
    "results",
    "harbor",
)
REPO_PATH = re.compile(rf"^(?:{'|'.join(TOP_FOLDERS)})/[\w./-]*$")
#: A command that runs a repository file: `python benchmarks/x.py`, `bash scripts/x.sh`,
#: `scripts/x.sh`, `python judges/benchmarks/x.py`.
COMMAND = re.compile(
    r"(?:\bpython3?\s+|\bbash\s+|(?<![\w./-]))"
    r"((?:judges/benchmarks|benchmarks|scripts|results)/[\w./-]+\.(?:py|sh))\b"
)
INLINE_CODE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
#: Not a path of this repository: a placeholder, a glob, a variable, an elision.
NOT_A_PATH = re.compile(r"[<>*{}$…]")


def _reference_docs() -> list[Path]:
    docs: list[Path] = []
    for pattern in REFERENCE_DOCS:
        docs.extend(sorted(REPO.glob(pattern)))
    return docs


def named_paths(text: str) -> set[str]:
    """The repository paths a doc names: each token of an inline code span that looks like a path
    under a top-level folder (not a value given to an option, e.g. `--out results/run`), and every
    file a command runs (`python benchmarks/x.py`, `scripts/x.sh`), in code blocks too."""
    found = {match.group(1) for match in COMMAND.finditer(text)}
    for span in INLINE_CODE.finditer(text):
        tokens = span.group(1).split()
        for before, token in zip(["", *tokens[:-1]], tokens, strict=True):
            token = token.rstrip(".,;:)")
            if before.startswith("-") or NOT_A_PATH.search(token) or not REPO_PATH.match(token):
                continue
            found.add(token)
    return found


@pytest.mark.parametrize(
    "text, paths",
    [
        (
            "run `python judges/benchmarks/judge_cpu_load.py --repeats 2` here",
            {"judges/benchmarks/judge_cpu_load.py"},
        ),
        ("```\nscripts/gpu-check.sh --step\n```", {"scripts/gpu-check.sh"}),
        (
            "see `judges/gpu/package.py` and `judges/tests/`.",
            {"judges/gpu/package.py", "judges/tests/"},
        ),
        ("`guidance-ttt export work/x --out results/my-run`", set()),
        ("`harbor/*/tests/verify.py`, `<state-dir>/programs/`, `results/x-*.json`", set()),
        ("`harness.agent` and `reef serve -c serve.yaml`", set()),
    ],
)
def test_a_named_path_is_told_from_other_code(text, paths):
    assert named_paths(text) == paths


@pytest.mark.parametrize(
    "line, history",
    [
        ("measured in round 7 (2026-12-02)", True),
        ("raw files in Round7/", True),
        ("on machines 1 and 3", True),
        ("machine-4 ran out of memory", True),
        ("16 rounds per step", False),
        ("the machine's first trial", False),
        ("a 2-core machine", False),
    ],
)
def test_the_history_pattern_finds_dated_runs_only(line, history):
    assert bool(HISTORY.search(line)) is history


@pytest.mark.parametrize(
    "doc", sorted(path.relative_to(REPO).as_posix() for path in _reference_docs())
)
def test_reference_docs_name_no_rounds_or_machines(doc):
    """Dated history ("round 7", "machine 4") belongs in a component's measurement log."""
    found = []
    for number, line in enumerate((REPO / doc).read_text(encoding="utf-8").splitlines(), 1):
        found.extend(f"{doc}:{number}: {match.group(0)!r}" for match in HISTORY.finditer(line))
    assert not found, (
        "reference docs say how things are; move dated runs to a measurement log "
        "(e.g. judges/MEASUREMENTS.md):\n" + "\n".join(found)
    )


#: Paths a doc names that are not this repository's, and whose they are.
FOREIGN_PATHS = {"tests/grade.py": "the reference's verifier (docs/differences.md, rows 40 and 44)"}


def _exists(path: str) -> bool:
    """In the repository, or inside a task (`tests/test.sh` of every `harbor/<task>/`)."""
    return (REPO / path).exists() or any(REPO.glob(f"harbor/*/{path}"))


def test_every_path_and_command_a_reference_doc_names_exists():
    missing = []
    for doc in _reference_docs():
        for path in sorted(named_paths(doc.read_text(encoding="utf-8"))):
            if path not in FOREIGN_PATHS and not _exists(path):
                missing.append(f"{doc.relative_to(REPO)}: {path}")
    assert not missing, "docs name paths that do not exist (fix the doc):\n" + "\n".join(missing)


def test_the_judges_reference_stays_short():
    lines = (REPO / "judges" / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 600, f"judges/README.md has {lines} lines; the judge's reference stays ≤ 600"
