"""The controller's adapters: the real Ray training bridge and the `/reef/status` client.

Ray is not installed here (and could not host the GPU actor anyway), so the call style of the
real bridge is checked against `RayStub`, a stand-in for the few `ray` client calls Reef itself
makes (`init`, `get_actor`, `get`, `actor.<method>.remote()`), which forwards to the bridge fake.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import yaml
from bridge_fake import FakeTrainingBridge, StatusServer, status_page
from state_stand_in import StandInState
from test_run_controller import BACKEND, IDENTITY, MIXED, SCENARIO, outcome

from harness.adapters.reef.status import ReefStatusClient, ReefStatusUnavailable, read_step_status
from harness.adapters.reef.training_bridge import BridgeAddress, RayTrainingBridge
from harness.run.controller import ControllerSettings, RunController
from harness.storage.resume_state import RunIdentity

REEF_BLOCK = {
    "model_path": "/models/Qwen3-8B",
    "ray_address": "10.0.0.5:6379",
    "ray_namespace": "reef",
    "ray_actor_name": "reef-train-bridge",
    "tensor_parallel_size": 2,
}


def write_runtime_yaml(state_dir: Path, reef: dict[str, Any]) -> Path:
    path = state_dir / "stack" / "slime-driver" / "runtime.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"reef": reef, "training": {"colocate": True}}))
    return path


class RayStub(types.ModuleType):
    """The `ray` client calls Reef makes, forwarding to one actor object (see module doc)."""

    def __init__(self, actor: Any, missing_lookups: int = 0) -> None:
        super().__init__("ray")
        self.actor = actor
        self.missing_lookups = missing_lookups
        self.initialized = False
        self.init_calls: list[dict[str, Any]] = []
        self.lookups: list[tuple[str, str]] = []
        self.remote_calls: list[str] = []

    def is_initialized(self) -> bool:
        return self.initialized

    def init(self, *, address: str, namespace: str) -> None:
        self.initialized = True
        self.init_calls.append({"address": address, "namespace": namespace})

    def get_actor(self, name: str, *, namespace: str) -> Any:
        self.lookups.append((name, namespace))
        if self.missing_lookups:
            self.missing_lookups -= 1
            raise ValueError(f"Failed to look up actor with name '{name}'")
        stub = self

        class Handle:
            def __getattr__(self, method: str) -> Any:
                def remote(*args: Any) -> Any:
                    stub.remote_calls.append(method)
                    return getattr(stub.actor, method)(*args)

                return types.SimpleNamespace(remote=remote)

        return Handle()

    def get(self, ref: Any, *, timeout: float) -> Any:
        assert timeout > 0
        return ref


def test_bridge_address_is_read_from_the_stack_runtime_yaml(tmp_path: Path) -> None:
    write_runtime_yaml(tmp_path, REEF_BLOCK)
    address = BridgeAddress.from_state_dir(tmp_path, environ={})
    assert address == BridgeAddress("10.0.0.5:6379", "reef", "reef-train-bridge")


def test_ray_address_in_the_environment_selects_an_existing_cluster(tmp_path: Path) -> None:
    write_runtime_yaml(tmp_path, REEF_BLOCK)
    address = BridgeAddress.from_state_dir(tmp_path, environ={"RAY_ADDRESS": "ray://head:10001"})
    assert address.ray_address == "ray://head:10001"


def test_unset_names_fall_back_to_reef_defaults(tmp_path: Path) -> None:
    write_runtime_yaml(tmp_path, {"ray_address": None, "ray_namespace": None})
    assert BridgeAddress.from_state_dir(tmp_path, environ={}) == BridgeAddress(
        None, "reef", "reef-train-bridge"
    )


def test_missing_runtime_yaml_names_the_path_and_what_to_start(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match=r"slime-driver/runtime.yaml does not exist.*reef serve"):
        BridgeAddress.from_state_dir(tmp_path, environ={})


@pytest.mark.parametrize(
    "text", ["training: {}\n", "reef: [1, 2]\n", "reef: {ray_namespace: ''}\n"]
)
def test_runtime_yaml_without_a_usable_reef_block_is_refused(tmp_path: Path, text: str) -> None:
    path = write_runtime_yaml(tmp_path, {})
    path.write_text(text)
    with pytest.raises(RuntimeError, match=r"runtime.yaml"):
        BridgeAddress.from_state_dir(tmp_path, environ={})


def test_missing_ray_names_the_package_and_the_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # makes `import ray` fail even if installed
    bridge = RayTrainingBridge(BridgeAddress(None, "reef", "reef-train-bridge"))
    with pytest.raises(RuntimeError) as refused:
        bridge.health()
    assert "'ray' package" in str(refused.value)
    assert "pip install 'ray[default]'" in str(refused.value)


def test_importing_the_controller_does_not_import_ray() -> None:
    code = (
        "import sys, harness.run.controller, harness.adapters.reef.training_bridge;"
        " print('ray' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_real_bridge_calls_the_named_actor_like_reef_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One whole step through the real adapter: runtime.yaml → ray.init → get_actor → health."""
    write_runtime_yaml(tmp_path, REEF_BLOCK)
    fake = FakeTrainingBridge(tmp_path, groups_per_step=2, rollouts_per_group=4)
    ray = RayStub(fake)
    monkeypatch.setitem(sys.modules, "ray", ray)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    bridge = RayTrainingBridge.from_state_dir(tmp_path)
    page = status_page(SCENARIO)
    with StatusServer(lambda: page) as server:
        status = ReefStatusClient(server.url)
        controller = RunController(
            ControllerSettings(tmp_path, SCENARIO, 2, poll_interval_s=0.005, deadline_s=20),
            IDENTITY,
            BACKEND,
            bridge,
            status,
            StandInState(tmp_path),
        )
        controller.begin()
        fake.submit_step(0, MIXED)
        controller.complete_step(outcome(0))
        status.close()
    assert ray.init_calls == [{"address": "10.0.0.5:6379", "namespace": "reef"}]
    assert set(ray.lookups) == {("reef-train-bridge", "reef")}
    assert set(ray.remote_calls) == {"health"} and len(ray.remote_calls) >= 5
    assert bridge.start_rollout_id() == 1 and ray.remote_calls[-1] == "start_rollout_id"


def test_actor_lookup_follows_a_restarted_actor_then_gives_up_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeTrainingBridge(tmp_path, groups_per_step=2, rollouts_per_group=4)
    address = BridgeAddress("10.0.0.5:6379", "reef", "reef-train-bridge")
    monkeypatch.setitem(sys.modules, "ray", RayStub(fake, missing_lookups=2))
    assert RayTrainingBridge(address, lookup_timeout_s=10).health()["phase"] == "serving"

    monkeypatch.setitem(sys.modules, "ray", RayStub(fake, missing_lookups=10**6))
    with pytest.raises(RuntimeError, match="'reef-train-bridge' not found in Ray namespace 'reef'"):
        RayTrainingBridge(address, lookup_timeout_s=0.2).health()


def test_malformed_bridge_answers_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    actor = types.SimpleNamespace(health=lambda: ["not", "a", "dict"], start_rollout_id=lambda: -1)
    monkeypatch.setitem(sys.modules, "ray", RayStub(actor))
    bridge = RayTrainingBridge(BridgeAddress(None, "reef", "reef-train-bridge"))
    with pytest.raises(RuntimeError, match="returned list, not a dict"):
        bridge.health()
    with pytest.raises(RuntimeError, match=r"start_rollout_id\(\) returned -1"):
        bridge.start_rollout_id()


def test_status_client_sends_the_bearer_token_and_reads_the_page() -> None:
    page = status_page(SCENARIO, open_steps={4: [(1, 3)]})
    with StatusServer(lambda: page) as server:
        client = ReefStatusClient(server.url + "/", token="secret-token")
        assert client.fetch() == page
        client.close()
    assert server.authorizations == ["Bearer secret-token"]
    assert read_step_status(page, SCENARIO, 4).missing_slots == ((1, 3),)


def test_status_client_separates_transient_from_permanent_failures() -> None:
    with StatusServer(lambda: {}) as server:
        client = ReefStatusClient(server.url)
        server.fail_next(1, 503)
        with pytest.raises(ReefStatusUnavailable, match="503"):
            client.fetch()
        server.fail_next(1, 401)
        with pytest.raises(RuntimeError, match="401") as refused:
            client.fetch()
        assert not isinstance(refused.value, ReefStatusUnavailable)
        client.close()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    client = ReefStatusClient(f"http://127.0.0.1:{closed_port}", timeout_s=2)
    with pytest.raises(ReefStatusUnavailable):
        client.fetch()
    client.close()


@pytest.mark.parametrize(
    ("processor", "message"),
    [
        ({"failed_steps": {"step": 1}}, "failed_steps is"),
        ({"failed_steps": [{"reason": "mixed_release_ids"}]}, "has no integer `step`"),
        ({"open_steps": [{"step": 0, "missing": [[0, 1]]}]}, "open_steps.step=0..missing"),
    ],
)
def test_malformed_processor_status_is_an_error(processor: dict, message: str) -> None:
    page = {"error": None, "scenarios": {SCENARIO: {"processor": processor}}}
    with pytest.raises(RuntimeError, match=message):
        read_step_status(page, SCENARIO, 0)


def test_status_of_an_unknown_scenario_reports_nothing() -> None:
    status = read_step_status({"error": None, "scenarios": {}}, SCENARIO, 0)
    assert (status.error, status.failed, status.missing_slots) == (None, None, None)


def test_settings_and_identity_come_from_serve_yaml(tmp_path: Path) -> None:
    run_settings = pytest.importorskip("harness.settings.run_settings")
    run = run_settings.RunSettings.load(base_dir=tmp_path, environ={})
    settings = ControllerSettings.for_run(run, poll_interval_s=1.0)
    assert settings.steps == run.steps and settings.scenario == run.scenario
    assert settings.checkpoint_marker == (
        run.megatron_checkpoint_dir / "latest_checkpointed_iteration.txt"
    )
    identity = RunIdentity.from_dict(run.identity())
    assert identity.groups_per_step * identity.rollouts_per_group == run.rollouts_per_step
