"""Harbor's trial environment without Docker: the "container" is a host directory.

`run.sh` uses it when Docker is absent (the preflight's trial row says so): files are copied in
and out of `<trial>/container`, and `exec` runs `bash -c` under bubblewrap with that directory's
top-level entries (`/workspace`, `/logs`, `/tests`, ...) bound over a read-only view of the host
system. It shares the host network (the verifier must reach the judge) and declares Harbor's
allowlist capabilities without enforcing them, so the task's network allowlist is not applied:
the trial container only receives the final program and re-scores it, and the search itself
runs on the host in both environments.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from pathlib import Path, PurePath

from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import EnvironmentCapabilities

#: Top-level host folders the container does not see (it gets its own /proc and /dev).
SYSTEM_SKIP = frozenset({"proc", "dev", "sys", "tmp"})
#: How run.py names this environment to Harbor.
IMPORT_PATH = "harness.run.local_environment:LocalEnvironment"


class LocalEnvironment(BaseEnvironment):
    """A Harbor environment on the host: the container's files live in `<trial>/container`, and
    commands run under bubblewrap (the module docstring says what is and is not isolated)."""

    @staticmethod
    def type() -> str:
        return "local-bubblewrap"

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        return EnvironmentCapabilities(network_allowlist=True, network_allowlist_hostnames=True)

    def _validate_definition(self) -> None:
        if shutil.which("bwrap") is None:
            raise FileNotFoundError("LocalEnvironment needs bubblewrap (bwrap) on PATH")

    @property
    def root(self) -> Path:
        return self.trial_paths.trial_dir / "container"

    def host_path(self, path: str | PurePath) -> Path:
        """Where a container path lives on the host."""
        return self.root / str(path).lstrip("/")

    async def start(self, force_build: bool) -> None:
        for directory in ("workspace", "logs/agent", "logs/verifier", "logs/artifacts", "tmp"):
            (self.root / directory).mkdir(parents=True, exist_ok=True)

    async def stop(self, delete: bool) -> None:
        if delete:
            shutil.rmtree(self.root, ignore_errors=True)

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        target = self.host_path(target_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source_path, target)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        shutil.copytree(source_dir, self.host_path(target_dir), dirs_exist_ok=True)

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.host_path(source_path), target_path)

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        shutil.copytree(self.host_path(source_dir), target_dir, dirs_exist_ok=True)

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        mine = {p.name for p in self.root.iterdir()}
        args = ["bwrap", "--die-with-parent", "--proc", "/proc", "--dev", "/dev"]
        for entry in Path("/").iterdir():
            if entry.name in SYSTEM_SKIP or entry.name in mine:
                continue
            if entry.is_symlink():
                args += ["--symlink", os.readlink(entry), str(entry)]
            else:
                args += ["--ro-bind", str(entry), str(entry)]
        for name in sorted(mine):
            args += ["--bind", str(self.root / name), f"/{name}"]
        # This interpreter (the verifier's PYTHON) stays reachable wherever it is installed,
        # also under a top-level folder the container shadows or skips (e.g. /tmp).
        for prefix in sorted({sys.prefix, sys.base_prefix}):
            args += ["--ro-bind", prefix, prefix]
        for key, value in (self._merge_env(env) or {}).items():
            args += ["--setenv", key, value]
        args += ["--chdir", cwd or "/", "bash", "-c", command]
        process = await asyncio.create_subprocess_exec(
            *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        try:
            out, err = await asyncio.wait_for(process.communicate(), timeout_sec)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise
        return ExecResult(
            stdout=out.decode(errors="replace"),
            stderr=err.decode(errors="replace"),
            return_code=process.returncode or 0,
        )
