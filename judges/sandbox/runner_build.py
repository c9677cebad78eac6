"""Build judge-runner (judges/sandbox/runner.cpp) once per machine and reuse it.

A judge start used to compile the runner with `g++ -O2 -static` (about 1.8 s of CPU) every time.
The binary depends only on the source, the compiler and the link flags, so it is kept in a cache
directory of the judge's user, named by the SHA-256 of those three, and copied into each
sandbox's scratch directory. A changed `runner.cpp` or compiler gives a new name, never a stale
binary.

The cache is `$XDG_CACHE_HOME/guidance-ttt-judge` (else `~/.cache/guidance-ttt-judge`). It is used
only when it is a real directory owned by the judge's user and writable by nobody else (mode
0700 on creation): the runner is PID 1 of every sandbox, and a binary another user could replace
would run as the judge. Where the cache is unusable (no home, read-only, foreign owner), the
runner is compiled into the scratch directory as before; the judge starts either way.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

RUNNER_SOURCE = Path(__file__).with_name("runner.cpp")
RUNNER_LINK = ["-static"]  # tried first; without it where static libraries are missing
CACHE_NAME = "guidance-ttt-judge"


class RunnerBuildError(RuntimeError):
    """g++ could not build judge-runner; the message is the compiler's."""


def cache_directory() -> Path | None:
    """The per-user cache directory, created private if missing, or None where it cannot be
    trusted or made (see the module docstring)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if not os.path.isabs(base):
        return None
    directory = Path(base) / CACHE_NAME
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        info = os.lstat(directory)
    except OSError:
        return None
    private = stat.S_IMODE(info.st_mode) & 0o022 == 0
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or not private:
        return None
    return directory


def _compiler_identity() -> bytes:
    result = subprocess.run(["g++", "--version"], capture_output=True, check=False)
    return result.stdout


def _build_key(link: list[str]) -> str:
    digest = hashlib.sha256()
    for part in (RUNNER_SOURCE.read_bytes(), _compiler_identity(), " ".join(link).encode()):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()[:32]


def _compile(output: Path) -> None:
    """Compile to `output`, statically where the toolchain can (the runner starts twice per run,
    and loading libstdc++ each time costs about 1 ms of CPU), else dynamically."""
    for link in (RUNNER_LINK, []):
        command = ["g++", "-O2", *link, "-o", str(output), str(RUNNER_SOURCE)]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode == 0:
            return
    raise RunnerBuildError(f"cannot build {RUNNER_SOURCE}: {result.stderr.strip()}")


def _cached_runner(directory: Path) -> Path:
    """The cached binary for today's source and compiler, compiled on a miss. Concurrent judges
    each compile to a private temporary name and rename it into place, so a reader never sees a
    half-written binary."""
    binary = directory / f"judge-runner-{_build_key(RUNNER_LINK)}"
    if binary.is_file() and not binary.is_symlink():
        return binary
    handle, temporary = tempfile.mkstemp(prefix=".judge-runner-", dir=directory)
    os.close(handle)
    try:
        _compile(Path(temporary))
        os.replace(temporary, binary)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
    return binary


def install_runner(destination: Path) -> Path:
    """Put an executable judge-runner at `destination` (in a sandbox's scratch directory): a
    copy of the machine's cached build, or a fresh compile where there is no usable cache."""
    directory = cache_directory()
    if directory is None:
        _compile(destination)
    else:
        shutil.copyfile(_cached_runner(directory), destination)
    destination.chmod(0o755)
    return destination
