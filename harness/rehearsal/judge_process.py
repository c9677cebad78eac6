"""The project's local judge (`python -m judges`) in a subprocess on 127.0.0.1 with an ephemeral
port, for the CPU rehearsal and the tests.

    with LocalJudge(state_dir, "--generated-cases", "2", "--seed", "11") as judge:
        judge.url                # http://127.0.0.1:PORT
        judge.output()           # what the judge printed so far

`args` are the judge's own CLI options. The judge is stopped with SIGTERM on exit (SIGKILL when
it lingers).
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
from pathlib import Path


class LocalJudge:
    """The project's judge service (`python -m judges`) on 127.0.0.1 with an ephemeral port, in
    its own state directory; stopped with SIGTERM on exit. `args` are extra CLI options."""

    def __init__(self, state_dir: Path, *args: str, start_timeout_s: float = 180.0) -> None:
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
        self.url = ""
        self._process: subprocess.Popen[str] | None = None
        self._lines: list[str] = []

    def output(self) -> str:
        """Everything the judge printed so far."""
        return "".join(self._lines)

    def __enter__(self) -> LocalJudge:
        self._process = subprocess.Popen(
            self.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        lines = self._lines
        found = threading.Event()

        def read() -> None:
            assert self._process is not None and self._process.stdout is not None
            for line in self._process.stdout:
                lines.append(line)
                match = re.search(r"judge listening on (http://127\.0\.0\.1:\d+)", line)
                if match and not found.is_set():
                    self.url = match[1]
                    found.set()

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
