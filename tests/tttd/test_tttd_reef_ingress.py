"""A real ``reef serve`` (reef-infra 0.1.3) on loopback validates tttd reports at ingress.

The service runs the record-only tttd recipe in front of the OpenAI fixture: the same report
contract class the GPU stack binds, checked by Reef's own ingress before anything is stored.
A ``sitecustomize`` watch on the service's ``PYTHONPATH`` records any attempt to import torch.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.reef_fixtures import ReefService, running_reef
from tttd.report import comparison_set_name

pytestmark = pytest.mark.slow

SCENARIO = "guidance-ttt-polyomino-packing"
TORCH_WATCH = """\
import os
import sys


class _TorchImportWatch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            with open(os.environ["TTTD_TORCH_IMPORT_MARKER"], "a") as marker:
                marker.write(f"{os.getpid()} {name} {sys.orig_argv!r}\\n")
        return None


if os.environ.get("TTTD_TORCH_IMPORT_MARKER"):
    sys.meta_path.insert(0, _TorchImportWatch())
    with open(os.environ["TTTD_TORCH_IMPORT_MARKER"] + ".watched", "a") as watched:
        watched.write(f"{os.getpid()} {sys.orig_argv!r}\\n")
"""


def torch_watch_env(directory: Path) -> dict[str, str]:
    """Environment that makes every Python process note torch imports in ``marker.txt``."""
    watch = directory / "torch-watch"
    watch.mkdir(parents=True, exist_ok=True)
    (watch / "sitecustomize.py").write_text(TORCH_WATCH)
    path = os.pathsep.join(filter(None, [str(watch), os.environ.get("PYTHONPATH", "")]))
    return {"PYTHONPATH": path, "TTTD_TORCH_IMPORT_MARKER": str(directory / "marker.txt")}


@pytest.fixture(scope="module")
def reef(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReefService]:
    workdir = tmp_path_factory.mktemp("reef-ingress")
    with running_reef(workdir, env=torch_watch_env(workdir)) as service:
        yield service


@pytest.fixture(scope="module")
def receipt(reef: ReefService) -> str:
    """One guidance call through Reef; its receipt is what reports reference."""
    response = httpx.post(
        reef.url + "/v1/chat/completions",
        headers=reef.headers(SCENARIO),
        json={"model": reef.upstream.model, "messages": [{"role": "user", "content": "guide me"}]},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "ok"
    return response.headers["x-reef-agent-record-id"]


def report(
    reef: ReefService, receipt: str, score: float = 27.5, **metadata: object
) -> httpx.Response:
    fields: dict[str, object] = {
        "step": 0,
        "group": 1,
        "rollout": 3,
        "groups_per_step": 2,
        "rollouts_per_group": 4,
        "algorithm": "ttt-discover",
        "comparison_set": comparison_set_name(0, 1),
        "guidance_ttt": True,
        "prompt_mode": "summary_only",
    }
    fields.update(metadata)
    fields = {key: value for key, value in fields.items() if value is not None}
    body = {"score": score, "feedback": "valid: ok", "references": [receipt], "metadata": fields}
    return httpx.post(
        reef.url + "/reef/report",
        headers={**reef.headers(SCENARIO), "content-type": "application/json"},
        content=json.dumps(body, allow_nan=True),
        timeout=60,
    )


def test_valid_grid_report_is_accepted_and_stored(reef: ReefService, receipt: str):
    response = report(reef, receipt)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["scenario"] == SCENARIO and answer["request_type"] == "report"
    stored = httpx.get(
        f"{reef.url}/reef/scenarios/{SCENARIO}/records/{answer['agent_record_id']}",
        headers=reef.headers(),
        timeout=30,
    )
    assert stored.status_code == 200, stored.text
    assert reef.upstream.completion_requests(), "the guidance call did not reach the upstream"


@pytest.mark.parametrize(
    ("score", "metadata", "named"),
    [
        (27.5, {"group": 2, "comparison_set": comparison_set_name(0, 2)}, "metadata.group"),
        (27.5, {"rollout": None}, "metadata.rollout is required"),
        (math.nan, {}, "score must be finite"),
        (27.5, {"comparison_set": "tttd-step-0-group-0"}, "metadata.comparison_set"),
        (27.5, {"groups_per_step": 8, "rollouts_per_group": 16}, "trains on 2x4"),
        (27.5, {"algorithm": "grpo"}, "metadata.algorithm"),
    ],
    ids=[
        "out-of-range-group",
        "missing-rollout",
        "nan-score",
        "wrong-comparison-set",
        "other-grid",
        "unknown-algorithm",
    ],
)
def test_broken_report_is_refused_with_400_naming_the_field(reef, receipt, score, metadata, named):
    response = report(reef, receipt, score, **metadata)
    assert response.status_code == 400, response.text
    assert named in response.text


def test_report_without_a_token_is_refused(reef: ReefService, receipt: str):
    response = httpx.post(
        reef.url + "/reef/report",
        headers={"x-reef-scenario": SCENARIO},
        json={"score": 1.0, "references": [receipt], "metadata": {}},
        timeout=30,
    )
    assert response.status_code == 401


def test_the_record_level_service_never_imports_torch(reef: ReefService, receipt: str):
    # Positive control: the watch does record a torch import when one happens.
    env = torch_watch_env(reef.workdir / "control")
    subprocess.run(
        [sys.executable, "-c", "import importlib.util; importlib.util.find_spec('torch')"],
        env={**os.environ, **env},
        check=True,
        timeout=60,
    )
    assert Path(env["TTTD_TORCH_IMPORT_MARKER"]).exists()
    # The service has answered inference and reports by now (module fixtures).
    assert report(reef, receipt).status_code == 200
    marker = reef.workdir / "marker.txt"
    watched = Path(str(marker) + ".watched").read_text()
    assert "reef.service" in watched, f"the watch did not run in the service: {watched}"
    assert not marker.exists(), marker.read_text()
