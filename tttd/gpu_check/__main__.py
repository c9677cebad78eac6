"""``python -m tttd.gpu_check``: run the GPU-boundary checks and print one table.

    python -m tttd.gpu_check                    # arguments (2×4, 8×16), the loss path at TP 1 and 2
    python -m tttd.gpu_check --step             # also one optimizer step (needs a GPU)
    python -m tttd.gpu_check --only loss --json out.json
    python -m tttd.gpu_check --only arguments --save-slime-args args.pkl   # where SGLang is
    python -m tttd.gpu_check --only loss --slime-args args.pkl           # where it is not
    python -m tttd.gpu_check --only loss-tp2    # two ranks at TP 2: two GPUs (NCCL) or CPU (gloo)

On a GPU host with fewer than two GPUs the ``loss-tp2`` check prints one SKIP row.

Exit status: 0 when every row passed, 1 when a row failed (the failures are named on the
last line), 2 when Slime or Megatron-LM cannot be imported (the reason is printed).
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.settings.paths import DEFAULT_SERVE_YAML
from tttd.gpu_check import CheckResult, upstream_missing, use_upstream_sources

CHECKS = ("arguments", "loss", "loss-tp2", "step")


def run_checks(
    selected: list[str], serve_yaml: Path, device: str, args: Any = None
) -> list[CheckResult]:
    """Run the selected checks in order; an exception in one becomes a failed row."""
    results: list[CheckResult] = []
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as scratch:
        for name in selected:
            started = time.monotonic()
            try:
                results.extend(_run_one(name, serve_yaml, Path(scratch), device, args))
            except Exception as error:
                results.append(CheckResult(f"{name}", False, f"{type(error).__name__}: {error}"))
            results.append(
                CheckResult(f"{name} (wall time)", True, f"{time.monotonic() - started:.1f} s")
            )
    return results


def _run_one(
    name: str, serve_yaml: Path, scratch: Path, device: str, args: Any
) -> list[CheckResult]:
    if name == "arguments":
        from tttd.gpu_check.arguments import GRIDS, check_arguments

        rows: list[CheckResult] = []
        for grid in GRIDS:
            rows.extend(check_arguments(serve_yaml, scratch / grid, grid))
        return rows
    if name == "loss":
        from tttd.gpu_check.loss_path import check_loss_path

        return check_loss_path(serve_yaml, scratch / "loss", device, args)
    if name == "loss-tp2":
        from tttd.gpu_check.tensor_parallel import check_tensor_parallel_loss

        return check_tensor_parallel_loss(serve_yaml, scratch / "loss-tp2", device, args)
    from tttd.gpu_check.optimizer_step import check_optimizer_step

    return check_optimizer_step(serve_yaml, scratch / "step", device, args)


def print_table(results: list[CheckResult], stream=sys.stdout) -> None:
    width = max((len(result.name) for result in results), default=10)
    for result in results:
        mark = "SKIP" if result.skipped else "PASS" if result.ok else "FAIL"
        print(f"{mark}  {result.name:<{width}}  {result.detail}", file=stream)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tttd.gpu_check", description=__doc__)
    parser.add_argument("--only", choices=CHECKS, action="append", help="run only these checks")
    parser.add_argument("--step", action="store_true", help="also run the optimizer step (GPU)")
    parser.add_argument("--serve-yaml", type=Path, default=DEFAULT_SERVE_YAML)
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto (default)")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    parser.add_argument(
        "--save-slime-args", type=Path, help="write serve.yaml's parsed Slime namespace (pickle)"
    )
    parser.add_argument(
        "--slime-args",
        type=Path,
        help="use a namespace saved by --save-slime-args instead of parsing (no SGLang needed)",
    )
    options = parser.parse_args(argv)
    use_upstream_sources()
    reason = upstream_missing()
    if reason is not None:
        print(f"gpu-check: cannot run: {reason}", file=sys.stderr)
        return 2
    default = ["arguments", "loss", "loss-tp2", *(["step"] if options.step else [])]
    selected = options.only or default
    device = options.device
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    args = None
    if options.slime_args is not None:
        args = pickle.loads(options.slime_args.read_bytes())
    if options.save_slime_args is not None:
        from tttd.gpu_check.loss_path import parsed_namespace

        with tempfile.TemporaryDirectory(prefix="gpu-check-") as scratch:
            args = parsed_namespace(options.serve_yaml.resolve(), Path(scratch))
        options.save_slime_args.write_bytes(pickle.dumps(args))
    results = run_checks(selected, options.serve_yaml.resolve(), device, args)
    print_table(results)
    if options.json is not None:
        options.json.write_text(json.dumps([result.as_dict() for result in results], indent=1))
    failed = [result.name for result in results if not result.ok]
    if failed:
        print(f"gpu-check: {len(failed)} failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    skipped = [result.name for result in results if result.skipped]
    note = f"; skipped: {', '.join(skipped)}" if skipped else ""
    print(f"gpu-check: all {len(results) - len(skipped)} rows passed ({device}){note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
