"""`guidance-ttt reevaluate` on a rehearsal run: the best candidates re-judged on a fresh
generated suite by a real local judge, the figures in the run's records, `export` putting them
in runs.json's `fixed_candidate_reevaluation`, and results/check_results.py accepting the export
(and refusing a record whose figures do not add up)."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from harness.cli.entry import main
from harness.rehearsal.rehearse import RehearsalOptions, rehearse_run, stand_in_stack
from tests.rehearsal_support import JUDGE_POLL_S

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
SUITE = "generated:7:2"


def check(directory: Path, state: Path | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(REPO / "results" / "check_results.py"), str(directory)]
    if state is not None:
        command += ["--state-dir", str(state)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=REPO)


def test_reevaluate_writes_the_field_export_carries_it_and_the_checker_accepts_it(
    tmp_path: Path,
) -> None:
    console = Console(file=io.StringIO())
    state = tmp_path / "run"
    options = RehearsalOptions(
        steps=2, groups=1, rollouts=2, arm="unguided", judge_poll_s=JUDGE_POLL_S
    )
    with stand_in_stack(tmp_path, 2, 11, console) as stack:
        rehearse_run(stack, state, options, console)
    same = main(["reevaluate", str(state), "--suite", "generated:11:2", "--repeats", "2"])
    assert same == 2, "re-evaluating on the searched suite is refused"
    assert main(["reevaluate", str(state), "--top", "2", "--suite", SUITE, "--repeats", "2"]) == 0
    record = json.loads((state / "guidance-run" / "reevaluation.json").read_text())
    assert (record["suite"], record["searched_suite"], record["repeats"]) == (
        SUITE,
        "generated:11:2",
        2,
    )
    assert 1 <= len(record["candidates"]) <= 2 and record["seed"]["step"] is None
    for row in [record, *record["candidates"], record["seed"]]:
        assert len(row["scores"]) + row["failed_repeats"] == 2
        if len(row["scores"]) == 2:
            assert row["mean"] == pytest.approx(statistics.fmean(row["scores"]))
            assert row["sample_std"] == pytest.approx(statistics.stdev(row["scores"]))
    out = tmp_path / "results"
    assert main(["export", str(state), "--out", str(out)]) == 0
    (run,) = json.loads((out / "runs.json").read_text())["runs"]
    assert run["fixed_candidate_reevaluation"] == record
    assert (run["arm"], run["run_seed"]) == ("unguided", 0)
    accepted = check(out, state)
    assert accepted.returncode == 0, accepted.stderr
    # compare reads the exported directory as it reads the state directory.
    from harness.cli.compare import load_curves
    from harness.observe.cost import PriceTable

    exported, live = load_curves([str(out), str(state)], PriceTable(), Path())
    assert exported.points == live.points and exported.arm == live.arm == "unguided"
    assert (exported.suite, exported.seed) == (live.suite, live.seed) == ("generated:11:2", 0)

    # One repeat (a deterministic task): accepted, no spread; the table names entry ids.
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert (
            main(["reevaluate", str(state), "--top", "1", "--suite", SUITE, "--repeats", "1"]) == 0
        )
    once = json.loads((state / "guidance-run" / "reevaluation.json").read_text())
    assert once["repeats"] == 1 and once["sample_std"] is None
    assert once["mean"] == once["scores"][0] or once["failed_repeats"] == 1
    assert once["candidates"][0]["entry_id"] == record["candidates"][0]["entry_id"]
    assert once["candidates"][0]["entry_id"][:8] in printed.getvalue()
    assert " ± " not in printed.getvalue()
    # Progress: one line per candidate and repeat, k of n, the suite and its cases.
    lines = printed.getvalue().splitlines()
    first = f"reevaluate: 1/2 candidate {once['candidates'][0]['entry_id'][:8]} on {SUITE}"
    assert any(line.startswith(first) and ", repeat 1/1: " in line for line in lines), lines
    assert any(line.startswith(f"reevaluate: 2/2 the seed on {SUITE}") for line in lines)
    assert main(["export", str(state), "--out", str(tmp_path / "once")]) == 0
    assert check(tmp_path / "once", state).returncode == 0

    broken = copy.deepcopy(json.loads((out / "runs.json").read_text()))
    row = broken["runs"][0]["fixed_candidate_reevaluation"]
    row["scores"], row["mean"] = [1.0, 3.0], 5.0
    (out / "runs.json").write_text(json.dumps(broken))
    refused = check(out)
    assert refused.returncode == 1 and "repeat mean 5.0 != mean of [1.0, 3.0]" in refused.stderr
