"""A real `reef serve -c serve-tinker.yaml` (Reef's in-process Tinker topology, the tttd recipe,
`TTTDTinkerLoss`) against the Tinker stand-in: guidance calls get receipts and the scripted
answers, and the reports of two full steps make Reef train, commit and publish two tttd steps on
durable Tinker checkpoints, each step branched from the last with its optimizer state."""

from __future__ import annotations

import json
import time
from dataclasses import replace

import pytest

pytest.importorskip("tinker", reason="needs the Tinker SDK (the tinker extra, 0.33.1)")

from harness.adapters.reef.channel import ReefChannel
from harness.adapters.reef.process import free_port
from harness.rehearsal.stand_ins import SEED_RECORD, GuidanceScript
from harness.rehearsal.tinker_process import scripted_guidance
from harness.rehearsal.tinker_stack import TOKEN, tinker_reef, write_tinker_settings
from harness.run.rollout import report_body
from harness.settings.run_copy import RunValues
from tests.archive_builders import make_entry

GROUPS, ROLLOUTS = 1, 4
PUBLISH_DEADLINE_S = 60.0


def _committed_step(channel: ReefChannel) -> int:
    page = channel._reports.get("/reef/status")
    block = page["scenarios"].get(channel.scenario) or {}
    return int((block.get("last_committed_step") or {}).get("step") or 0)


def _wait_for_commit(channel: ReefChannel, step: int) -> None:
    deadline = time.monotonic() + PUBLISH_DEADLINE_S
    while _committed_step(channel) < step:
        assert time.monotonic() < deadline, f"Reef did not commit step {step} in time"
        time.sleep(0.2)


@pytest.mark.slow
def test_reef_trains_and_publishes_two_tttd_steps_on_the_tinker_stand_in(tmp_path):
    values = RunValues(
        state_dir=tmp_path,
        steps=2,
        groups=GROUPS,
        rollouts=ROLLOUTS,
        arm="guidance-ttt",
        parent_selection="puct",
        run_seed=0,
    )
    path = tmp_path / "serve-tinker.yaml"
    port = free_port()
    settings = write_tinker_settings(
        path, values, judge_url="http://127.0.0.1:9", reef_port=port, seed=SEED_RECORD
    )
    assert settings.training_backend == "tinker"
    script = GuidanceScript()
    with tinker_reef(tmp_path, path, port, scripted_guidance(script)) as (reef, tinker):
        channel = ReefChannel(reef.url, settings.scenario, token=TOKEN)
        load_ids = [channel.runtime_load_id()]
        body = {"model": settings.model, "messages": [{"role": "user", "content": "guide"}]}
        for step in range(2):
            for rollout in range(ROLLOUTS):
                response, receipt = channel.guide({**body, "max_tokens": 512})
                assert "<guidance>" in response["choices"][0]["message"]["content"]
                entry = make_entry("seed", step, raw=10.0 + rollout)
                entry = replace(entry, metadata={"step": step, "group": 0, "rollout": rollout})
                channel.report(report_body(entry, GROUPS, ROLLOUTS), receipt)
            _wait_for_commit(channel, step + 1)
            load_ids.append(channel.runtime_load_id())
        # A rate limit the SDK retries with backoff inside Reef: the call still lands.
        tinker.fail_next("/asample", 429, times=2)
        response, _ = channel.guide({**body, "max_tokens": 512})
        assert "<guidance>" in response["choices"][0]["message"]["content"]

    # Each committed step was published: the sampler serves a new load after every step.
    assert len(set(load_ids)) == 3, load_ids
    assert script.calls == 2 * ROLLOUTS + 1
    routes = tinker.routes()
    assert routes.count("/forward_backward") == 2 and routes.count("/optim_step") == 2
    assert tinker.refused == []
    # Each step resumed the previous durable checkpoint with its optimizer state, and every
    # checkpoint Reef keeps is a durable (no TTL) Tinker path.
    loads = [call.body for call in tinker.calls if call.route == "/load_weights"]
    assert [load.optimizer for load in loads] == [True, True]
    saves = [call.body for call in tinker.calls if call.route == "/save_weights"]
    assert all(save.ttl_seconds is None for save in saves) and len(saves) == 3
    incumbent = json.loads((tmp_path / "checkpoints" / "tinker" / "incumbent.json").read_text())
    assert incumbent["state_path"] in tinker.service.checkpoints
    assert incumbent["state_path"] not in {load.path for load in loads}  # the newest step's
    # tttd's loss on Tinker's built-in importance_sampling, the centred KL folded in.
    steps = [call.body for call in tinker.calls if call.route == "/forward_backward"]
    assert {step.loss_fn for step in steps} == {"importance_sampling"}
    assert all(len(step.data) == GROUPS * ROLLOUTS for step in steps)
