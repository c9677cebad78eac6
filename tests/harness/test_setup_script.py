"""scripts/setup.sh's decisions, as ./run.sh and ./test.sh take them on a fresh clone, without
network: the script runs in a copy of the checkout's set-up files (scripts/, pyproject.toml,
judges/pyproject.toml) with GUIDANCE_TTT_SETUP_DRY_RUN=1, and a PATH of stub interpreters stands
for the machine's Pythons (each stub answers the version probe as that version would). The real
installation is what ./test.sh does on every fresh machine; hatch_build.py's refusal of an old
pip is checked with the real hatchling below."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _stub(directory: Path, name: str, minor: int) -> Path:
    """A `python3.X` stand-in: the version probe exits as Python 3.<minor> would; --version
    prints it."""
    path = directory / name
    path.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = --version ]; then echo "Python 3.{minor}.0"; exit 0; fi\n'
        f"exit {0 if minor >= 12 else 1}\n"
    )
    path.chmod(0o755)
    return path


def _checkout(tmp_path: Path) -> Path:
    root = tmp_path / "clone"
    shutil.copytree(REPO / "scripts", root / "scripts")
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    (root / "judges").mkdir()
    shutil.copy(REPO / "judges" / "pyproject.toml", root / "judges" / "pyproject.toml")
    return root


def _path_with(stubs: Path) -> str:
    """The stubs first, then only the folders of the tools the scripts use (bash, sha256sum,
    sed...), so that no real python3.1x or pyenv of this machine is found."""
    tools = {Path(shutil.which(t) or "/bin/sh").parent for t in ("bash", "sha256sum", "sed")}
    hidden = []
    for folder in tools:
        for name in ("pyenv", *(f"python3.{m}" for m in range(12, 20))):
            if (folder / name).exists():
                hidden.append(str(folder / name))
    if hidden:
        pytest.skip(f"this machine has {hidden} beside bash: the stub PATH cannot hide it")
    return os.pathsep.join([str(stubs), *map(str, tools)])


def _setup(root: Path, purpose: str, path: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {"PATH": path, "HOME": str(root), "GUIDANCE_TTT_SETUP_DRY_RUN": "1", **env}
    return subprocess.run(
        ["bash", str(root / "scripts" / "setup.sh"), purpose],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_fresh_clone_picks_the_newest_python_and_installs_what_the_command_needs(
    tmp_path: Path,
) -> None:
    stubs = tmp_path / "bin"
    stubs.mkdir()
    _stub(stubs, "python3", 11)
    chosen = _stub(stubs, "python3.12", 12)
    root = _checkout(tmp_path)
    path = _path_with(stubs)
    run = _setup(root, "run", path)
    assert run.returncode == 0, run.stderr
    assert f"would create .venv with {chosen} (Python 3.12.0)" in run.stdout
    # the README's No-GPU path ends with `guidance-ttt plot`: the run set-up installs its extra
    assert "would install ./judges and .[reef,plot] into .venv" in run.stdout
    test = _setup(root, "test", path)
    assert test.returncode == 0, test.stderr
    every = ".[reef,torch,plot,test,watch,cluster,tinker]"
    assert f"would install ./judges and {every} into .venv" in test.stdout


def test_pythons_older_than_3_12_give_one_line_naming_the_need(tmp_path: Path) -> None:
    stubs = tmp_path / "bin"
    stubs.mkdir()
    _stub(stubs, "python3", 11)
    _stub(stubs, "python3.10", 10)
    root = _checkout(tmp_path)
    done = _setup(root, "run", _path_with(stubs))
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "needs Python >= 3.12" in lines[0]
    assert "pyenv install 3.12" in lines[0] and "PYTHON=/path/to/python3.12 ./run.sh" in lines[0]
    assert "would create" not in done.stdout


def test_python_and_pyenv_are_searched(tmp_path: Path) -> None:
    stubs = tmp_path / "bin"
    stubs.mkdir()
    _stub(stubs, "python3", 11)
    pyenv_root = tmp_path / "pyenv"
    (pyenv_root / "versions" / "3.13.1" / "bin").mkdir(parents=True)
    in_pyenv = _stub(pyenv_root / "versions" / "3.13.1" / "bin", "python3", 13)
    (stubs / "pyenv").write_text(f"#!/bin/sh\necho {pyenv_root}\n")
    (stubs / "pyenv").chmod(0o755)
    root = _checkout(tmp_path)
    path = _path_with(stubs)
    done = _setup(root, "run", path)
    assert f"would create .venv with {in_pyenv}" in done.stdout, done.stderr
    named = _stub(tmp_path, "my-python", 12)
    done = _setup(root, "run", path, PYTHON=str(named))
    assert f"would create .venv with {named}" in done.stdout, done.stderr


def test_a_set_up_checkout_installs_nothing_and_a_changed_pyproject_reinstalls(
    tmp_path: Path,
) -> None:
    stubs = tmp_path / "bin"
    stubs.mkdir()
    root = _checkout(tmp_path)
    (root / ".venv" / "bin").mkdir(parents=True)
    _stub(root / ".venv" / "bin", "python", 12)
    projects = (root / "pyproject.toml", root / "judges" / "pyproject.toml")
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in projects)).hexdigest()
    stamp = root / ".venv" / ".guidance-ttt-setup"
    stamp.write_text(f"{digest}\nreef torch plot test watch cluster tinker\n")
    path = _path_with(stubs)
    for purpose in ("run", "test"):  # ./test.sh's set-up covers ./run.sh's
        done = _setup(root, purpose, path)
        assert done.returncode == 0, done.stderr
        assert f".venv is up to date for ./{purpose}.sh" in done.stdout
        assert "would create" not in done.stdout and "would install" not in done.stdout
    stamp.write_text(f"{digest}\nreef\n")
    done = _setup(root, "test", path)
    every = ".[reef,torch,plot,test,watch,cluster,tinker]"
    assert f"would install ./judges and {every} into .venv" in done.stdout
    assert "(missing: torch plot test watch cluster tinker)" in done.stdout
    stamp.write_text(f"{digest}\nreef torch plot test watch cluster tinker\n")
    for changed_file in ("pyproject.toml", "judges/pyproject.toml"):  # either changes the install
        original = (root / changed_file).read_text()
        (root / changed_file).write_text(original + "\n# changed\n")
        done = _setup(root, "run", path)
        assert "would install ./judges and .[reef,plot] into .venv" in done.stdout
        (root / changed_file).write_text(original)


def test_run_sh_sets_up_the_tinker_sdk_for_a_settings_file_that_trains_on_tinker(
    tmp_path: Path,
) -> None:
    """./run.sh with serve-tinker.yaml (by --config, --config= or $GUIDANCE_TTT_SERVE_YAML)
    installs the tinker extra beside a run's; with serve.yaml nothing more. The .venv's python
    is a stub that answers the version probe and stands for the run itself."""
    root = _checkout(tmp_path)
    for name in ("run.sh", "serve.yaml", "serve-tinker.yaml"):
        shutil.copy(REPO / name, root / name)
    (root / ".venv" / "bin").mkdir(parents=True)
    _stub(root / ".venv" / "bin", "python", 12)
    projects = (root / "pyproject.toml", root / "judges" / "pyproject.toml")
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in projects)).hexdigest()
    (root / ".venv" / ".guidance-ttt-setup").write_text(f"{digest}\nreef plot\n")
    stubs = tmp_path / "bin"
    stubs.mkdir()
    environment = {"PATH": _path_with(stubs), "HOME": str(root), "GUIDANCE_TTT_SETUP_DRY_RUN": "1"}

    def run_sh(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(root / "run.sh"), *args],
            env={**environment, **env},
            capture_output=True,
            text=True,
            timeout=60,
        )

    tinker = "would install ./judges and .[reef,plot,tinker] into .venv (missing: tinker)"
    for done in (
        run_sh("--config", "serve-tinker.yaml"),
        run_sh("--steps", "2", "--config=serve-tinker.yaml"),
        run_sh(GUIDANCE_TTT_SERVE_YAML="serve-tinker.yaml"),
    ):
        assert done.returncode == 0, done.stderr
        assert tinker in done.stdout, done.stdout
    for done in (run_sh(), run_sh("--config", "serve.yaml")):
        assert done.returncode == 0, done.stderr
        assert ".venv is up to date for ./run.sh (extras: reef plot)" in done.stdout, done.stdout
    alone = _setup(root, "run", environment["PATH"])  # the purpose alone, as before
    assert alone.returncode == 0, alone.stderr
    named = subprocess.run(
        ["bash", str(root / "scripts" / "setup.sh"), "run", "tinkr"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert named.returncode == 2
    assert "'tinkr' is not an extra of pyproject.toml" in named.stderr


def test_a_venv_of_an_old_python_is_named_with_the_fix(tmp_path: Path) -> None:
    root = _checkout(tmp_path)
    (root / ".venv" / "bin").mkdir(parents=True)
    _stub(root / ".venv" / "bin", "python", 11)
    stubs = tmp_path / "bin"
    stubs.mkdir()
    done = _setup(root, "run", _path_with(stubs))
    assert done.returncode == 1
    assert "this project needs Python >= 3.12: remove .venv" in done.stderr


def test_pip_on_an_old_python_stops_in_one_line_before_resolving() -> None:
    """hatch_build.py, which hatchling loads as pip prepares the metadata (before the resolver),
    refuses an interpreter older than 3.12 in one line, before it imports hatchling itself: run
    here with the version pretended older (the check reads sys.version_info). By hand, with
    Python 3.11: `pip install -e '.[reef]'` ends with this line inside pip's
    metadata-generation-failed frame."""
    probe = (
        "import sys, runpy\n"
        "sys.version_info = (3, 11, 7, 'final', 0)\n"
        f"runpy.run_path({str(REPO / 'hatch_build.py')!r})\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "guidance-ttt needs Python >= 3.12 (this pip runs Python 3.11.7): install Python 3.12 "
        "or newer and use its pip, or let ./run.sh set it up"
    ]


def test_uv_is_given_the_package_sources_pip_would_use(tmp_path: Path) -> None:
    """scripts/pip_config_for_uv.py reads the real pip's configuration: a config file's
    `[global]` and `[install]` sections and the PIP_* variables, the variable before the
    `install` section before `global`, as pip takes them."""
    config = tmp_path / "pip.conf"
    config.write_text(
        "[global]\nindex-url = https://mirror.example/simple\n"
        "extra-index-url = https://one.example/simple https://two.example/simple\n"
        "find-links = /global/wheels\n"
        "[install]\nfind-links = /install/wheels\n"
    )
    environment = {
        k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k != "VIRTUAL_ENV"
    }
    environment.update(PIP_CONFIG_FILE=str(config), PIP_CONSTRAINT=str(tmp_path / "c.txt"))
    printed = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "pip_config_for_uv.py")],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.splitlines()
    pairs = list(zip(printed[::2], printed[1::2], strict=True))
    assert ("--index-url", "https://mirror.example/simple") in pairs
    assert [v for k, v in pairs if k == "--extra-index-url"] == [
        "https://one.example/simple",
        "https://two.example/simple",
    ]
    assert [v for k, v in pairs if k == "--find-links"] == ["/install/wheels"]
    assert ("--constraint", str(tmp_path / "c.txt")) in pairs
