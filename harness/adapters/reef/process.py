"""A real ``reef serve`` on loopback as a process: started, waited for, stopped.

``running_reef`` starts reef-infra's own CLI as a subprocess (``reef serve`` from the venv of the
running interpreter) in a working directory of the caller's choice (Reef keeps its state under
``.reef/`` there unless the settings say otherwise). With ``config`` it runs ``reef serve -c
<config>`` (a frozen-guidance settings file such as a run's copy of ``serve-frozen.yaml``), as an
experiment's frozen run does. Without it, it runs Reef's record-only mode from command-line flags
in front of the OpenAI-compatible ``upstream`` it is given, with the record-only tttd recipe by
default: Reef proxies inference to the upstream, returns real receipts, validates reports with
the tttd report contract and stores records (``harness.rehearsal.reef_process`` adds a scripted
upstream for the rehearsal and the tests). It waits for ``GET /healthz`` from the process it
started (the port's listener must be that process or a descendant,
``harness.adapters.reef.ownership``: another Reef's answer is refused), yields a
:class:`ReefService`, and stops Reef (SIGTERM to its process group, then SIGKILL after a grace
period).

    with running_reef(workdir) as reef:
        response = httpx.post(reef.url + "/v1/chat/completions", headers=reef.headers(), ...)

Nothing here needs a GPU. Startup takes a few seconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx

from harness.adapters.child_process import start_tied
from harness.adapters.reef.ownership import describe_owner, owned_by

#: The recipe that validates tttd reports without training (no GPU, no Ray).
RECORD_ONLY_RECIPE = "tttd.recipe:TTTDReportsRecipe"
DEFAULT_TOKEN = "reef-local"


def reef_executable() -> Path:
    """The ``reef`` CLI installed beside the running interpreter (the dev venv's)."""
    path = Path(sys.executable).parent / "reef"
    if not path.exists():
        raise FileNotFoundError(
            f"reef-infra's CLI is not installed beside {sys.executable}: {path}"
        )
    return path


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1 (the OS picks it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Upstream(Protocol):
    """An OpenAI-compatible endpoint Reef proxies inference to (its address and model)."""

    @property
    def base_url(self) -> str: ...

    @property
    def model(self) -> str: ...


@dataclass(frozen=True)
class ReefService:
    """A running Reef: where it listens, its token, its upstream and its log."""

    url: str
    port: int
    token: str | None
    workdir: Path
    log_path: Path
    upstream: Any  # the `Upstream` given; None when Reef read a settings file
    process: subprocess.Popen[bytes]

    def headers(self, scenario: str | None = None) -> dict[str, str]:
        """Request headers: the bearer token and, when given, ``x-reef-scenario``."""
        headers = {} if self.token is None else {"Authorization": f"Bearer {self.token}"}
        if scenario is not None:
            headers["x-reef-scenario"] = scenario
        return headers

    def log_text(self) -> str:
        """Everything ``reef serve`` printed so far (for assertion messages)."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@contextlib.contextmanager
def running_reef(
    workdir: Path,
    *,
    upstream: Upstream | None = None,
    token: str | None = DEFAULT_TOKEN,
    recipe: str = RECORD_ONLY_RECIPE,
    recipe_config: Mapping[str, object] | None = None,
    extra_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    ready_timeout_s: float = 90.0,
    config: Path | None = None,
    port: int | None = None,
) -> Iterator[ReefService]:
    """Run ``reef serve`` in ``workdir`` until the block ends.

    Without ``config``, ``upstream`` is required (the endpoint Reef proxies to).
    ``recipe_config`` entries become ``--recipe.config.<key> <value>`` (default: the 2×4
    qualification grid); ``extra_args`` are appended; ``env`` is merged over ``os.environ``.
    With ``config``, Reef reads that file instead (``reef serve -c config``; ``port`` must be the
    file's ``reef.port`` and ``token`` its token; ``upstream``, ``recipe`` and ``recipe_config``
    are not used). Raises ``RuntimeError`` with the service log when Reef exits or is not healthy
    in time.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    fixture = upstream
    if config is not None:
        if port is None:
            raise ValueError("running_reef(config=...) needs the file's reef.port as `port`")
        command = [str(reef_executable()), "serve", "-c", str(config), *extra_args]
    else:
        if fixture is None:
            raise ValueError("running_reef() without a settings file needs the `upstream`")
        port = free_port() if port is None else port
        command = _record_only_command(fixture, port, token, recipe, recipe_config)
        command += list(extra_args)
    log_path = workdir / "reef-serve.log"
    # never through a symlink planted in the log's place
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
    log_file = os.fdopen(os.open(log_path, flags, 0o644), "wb")
    process = start_tied(  # its own session; SIGTERM when this command dies, however
        command,
        cwd=workdir,
        env={**os.environ, **(env or {})},
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    service = ReefService(
        url=f"http://127.0.0.1:{port}",
        port=port,
        token=token,
        workdir=workdir,
        log_path=log_path,
        upstream=fixture,
        process=process,
    )
    try:
        _wait_healthy(service, ready_timeout_s)
        yield service
    finally:
        _stop(process, workdir)
        log_file.close()


def _record_only_command(
    fixture: Upstream,
    port: int,
    token: str | None,
    recipe: str,
    recipe_config: Mapping[str, object] | None,
) -> list[str]:
    grid = (
        {"groups-per-step": 2, "rollouts-per-group": 4} if recipe_config is None else recipe_config
    )
    command = [
        str(reef_executable()),
        "serve",
        "--inference.upstream-url",
        fixture.base_url,
        "--inference.upstream-model",
        fixture.model,
        "--reef.host",
        "127.0.0.1",
        "--reef.port",
        str(port),
        "--recipe.implementation",
        recipe,
    ]
    for key, value in grid.items():
        command += [f"--recipe.config.{key}", str(value)]
    if token is not None:
        command += ["--reef.token", token]
    return command


def _wait_healthy(service: ReefService, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if service.process.poll() is not None:
            raise RuntimeError(
                f"reef serve exited with {service.process.returncode} before it was healthy:\n"
                f"{service.log_text()}"
            )
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(service.url + "/healthz", timeout=2.0).status_code == 200:
                if owned_by(service.port, service.process.pid):
                    return
                raise RuntimeError(
                    f"port {service.port} answers /healthz but is held by "
                    f"{describe_owner(service.port) or 'another process'}, not by the reef "
                    f"serve started here (pid {service.process.pid}); stop that process or "
                    f"choose a free port:\n{service.log_text()}"
                )
        time.sleep(0.2)
    raise RuntimeError(f"reef serve was not healthy within {timeout_s}s:\n{service.log_text()}")


def _stop(process: subprocess.Popen[bytes], workdir: Path, grace_s: float = 30.0) -> None:
    """SIGTERM ``reef serve`` (it stops its services in reverse order), SIGKILL if it lingers.

    Reef starts each service in a session of its own, so after a forced stop the service
    processes it recorded in ``.reef/run/*.worker.json`` are stopped by their ids as well.
    """
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
    for record in (workdir / ".reef" / "run").glob("*.worker.json"):
        with contextlib.suppress(OSError, ValueError):
            for pid in json.loads(record.read_text()).get("pids", {}).values():
                _kill_group(int(pid))


def _kill_group(pid: int) -> None:
    """Stop a leftover service session by its leader's id (no-op when it is already gone)."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
