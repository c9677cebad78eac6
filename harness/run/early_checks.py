"""The cheap checks of `guidance-ttt run`, made before the local judge, the preflight and Reef
start (each answers in well under a second): the run's task folder, its `--steps` against the
steps its state directory has committed, and whether its endpoints answer at all and list the
configured models. A refusal is one line (`RunRefused`) naming the flag, the settings file and
the command that was typed, and the exit status is non-zero; nothing was started.

The task folder and the committed steps are checked on the new settings before the run's
settings copy replaces the old one (`harness.settings.run_copy.write_run_copy`'s `check`), so
a refused command leaves the run's settings as they were. The endpoints are checked on the
written copy: a connection refused or a host that does not resolve is refused here, a slow or
proxied endpoint is left to the preflight, which also makes the one real request of each model.
"""

from __future__ import annotations

import ipaddress
import json
import shlex
import socket
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from harness.settings.run_copy import NAMED, parse_set, previous_overrides
from harness.settings.run_settings import RunSettings
from harness.settings.task_dirs import task_dir_of
from harness.storage.resume_state import RESUME_STATE, ResumeState

#: How long one endpoint may take to accept a connection or list its models here.
CONNECT_TIMEOUT_S = 1.0
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY")


class RunRefused(RuntimeError):
    """A run refused before anything started; the message names the flag and the fix."""


def steps_source(
    named: Mapping[str, Any], sets: Sequence[str], state_dir: Path, config: Path
) -> str:
    """Where the run's STEPS came from, as the user wrote it: `--steps N`, `--set KEY=N`, an
    earlier command's `--steps N` remembered in the state directory, or the settings file."""
    if named.get("steps") is not None:
        return f"--steps {named['steps']}"
    for item in reversed(list(sets)):
        key = item.partition("=")[0].strip()
        if key.split(".")[-1] == "steps" and key in parse_set([item]):
            return f"--set {item}"
    remembered = previous_overrides(state_dir).get(NAMED["steps"])
    if remembered is not None:
        return f"--steps {remembered} (remembered from an earlier command on this state directory)"
    return f"the steps of {config.name}"


def with_steps(command: str, steps: int) -> str:
    """`command` with its `--steps` (if any) replaced by `--steps steps`."""
    words = shlex.split(command)
    kept: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word == "--steps":
            skip = True
            continue
        if word.startswith("--steps="):
            continue
        kept.append(word)
    return shlex.join([*kept, "--steps", str(steps)])


def refuse_finished(settings: RunSettings, source: str, command: str) -> None:
    """`RunRefused` when the state directory has committed `settings.steps` steps or more:
    STEPS is the final total, so nothing would run."""
    stored = ResumeState.load(settings.state_dir / RESUME_STATE)
    if stored is None or stored.next_step < settings.steps:
        return
    done = stored.next_step
    more = f"`--steps M` (M > {done}) continues it: {with_steps(command, done + 1)}"
    if settings.steps == done:
        raise RunRefused(f"run {settings.state_dir} has committed {done} steps of {done}; {more}")
    raise RunRefused(
        f"{source} asks for {settings.steps} steps but run {settings.state_dir} has committed "
        f"{done} (STEPS is the final total, not an increment); {more}"
    )


def refuse_missing_task(settings: RunSettings, config: Path, sets: Sequence[str]) -> None:
    """`RunRefused` when the task the settings name is no task folder (no contract.json)."""
    given = next(
        (f"--set {i}" for i in reversed(list(sets)) if i.partition("=")[0].strip() == "task"),
        f"task: {settings.task} in {config.name} ({settings.settings_key('task')})",
    )
    try:
        folder = task_dir_of(settings)
    except FileNotFoundError:
        folder = None
    if folder is not None and (folder / "contract.json").is_file():
        return
    where = "no such task" if folder is None else f"{folder} has no contract.json"
    if folder is not None and not folder.exists():
        where = f"{folder} does not exist"
    raise RunRefused(
        f"{given}: {where}; name a task folder (`guidance-ttt task new DIR` writes one) with "
        "--set task=DIR, or a task under harbor/"
    )


def refuse_unreachable(settings: RunSettings, environ: Mapping[str, str]) -> None:
    """`RunRefused` when an endpoint refuses connections, its host does not resolve, or it
    lists its models without the configured one; anything less certain is the preflight's.

    Only a frozen run's endpoints are checked here. A trained run's are the GPU host's own
    servers: on a machine without GPUs they are down, and the preflight's table (the GPUs row
    and the no-GPU hint) says more than the first dead URL. An executor whose API key is
    missing is left to the key's own one-line refusal."""
    if not settings.frozen:
        return
    endpoints: list[tuple[str, str, str, str, str, str]] = []
    if settings.frozen and settings.guidance_upstream_url:
        url = settings.guidance_upstream_url.rstrip("/")
        key = environ.get("GUIDANCE_TTT_GUIDANCE_API_KEY", "")
        endpoints.append(("guidance", url, "/v1/models", key, settings.model, "guidance"))
    try:
        backend = settings.executor(environ.get("GUIDANCE_TTT_EXECUTOR_URL") or None)
    except Exception:  # a preset's own problem (a missing key): the preflight's row says it
        backend = None
    if backend is not None and backend.api_key_env and not environ.get(backend.api_key_env):
        backend = None  # the missing key is the first thing to fix, and is refused by name
    if backend is not None and backend.base_url:
        key = environ.get(backend.api_key_env, "") if backend.api_key_env else ""
        base = backend.base_url.rstrip("/")
        endpoints.append(("executor", base, "/models", key, backend.model, "executor"))
    for role, url, listing, key, model, flag in endpoints:
        problem = _unreachable(url, environ)
        if problem is not None:
            raise RunRefused(
                f"the {role} endpoint {url} {problem}; start it, or pass --{flag}-url with "
                "where it runs"
            )
        if _proxied(url, environ):
            continue
        listed = _listed(url + listing, key)
        if listed is not None and model and model not in listed:
            shown = ", ".join(listed[:5]) + (" …" if len(listed) > 5 else "")
            raise RunRefused(
                f"the {role} endpoint {url} lists {shown or 'no models'}, not {model!r}; pass "
                f"--{flag}-model with a listed id"
            )


def _proxied(url: str, environ: Mapping[str, str]) -> bool:
    """Whether `url` is reached through a proxy (a remote host with a proxy variable set)."""
    host = urlsplit(url).hostname or ""
    return not _loopback(host) and any(environ.get(name) for name in PROXY_VARIABLES)


def _unreachable(url: str, environ: Mapping[str, str]) -> str | None:
    """Why `url` certainly cannot answer (refused, or no such host), else None."""
    parts = urlsplit(url)
    host = parts.hostname
    if not host:
        return "is not a URL (no host)"
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return "has no valid port"
    if _proxied(url, environ):
        return None  # reached through a proxy: only the preflight's request can tell
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
            return None
    except socket.gaierror:
        return f"names host {host!r}, which does not resolve"
    except ConnectionRefusedError:
        return f"refuses connections on port {port} (nothing listens there)"
    except OSError:
        return None  # a timeout or an unreachable network: the preflight waits longer


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _listed(url: str, key: str | None) -> list[str] | None:
    """The model ids `GET url` lists; None when it lists none or does not answer quickly."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=CONNECT_TIMEOUT_S) as response:
            data = json.loads(response.read(1 << 20)).get("data")
    except (OSError, ValueError, AttributeError, urllib.error.URLError):
        return None
    if not isinstance(data, list):
        return None
    return [str(item.get("id")) for item in data if isinstance(item, dict) and item.get("id")]
