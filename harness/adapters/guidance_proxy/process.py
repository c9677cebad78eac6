"""The key forwarder as a process beside a run: started on a loopback port with the key in its
environment only (never on its command line or in a file), waited for, and stopped.

    with running_forwarder(upstream_url, port, log_path) as url:   # http://127.0.0.1:PORT
        ...   # point the settings copy's inference.upstream-url at `url`
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from harness.adapters.child_process import start_tied
from harness.adapters.guidance_proxy import KEY_VARIABLE

__all__ = ["KEY_VARIABLE", "running_forwarder"]


@contextlib.contextmanager
def running_forwarder(
    upstream: str, port: int, log_path: Path, *, ready_timeout_s: float = 10.0
) -> Iterator[str]:
    """Run `python -m harness.adapters.guidance_proxy` for `upstream` on 127.0.0.1:`port` (its
    output appended to `log_path`) until the block ends; yields its URL once it answers (or
    `ready_timeout_s` has passed: the run then names the forwarder in its first request's
    error). It inherits the environment, where `KEY_VARIABLE` holds the key."""
    command = [sys.executable, "-m", "harness.adapters.guidance_proxy"]
    command += ["--upstream", str(upstream), "--port", str(port)]
    url = f"http://127.0.0.1:{port}"
    with Path(log_path).open("ab") as log:
        # Its own session, and SIGTERM when this command dies, however it dies.
        proxy = start_tied(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + ready_timeout_s
            while time.monotonic() < deadline and proxy.poll() is None:
                try:
                    httpx.get(url + "/v1/models", timeout=1.0)
                    break
                except httpx.HTTPError:
                    time.sleep(0.1)
            yield url
        finally:
            proxy.terminate()
            try:
                proxy.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proxy.kill()
                proxy.wait(timeout=10)
