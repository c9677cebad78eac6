"""The ``loss-tp2`` check: the tttd loss path at Megatron TP 2 on two gloo ranks (CPU).

Like ``tests/tttd/test_gpu_check_boundary.py`` these run ``python -m tttd.gpu_check`` as a
subprocess and need Slime at the pinned commit and its Megatron-LM (installed, or the source
trees named by ``GUIDANCE_TTT_SLIME_SRC`` / ``GUIDANCE_TTT_MEGATRON_SRC``; docs/training.md,
"Checking the GPU boundary"); without them they skip with one line. The same check runs over
NCCL on a host with two GPUs (``scripts/gpu-check.sh``); that run is not part of the suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from test_gpu_check_boundary import REPO, failed, gpu_check, requires_upstream

pytestmark = pytest.mark.slow

CASES = ("full batch", "constant group dropped")


@requires_upstream
def test_at_tp_2_every_rank_back_propagates_the_full_vocabulary_token_sum(tmp_path):
    code, rows, output = gpu_check(tmp_path, "--only", "loss-tp2")
    assert code == 0, "\n".join(failed(rows)) or output[-3000:]
    group = rows["loss-tp2 two ranks at TP 2"]["figures"]["groups"]
    assert [(g["tp_rank"], g["tp_size"], g["dp_size"], g["backend"]) for g in group] == [
        (0, 2, 1, "gloo"),
        (1, 2, 1, "gloo"),
    ]
    for case in CASES:
        prefix = f"loss-tp2[{case}]"
        loss = rows[
            f"{prefix} loss after Slime's rescaling = full-vocabulary token sum, every rank"
        ]
        for propagated in loss["figures"]["propagated"]:
            assert propagated == pytest.approx(loss["figures"]["token_sum"], rel=1e-5)
        shards = rows[f"{prefix} logits' gradient = token sum's on each vocabulary shard"]
        assert max(shards["figures"]["max_relative_error"]) < 1e-4
        hidden = rows[f"{prefix} hidden-state gradient = token sum's (summed once over TP)"]
        assert hidden["figures"]["factor"] == [pytest.approx(1.0, abs=1e-4)] * 2
        once = rows[f"{prefix} train/* reported once, by rank 0 (the rank Reef reads)"]
        assert once["figures"]["reporting_ranks"] == [0]
        assert {"train/loss", "train/importance_ratio", "train/ppo_kl"} <= set(
            once["figures"]["captured"]
        )
    dropped = rows[
        "loss-tp2[constant group dropped] train/* reported once, by rank 0 (the rank Reef reads)"
    ]
    assert dropped["figures"]["captured"]["train/global_batch_size"] == 4


@requires_upstream
def test_a_loss_scaled_twice_and_metrics_logged_on_every_rank_are_named(tmp_path):
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")])}
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "tests" / "tensor_parallel_faults.py"),
            str(REPO / "serve.yaml"),
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    failures = {row["name"]: row for row in json.loads(result.stdout.strip().splitlines()[-1])}
    for case in CASES:
        prefix = f"loss-tp2[{case}]"
        loss = failures[
            f"{prefix} loss after Slime's rescaling = full-vocabulary token sum, every rank"
        ]
        for propagated in loss["figures"]["propagated"]:
            assert propagated == pytest.approx(2 * loss["figures"]["token_sum"], rel=1e-5)
        assert f"{prefix} logits' gradient = token sum's on each vocabulary shard" in failures
        hidden = failures[f"{prefix} hidden-state gradient = token sum's (summed once over TP)"]
        assert hidden["figures"]["factor"] == [pytest.approx(2.0, rel=1e-4)] * 2
        once = failures[f"{prefix} train/* reported once, by rank 0 (the rank Reef reads)"]
        assert once["figures"]["reporting_ranks"] == [0, 1]


@requires_upstream
def test_on_a_gpu_host_with_fewer_than_two_gpus_the_tp_2_rows_are_skipped_and_said_so(tmp_path):
    import torch

    if torch.cuda.device_count() >= 2:
        pytest.skip("two GPUs are visible here: the TP 2 rows run instead")
    out = tmp_path / "rows.json"
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tttd.gpu_check",
            "--only",
            "loss-tp2",
            "--device",
            "cuda",
            "--json",
            str(out),
        ],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = json.loads(out.read_text())
    assert rows[0]["skipped"] and rows[0]["name"] == "loss-tp2"
    assert "TP 2 needs 2" in rows[0]["detail"]
    assert "SKIP  loss-tp2" in result.stdout and "skipped: loss-tp2" in result.stdout
