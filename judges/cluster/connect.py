"""Joining a Ray cluster, or starting the judge's own on this host bound to loopback only.

Ray's security model (docs.ray.io, "Security"): Ray assumes a trusted network. Anyone who can
reach a cluster's ports — the GCS, each raylet, each worker's gRPC server, the dashboard and its
agents — can submit work and so run code as the user Ray runs as (here: the judge's, root on a
GPU host). Ray 2.52+ offers token authentication (`RAY_AUTH_MODE=token`, the token in
`RAY_AUTH_TOKEN` or in the file `RAY_AUTH_TOKEN_PATH` names); every process of the cluster and
every client must have the same token.

- `--ray local` starts a private single-host cluster whose every component listens on loopback
  only: Ray binds its servers to the node's IP address and to loopback alone when that address
  is a loopback one, which is what Ray does on its own for a local cluster on Windows and macOS
  (`RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`); `local_cluster` asks for exactly that, while the
  cluster starts. It also turns token authentication on with a fresh random token held in the
  environment of the cluster's processes (never written to a file), so another local user's
  process cannot use the cluster either. Tested by listing the sockets of every Ray process
  (judges/tests/test_ray_loopback.py).
- Joining a cluster (`--ray ADDRESS`, `RAY_ADDRESS`): the operator secures the network. Start
  the cluster with `RAY_AUTH_MODE=token` and a token and give the judge the same
  `RAY_AUTH_MODE`/`RAY_AUTH_TOKEN` (or `RAY_AUTH_TOKEN_PATH`) in its environment; Ray reads them.
  A join without token authentication is logged as a warning naming the risk, and a refused
  token is a start-up error naming the variables (`join`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
from collections.abc import Iterator
from typing import Any

import ray
from ray.exceptions import AuthenticationError

from judges.sandbox.runner import SandboxUnavailable

log = logging.getLogger("judges.cluster")

LOCAL_ONLY_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # "0": the node's address is loopback
AUTH_MODE_ENV = "RAY_AUTH_MODE"
AUTH_TOKEN_ENV = "RAY_AUTH_TOKEN"
AUTH_TOKEN_PATH_ENV = "RAY_AUTH_TOKEN_PATH"


@contextlib.contextmanager
def _loopback_node() -> Iterator[None]:
    """While a local cluster starts: its node's address is loopback (Ray's own local-only
    mode), in this process and in the processes it starts; restored afterwards."""
    from ray._private import ray_constants  # Ray reads the setting from here at call time

    before_env, before = os.environ.get(LOCAL_ONLY_ENV), ray_constants.ENABLE_RAY_CLUSTER
    os.environ[LOCAL_ONLY_ENV] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = before
        if before_env is None:
            os.environ.pop(LOCAL_ONLY_ENV, None)
        else:
            os.environ[LOCAL_ONLY_ENV] = before_env


def local_cluster(runtime_env: dict[str, Any]) -> None:
    """Start the judge's own cluster on this host: loopback only, token authentication on."""
    os.environ[AUTH_MODE_ENV] = "token"
    os.environ[AUTH_TOKEN_ENV] = secrets.token_hex(32)  # the cluster's processes inherit it
    os.environ.pop(AUTH_TOKEN_PATH_ENV, None)
    # This process read Ray's settings when it imported Ray: re-read them (as Ray itself does
    # when it turns token authentication on), and drop any token it had loaded.
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()
    with _loopback_node():
        ray.init(
            address="local",
            include_dashboard=False,
            runtime_env=runtime_env,
            _node_ip_address="127.0.0.1",
        )


def join(address: str, runtime_env: dict[str, Any]) -> None:
    """Join the cluster at `address` (or start the judge's own for `local`); one clear line
    when that fails."""
    try:
        if address == "local":
            local_cluster(runtime_env)
            return
        if os.environ.get(AUTH_MODE_ENV, "").lower() != "token":
            log.warning(
                "joining the Ray cluster at %s without token authentication (%s is not "
                "'token'): anyone who can reach its ports runs code as its user; see "
                "judges/README.md, 'Security model'",
                address,
                AUTH_MODE_ENV,
            )
        ray.init(address=address, runtime_env=runtime_env)
    except AuthenticationError as error:
        raise SandboxUnavailable(
            f"the Ray cluster at {address!r} refused this judge's token ({_first_line(error)});"
            f" set {AUTH_MODE_ENV}=token and the cluster's token in {AUTH_TOKEN_ENV} or a file "
            f"named by {AUTH_TOKEN_PATH_ENV}"
        ) from None
    except (ConnectionError, RuntimeError, ValueError) as error:
        raise SandboxUnavailable(
            f"cannot join the Ray cluster at {address!r} ({_first_line(error)}); start one "
            "(ray start --head), set RAY_ADDRESS, or pass --ray local"
        ) from None
    except Exception as error:  # Ray raises a bare Exception when its node does not start
        if "timed out during startup" not in str(error):
            raise
        raise SandboxUnavailable(
            f"the Ray node for {address!r} did not start within Ray's 30 s "
            f"({_first_line(error)}); the host is overloaded: start the judge again when it "
            "is less busy"
        ) from None


def _first_line(error: BaseException | None) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else "no message"
