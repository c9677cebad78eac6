"""The judge's launcher: the service as a subprocess, its address learnt from its announcement.
Everything that starts a judge uses it: the recipe's runs and rehearsals
(`harness.adapters.judge.process.LocalJudge`), the tests and the benchmarks.

    with JudgeProcess(state_dir, "--generated-cases", "3") as judge:
        httpx.get(f"{judge.url}/health")

The service is started with `--port 0`; its announced line `judge listening on http://…` gives
the URL. Everything it prints goes to `log` (default `<state_dir>/service.log`). `stop()` sends
SIGTERM and returns the exit status (0 for a clean stop). `environment` adds variables for the
judge only (e.g. its access token); `spawn` replaces `subprocess.Popen` (the recipe passes one
that ties the judge to its command's life). `cgroup_missing()` says whether runs can be bounded
by a cgroup here; with `per_process_fallback` (tests and benchmarks) a host without one starts
the judge with `--accept-per-process-limits` instead of refusing. `test_mode` sets the judge's
test-only switches (`judges.service.testing`), e.g.

    JudgeProcess(state_dir, "--problems", "p", test_mode=("gpu-cpu-stand-in", "kept-sandbox"))
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from judges.cgroups.groups import CgroupUnavailable, detect
from judges.service import testing

_ANNOUNCE = re.compile(r"judge listening on (http://\S+)")


def cgroup_missing() -> str | None:
    """None where the judge can bound runs with a cgroup here, else the one-line reason
    (tests skip what needs the bound with it)."""
    try:
        detect("auto").close()
    except CgroupUnavailable as error:
        return f"no cgroup bound on this host: {error}"
    return None


class JudgeProcess:
    """`python -m judges --port 0 --state-dir <state_dir> [args]` in a child process."""

    def __init__(
        self,
        state_dir: Path,
        *args: str,
        startup_timeout: float = 120.0,
        cwd: Path | None = None,
        test_mode: tuple[str, ...] = (),
        environment: Mapping[str, str] | None = None,
        log: Path | None = None,
        spawn: Callable[..., subprocess.Popen[Any]] = subprocess.Popen,
        per_process_fallback: bool = True,
    ) -> None:
        self.cwd = cwd  # the service's working directory (relative flags resolve against it)
        self.command = [
            sys.executable,
            "-m",
            "judges",
            "--port",
            "0",
            "--state-dir",
            str(state_dir),
            *args,
        ]
        self._environment = {**(environment or {}), testing.VARIABLE: ",".join(test_mode)}
        self.switches = testing.read(self._env())  # a wrong word fails here, not in the child
        self.startup_timeout = startup_timeout
        self.url = ""
        self.process: subprocess.Popen[str] | None = None
        self.log_path = Path(log) if log is not None else Path(state_dir) / "service.log"
        self._spawn = spawn
        self._per_process_fallback = per_process_fallback

    def _env(self) -> dict[str, str]:
        """This process's environment as it is now, with the judge's own variables."""
        return {**os.environ, **self._environment}

    def start(self) -> JudgeProcess:
        """Start the service and wait for its announcement; RuntimeError with its log if not.

        With `per_process_fallback`, where no cgroup can bound runs on this host and neither the
        flags nor the test mode choose, the service is started with `--accept-per-process-limits`
        (tests that need the bound skip themselves).
        """
        chosen = "--accept-per-process-limits" in self.command or self.switches.cgroup != "auto"
        if self._per_process_fallback and not chosen and cgroup_missing() is not None:
            self.command.append("--accept-per-process-limits")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "a", encoding="utf-8")  # noqa: SIM115 - closed by the reader
        self.process = self._spawn(
            self.command,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=self._env(),
            cwd=self.cwd,
        )
        found = threading.Event()

        def read_output() -> None:
            """Copy what the service prints to the log, noting the announcement: reading to
            the end keeps a full pipe from ever blocking the service."""
            assert self.process is not None and self.process.stdout is not None
            with log:
                for line in self.process.stdout:
                    log.write(line)
                    log.flush()
                    match = _ANNOUNCE.search(line)
                    if match and not found.is_set():
                        self.url = match.group(1)
                        found.set()
            found.set()  # it exited without announcing itself: no need to wait any longer

        threading.Thread(target=read_output, daemon=True).start()
        if not found.wait(self.startup_timeout) or not self.url:
            self.stop()
            raise RuntimeError(
                f"judge did not announce itself within {self.startup_timeout:g} s (exit status "
                f"{self.process.returncode}): "
                f"{' '.join(self.command)}\n{self.log_path.read_text()[-4000:]}"
            )
        return self

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, wait, and return the exit status (SIGKILL after `timeout` seconds)."""
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def __enter__(self) -> JudgeProcess:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()
