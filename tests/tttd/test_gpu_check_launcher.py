"""``tttd.gpu_check.launcher``: two real processes in one gloo group on loopback.

No Slime or Megatron here: the ranks run small functions of this module (spawned processes
import it by name), so a launch that hangs, a rank that raises and the environment the ranks
start with are checked on any machine with torch.
"""

from __future__ import annotations

import os

import pytest

pytest.importorskip("torch")

from tttd.gpu_check.launcher import MULTICAST_OFF, RankFailure, probe, run_ranks

pytestmark = [pytest.mark.slow, pytest.mark.torch]


def _refuse_on_rank_one(rank: int, world_size: int, device: str) -> dict:
    if rank == 1:
        raise ValueError("rank one refuses its shard")
    return {"rank": rank}


def _wait_for_a_message_never_sent(rank: int, world_size: int, device: str) -> dict:
    """Rank 1 waits for a tensor rank 0 never sends: the launch can only end by its deadline."""
    import torch
    import torch.distributed as dist

    if rank == 1:
        dist.recv(torch.zeros(1), src=0)
    return {"rank": rank}


def test_two_gloo_ranks_share_one_group_with_multicast_off_in_their_environment():
    before = {name: os.environ.get(name) for name in MULTICAST_OFF}
    results = run_ranks(probe, 2, "cpu", timeout_s=300)
    assert [result["rank"] for result in results] == [0, 1]
    for result in results:
        assert result["world_size"] == 2
        assert result["backend"] == "gloo"
        assert result["rank_sum"] == 1.0  # 0 + 1, summed over the group by all_reduce
        assert result["environment"] == MULTICAST_OFF
    # The parent's environment is what it was: only the ranks got the settings.
    assert {name: os.environ.get(name) for name in MULTICAST_OFF} == before


def test_a_rank_that_raises_is_named_with_its_error():
    with pytest.raises(RankFailure, match=r"rank 1 raised ValueError: rank one refuses its shard"):
        run_ranks(_refuse_on_rank_one, 2, "cpu", timeout_s=300)


def test_a_launch_past_its_deadline_is_stopped_and_the_waiting_rank_named():
    with pytest.raises(RankFailure, match=r"ranks \[.*1.*\] still running after 10 s"):
        run_ranks(_wait_for_a_message_never_sent, 2, "cpu", timeout_s=10)


def test_an_unknown_device_or_too_few_gpus_are_refused_before_anything_starts():
    import torch

    with pytest.raises(ValueError, match="device must be 'cpu' or 'cuda', got 'tpu'"):
        run_ranks(probe, 2, "tpu")
    too_many = torch.cuda.device_count() + 1
    with pytest.raises(ValueError, match=f"{too_many} ranks need {too_many} GPUs"):
        run_ranks(probe, too_many, "cuda")
