"""The project's local judge (`python -m judges`) in a subprocess on 127.0.0.1 with an ephemeral
port: the judge a command starts for itself (`guidance-ttt run` and `./run.sh` without a judge
URL, the rehearsal, `reevaluate`, the tests).

    with LocalJudge(state_dir, "--generated-cases", "2", "--seed", "11") as judge:
        judge.url                # http://127.0.0.1:PORT
        judge.output()           # what the judge printed so far

`args` are the judge's own CLI options. The judge is stopped with SIGTERM on exit (SIGKILL when
it lingers); it runs in a session of its own and dies with the command whatever ends it
(`harness.adapters.child_process`). With `log` its output is also appended to that file.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx

from harness.adapters.child_process import start_tied


class LocalJudge:
    """The project's judge service (`python -m judges`) on 127.0.0.1 with an ephemeral port, in
    its own state directory; stopped with SIGTERM on exit. `args` are extra CLI options."""

    def __init__(
        self,
        state_dir: Path,
        *args: str,
        start_timeout_s: float = 180.0,
        log: Path | None = None,
    ) -> None:
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
        self.start_timeout_s = start_timeout_s
        self.log = log
        self.url = ""
        self._process: subprocess.Popen[str] | None = None
        self._lines: list[str] = []

    def describe(self) -> str:
        """What it serves, for the preflight's row: `problem ID (N cases, suite S)` per problem
        its `GET /problems` lists (the suite as the judge labels it)."""
        try:
            listed = httpx.get(self.url + "/problems", timeout=10.0).json().get("problems", [])
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            return f"{self.url} (GET /problems failed: {exc})"
        parts = []
        for problem in listed[:5]:
            suite = problem.get("suite")
            label = suite.get("label") or suite.get("name") if isinstance(suite, dict) else suite
            parts.append(
                f"problem {problem.get('id')} ({problem.get('cases')} cases, suite {label})"
            )
        return ", ".join(parts) or f"{self.url} (no problem listed)"

    def output(self) -> str:
        """Everything the judge printed so far."""
        return "".join(self._lines)

    def __enter__(self) -> LocalJudge:
        self._process = start_tied(
            self.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        lines = self._lines
        found = threading.Event()
        log = None if self.log is None else open(self.log, "a", encoding="utf-8")

        def read() -> None:
            assert self._process is not None and self._process.stdout is not None
            for line in self._process.stdout:
                lines.append(line)
                if log is not None:
                    log.write(line)
                    log.flush()
                match = re.search(r"judge listening on (http://127\.0\.0\.1:\d+)", line)
                if match and not found.is_set():
                    self.url = match[1]
                    found.set()
            if log is not None:
                log.close()

        threading.Thread(target=read, daemon=True).start()
        if not found.wait(self.start_timeout_s):
            self.__exit__()
            raise RuntimeError(
                f"local judge did not start: {' '.join(self.command)}\n{''.join(lines)}"
            )
        return self

    def __exit__(self, *exc: object) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=10)
