"""Run the ``loss-tp2`` ranks with a fault put into Slime; print the rows that failed (JSON).

    python tests/tensor_parallel_faults.py SERVE_YAML WORK_DIR

The fault stands for a training stack that gets tensor parallelism wrong in two ways the
check is meant to catch: the data-parallel size reads as the world size (2) instead of 1 at
TP 2, as if the tensor-parallel ranks were data-parallel replicas, so Slime's rescaling scales
the loss (and every gradient) twice; and every rank, not only TP rank 0, logs the step's
train/* metrics. It is applied in each rank (spawned processes import this file as their main
module) before the real check runs there.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def faulty_rank(rank: int, world_size: int, device: str, **keywords: Any) -> dict[str, Any]:
    from slime.backends.megatron_utils import loss, model

    loss.mpu.get_data_parallel_world_size = lambda with_context_parallel=False: world_size
    model._disable_tqdm_for_non_main_rank = lambda: False
    from tttd.gpu_check.tensor_parallel import loss_rank

    return loss_rank(rank, world_size, device, **keywords)


def main(serve_yaml: Path, work_dir: Path) -> None:
    from tttd.gpu_check import use_upstream_sources

    use_upstream_sources()
    from tttd.gpu_check import loss_path
    from tttd.gpu_check.launcher import run_ranks
    from tttd.gpu_check.tensor_parallel import CASES
    from tttd.gpu_check.tensor_parallel_rows import case_rows

    args = loss_path.parsed_namespace(serve_yaml, work_dir)
    ranks = run_ranks(faulty_rank, 2, "cpu", keywords={"args": args, "vocab": 512})
    rows = []
    for case, _ in CASES:
        rows.extend(case_rows(f"loss-tp2[{case}]", [rank["cases"][case] for rank in ranks], args))
    print(json.dumps([row.as_dict() for row in rows if not row.ok]))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
