"""The project's local judge (`python -m judges`) on 127.0.0.1 with an ephemeral port: the judge
a command starts for itself (`guidance-ttt run` and `./run.sh` without a judge URL, the
rehearsal, `reevaluate`, the tests), through the judge's own launcher
(`judges.service.process.JudgeProcess`).

    with LocalJudge(state_dir, "--generated-cases", "2", "--seed", "11") as judge:
        judge.url                # http://127.0.0.1:PORT

`args` are the judge's own CLI options. The judge is stopped with SIGTERM on exit (SIGKILL when
it lingers); it runs in a session of its own and dies with the command whatever ends it
(`harness.adapters.child_process`). Its output goes to `log` (default `<state_dir>/service.log`).
Unlike a test's judge, it never falls back to per-process limits where no cgroup can be used:
the judge's own refusal stands.

With `with_token=True` (every judge a run, rehearsal, experiment or re-evaluation starts for
itself) the judge gets a fresh random access token, through its environment only: any other
local user who finds its port gets 401 (judges/README.md, "Access"). While the judge runs the
token is also in this process's environment (`GUIDANCE_TTT_JUDGE_TOKEN`, which the harness's
judge clients send), and `token_environment()` hands it to the processes the caller starts;
it is never printed, logged or written to a file.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import httpx

from harness.adapters.child_process import start_tied
from harness.adapters.judge.token import TOKEN_ENV, judge_headers
from judges.api import JudgeProcess


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
        self._token = secrets.token_urlsafe(32) if with_token else None
        self._saved_token: str | None = None
        self._judge = JudgeProcess(
            state_dir,
            *args,
            startup_timeout=start_timeout_s,
            environment=self.token_environment(),
            log=log,
            spawn=start_tied,
            per_process_fallback=False,
        )
        self.command = self._judge.command

    @property
    def url(self) -> str:
        """`http://127.0.0.1:PORT` once started."""
        return self._judge.url

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

    def __enter__(self) -> LocalJudge:
        try:
            self._judge.start()
        except RuntimeError as error:
            raise RuntimeError(f"local judge did not start: {error}") from None
        except BaseException:  # a signal while it starts: no judge is left behind
            self._judge.stop(timeout=20)
            raise
        if self._token is not None:  # this process's judge clients send it while it runs
            self._saved_token = os.environ.get(TOKEN_ENV)
            os.environ[TOKEN_ENV] = self._token
        return self

    def __exit__(self, *exc: object) -> None:
        if self._token is not None and os.environ.get(TOKEN_ENV) == self._token:
            if self._saved_token is None:
                os.environ.pop(TOKEN_ENV, None)
            else:
                os.environ[TOKEN_ENV] = self._saved_token
        self._judge.stop(timeout=20)
