"""The project's local judge (`python -m judges`) in a subprocess on 127.0.0.1 with an ephemeral
port: the judge a command starts for itself (`guidance-ttt run` and `./run.sh` without a judge
URL, the rehearsal, `reevaluate`, the tests).

    with LocalJudge(state_dir, "--generated-cases", "2", "--seed", "11") as judge:
        judge.url                # http://127.0.0.1:PORT
        judge.output()           # what the judge printed so far

`args` are the judge's own CLI options. The judge is stopped with SIGTERM on exit (SIGKILL when
it lingers); it runs in a session of its own and dies with the command whatever ends it
(`harness.adapters.child_process`). With `log` its output is also appended to that file.

With `with_token=True` (every judge a run, rehearsal, experiment or re-evaluation starts for
itself) the judge gets a fresh random access token, through its environment only: any other
local user who finds its port gets 401 (docs/judge.md, "Access"). While the judge runs the
token is also in this process's environment (`GUIDANCE_TTT_JUDGE_TOKEN`, which the harness's
judge clients send), and `token_environment()` hands it to the processes the caller starts;
it is never printed, logged or written to a file.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx

from harness.adapters.child_process import start_tied
from harness.adapters.judge.token import TOKEN_ENV, judge_headers


class LocalJudge:
    """The project's judge service (`python -m judges`) on 127.0.0.1 with an ephemeral port, in
    its own state directory; stopped with SIGTERM on exit. `args` are extra CLI options."""

    def __init__(
        self,
        state_dir: Path,
        *args: str,
        start_timeout_s: float = 180.0,
        log: Path | None = None,
        with_token: bool = False,
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
        self._token = secrets.token_urlsafe(32) if with_token else None
        self._saved_token: str | None = None

    def token_environment(self) -> dict[str, str]:
        """The environment entry that gives a client this judge's token (empty without one)."""
        return {} if self._token is None else {TOKEN_ENV: self._token}

    def describe(self) -> str:
        """What it serves, for the preflight's row: `problem ID (N cases, suite S)` per problem
        its `GET /problems` lists (the suite as the judge labels it)."""
        try:
            answer = httpx.get(self.url + "/problems", timeout=10.0, headers=judge_headers())
            listed = answer.json().get("problems", [])
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
        environment = {**os.environ, **self.token_environment()}
        self._process = start_tied(
            self.command,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        if self._token is not None:  # this process's judge clients send it while it runs
            self._saved_token = os.environ.get(TOKEN_ENV)
            os.environ[TOKEN_ENV] = self._token
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
        if self._token is not None and os.environ.get(TOKEN_ENV) == self._token:
            if self._saved_token is None:
                os.environ.pop(TOKEN_ENV, None)
            else:
                os.environ[TOKEN_ENV] = self._saved_token
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=10)
