"""The run controller's view of Reef's training bridge, and the adapter to the real one.

Reef 0.1.3 runs its training coordinator as a named Ray actor inside the `slime-driver` service
(`reef.runtime.scheduler.TrainingCoordinator`). The controller only reads it: `health()` and
`start_rollout_id()`, the two read-only calls Reef itself makes with
`ray.get(actor.<method>.remote())`. Where the actor lives is written by Reef into
`<state>/stack/slime-driver/runtime.yaml` under the key `reef`.

`ray` is imported only when the real bridge is first used: the core harness and its tests never
need it, and a machine without it gets an error that names the package and how to install it.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml

log = logging.getLogger(__name__)

#: Reef 0.1.3's defaults (`reef.runtime.executor.connection`) when runtime.yaml leaves them unset.
DEFAULT_ACTOR_NAME = "reef-train-bridge"
DEFAULT_NAMESPACE = "reef"
#: Where Reef writes the slime-driver service's resolved config, relative to the state directory.
RUNTIME_YAML = Path("stack") / "slime-driver" / "runtime.yaml"
RAY_INSTALL_HINT = (
    "pip install 'ray[default]'  (or the project's GPU extra: pip install -e '.[train]')"
)


class TrainingBridge(Protocol):
    """What the run controller reads from Reef's training coordinator (docs/design.md §12).

    `health()` returns at least `ok`, `recoverable`, `start_rollout_id`, `phase`,
    `completed_train_steps`, `last_train_rollout_id`, `last_train_metrics` and `training_job`.
    `start_rollout_id()` is the next rollout id after the coordinator's checkpoint load.
    """

    def health(self) -> Mapping[str, Any]: ...

    def start_rollout_id(self) -> int: ...


@dataclass(frozen=True)
class BridgeAddress:
    """Where the bridge actor lives: a Ray cluster address (None: let Ray find one), the actor's
    namespace and its name."""

    ray_address: str | None
    namespace: str
    actor_name: str

    @classmethod
    def from_state_dir(
        cls, state_dir: Path, environ: Mapping[str, str] | None = None
    ) -> BridgeAddress:
        """The address in `<state>/stack/slime-driver/runtime.yaml` (see `read`)."""
        return cls.read(Path(state_dir) / RUNTIME_YAML, environ)

    @classmethod
    def read(cls, path: Path, environ: Mapping[str, str] | None = None) -> BridgeAddress:
        """Read a Reef service's runtime.yaml (key `reef`). `RAY_ADDRESS` in the environment
        wins over the file's `ray_address`, as it does for Reef itself (docs/design.md §8). A
        missing file or `reef` block is an error naming the path and what to start first."""
        environ = os.environ if environ is None else environ
        path = Path(path)
        if not path.is_file():
            raise RuntimeError(
                f"training bridge address file {path} does not exist; start the Reef stack "
                "(`reef serve -c serve.yaml` with the state directory as run dir) before the run"
            )
        try:
            document = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise RuntimeError(
                f"training bridge address file {path} is not valid YAML: {exc}"
            ) from exc
        reef = document.get("reef") if isinstance(document, Mapping) else None
        if not isinstance(reef, Mapping):
            raise RuntimeError(f"{path} has no `reef` mapping; it is not a Reef runtime.yaml")
        address = environ.get("RAY_ADDRESS") or _optional_text(reef, "ray_address", path)
        return cls(
            ray_address=address,
            namespace=_optional_text(reef, "ray_namespace", path) or DEFAULT_NAMESPACE,
            actor_name=_optional_text(reef, "ray_actor_name", path) or DEFAULT_ACTOR_NAME,
        )


def _optional_text(block: Mapping[str, Any], key: str, path: Path) -> str | None:
    value = block.get(key)
    if value is None or (isinstance(value, str) and value.strip()):
        return value.strip() if isinstance(value, str) else None
    raise RuntimeError(f"{path}: reef.{key} must be a non-empty string, got {value!r}")


def import_ray() -> Any:
    """Import Ray, or fail with the package name and the install command. Kept separate so the
    rest of the harness never imports Ray by accident."""
    try:
        import ray
    except ImportError as exc:
        raise RuntimeError(
            "the training bridge needs the 'ray' package, which is not installed in "
            f"{sys.executable}; install it with: {RAY_INSTALL_HINT}"
        ) from exc
    return ray


class RayTrainingBridge:
    """The real bridge: Reef's named Ray actor, looked up before every call so a coordinator that
    Reef replaced during recovery is followed rather than a dead handle kept.

    Only read-only calls are made. A missing actor is retried for `lookup_timeout_s` (Reef
    re-registers it after a restart); every other failure propagates to the controller.
    """

    def __init__(
        self,
        address: BridgeAddress,
        *,
        rpc_timeout_s: float = 300.0,
        lookup_timeout_s: float = 60.0,
    ) -> None:
        self.address = address
        self._rpc_timeout_s = rpc_timeout_s
        self._lookup_timeout_s = lookup_timeout_s
        self._ray: Any = None

    @classmethod
    def from_state_dir(
        cls, state_dir: Path, environ: Mapping[str, str] | None = None
    ) -> RayTrainingBridge:
        """The bridge named by the stack's runtime.yaml under `state_dir` (see `BridgeAddress`)."""
        return cls(BridgeAddress.from_state_dir(state_dir, environ))

    def health(self) -> dict[str, Any]:
        """The coordinator's `health()` as a plain dict; a non-mapping answer is an error."""
        value = self._call("health")
        if not isinstance(value, Mapping):
            raise RuntimeError(
                f"training bridge health() returned {type(value).__name__}, not a dict"
            )
        return dict(value)

    def start_rollout_id(self) -> int:
        """The coordinator's next rollout id after its checkpoint load."""
        value = self._call("start_rollout_id")
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise RuntimeError(f"training bridge start_rollout_id() returned {value!r}")
        return value

    def _connect(self) -> Any:
        if self._ray is None:
            ray = import_ray()
            if not ray.is_initialized():
                # "auto" asks Ray to find the cluster Reef started on this host.
                ray.init(
                    address=self.address.ray_address or "auto", namespace=self.address.namespace
                )
            self._ray = ray
        return self._ray

    def _call(self, method: str) -> Any:
        ray = self._connect()
        deadline = time.monotonic() + self._lookup_timeout_s
        while True:
            try:
                actor = ray.get_actor(self.address.actor_name, namespace=self.address.namespace)
                break
            except ValueError as exc:  # Ray's "actor not found"
                if time.monotonic() >= deadline:
                    raise RuntimeError(
                        f"training bridge actor {self.address.actor_name!r} not found in Ray "
                        f"namespace {self.address.namespace!r} at "
                        f"{self.address.ray_address or 'auto'} after {self._lookup_timeout_s:.0f}s;"
                        " is the slime-driver service running?"
                    ) from exc
                time.sleep(0.1)
        return ray.get(getattr(actor, method).remote(), timeout=self._rpc_timeout_s)
