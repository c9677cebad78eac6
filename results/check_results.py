#!/usr/bin/env python3
"""Validate results records: `runs.json` and `trajectory.csv` in one directory.

    python results/check_results.py [DIR ...]                  # default: every DIR under results/
    python results/check_results.py DIR --state-dir work/polyomino_packing [--task T]
    python results/check_results.py DIR --library committed-library.json [--task T]

Checks, per run: the trajectory has a seed row and one row per update, numbered 0..updates
without gaps; the cumulative best never gets worse (in the run's score direction); the seed and
final rows equal `seed_score` and `best_score`, and `best_update` is the first update reaching
it; the per-update sampled and valid counts add up to the run's totals, every update sampled
G×R rollouts and valid ≤ sampled; the selected case lies inside the trajectory; a fixed-candidate
re-evaluation's mean and sample deviation match its scores. With `--state-dir`, the SHA-256 of
the resume state, the committed archive and the seed are recomputed from the run and the whole
trajectory is rebuilt from its archive and compared; with `--library`, that file's SHA-256 must
equal `committed_library_sha256`. Exits 0 when everything holds, 1 naming every problem, 2 for
bad arguments. Only the standard library is needed, except for `--state-dir` (the harness).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

FIELDS = ["task", "update", "cumulative_best", "valid_rollouts", "sampled_rollouts"]
SEARCH_KEYS = {
    "updates": int,
    "groups_per_update": int,
    "rollouts_per_group": int,
    "sampled_rollouts": int,
    "valid_rollouts": int,
    "well_formed_guidance": int,
    "score_direction": str,
    "seed_score": float,
    "best_score": float,
    "best_update": int,
}
RESULTS_DIR = Path(__file__).resolve().parent


class Problems(list[str]):
    """The problems found so far, each naming the file, the run and the value."""

    def check(self, ok: bool, message: str) -> bool:
        """Record `message` unless `ok`; returns `ok`."""
        if not ok:
            self.append(message)
        return ok


def _number(value: Any, kind: type) -> bool:
    if isinstance(value, bool):
        return False
    if kind is int:
        return isinstance(value, int)
    if kind is float:
        return isinstance(value, int | float) and math.isfinite(value)
    return isinstance(value, kind)


def _better(direction: str, a: float, b: float) -> bool:
    return a > b if direction == "max" else a < b


def read_rows(path: Path, problems: Problems) -> dict[str, list[dict[str, Any]]]:
    """Trajectory rows by task, parsed; malformed rows are problems and are skipped."""
    by_task: dict[str, list[dict[str, Any]]] = {}
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if not problems.check(
            reader.fieldnames == FIELDS, f"{path}: header {reader.fieldnames} is not {FIELDS}"
        ):
            return by_task
        for line, row in enumerate(reader, 2):
            try:
                parsed = {
                    "update": int(row["update"]),
                    "best": float(row["cumulative_best"]),
                    "valid": int(row["valid_rollouts"]) if row["valid_rollouts"] else None,
                    "sampled": int(row["sampled_rollouts"]),
                }
            except (TypeError, ValueError) as exc:
                problems.append(f"{path}:{line}: unreadable row {row} ({exc})")
                continue
            if problems.check(math.isfinite(parsed["best"]), f"{path}:{line}: best not finite"):
                by_task.setdefault(row["task"], []).append(parsed)
    return by_task


def check_run(run: dict[str, Any], rows: list[dict[str, Any]], where: str, p: Problems) -> None:
    """Every record-level check of one run against its trajectory rows."""
    search = run.get("search")
    if not p.check(isinstance(search, dict), f"{where}: no `search` object"):
        return
    before = len(p)
    for key, kind in SEARCH_KEYS.items():
        p.check(_number(search.get(key), kind), f"{where}: search.{key} is {search.get(key)!r}")
    if len(p) > before:
        return
    direction, updates = search["score_direction"], search["updates"]
    p.check(direction in ("max", "min"), f"{where}: score_direction {direction!r}")
    numbers = [r["update"] for r in rows]
    if not p.check(
        numbers == list(range(updates + 1)),
        f"{where}: trajectory updates {numbers} are not 0..{updates} without gaps",
    ):
        return
    best = [r["best"] for r in rows]
    for u in range(1, len(best)):
        p.check(
            not _better(direction, best[u - 1], best[u]),
            f"{where}: cumulative best got worse at update {u} ({best[u - 1]} → {best[u]})",
        )
    p.check(
        math.isclose(best[0], search["seed_score"]),
        f"{where}: seed row {best[0]} != seed_score {search['seed_score']}",
    )
    p.check(
        math.isclose(best[-1], search["best_score"]),
        f"{where}: last row {best[-1]} != best_score {search['best_score']}",
    )
    first = next((r["update"] for r in rows if math.isclose(r["best"], best[-1])), None)
    p.check(
        first == search["best_update"],
        f"{where}: best_update {search['best_update']} but "
        f"the trajectory first reaches the best at update {first}",
    )
    seed = rows[0]
    p.check(
        seed["sampled"] == 0 and seed["valid"] is None,
        f"{where}: the seed row must sample 0 and have no valid count, got {seed}",
    )
    grid = search["groups_per_update"] * search["rollouts_per_group"]
    for r in rows[1:]:
        p.check(
            r["sampled"] == grid,
            f"{where}: update {r['update']} sampled {r['sampled']}, not G×R = {grid}",
        )
        p.check(
            r["valid"] is not None and 0 <= r["valid"] <= r["sampled"],
            f"{where}: update {r['update']} valid {r['valid']} not within 0..{r['sampled']}",
        )
    sampled = sum(r["sampled"] for r in rows)
    valid = sum(r["valid"] or 0 for r in rows)
    p.check(
        sampled == search["sampled_rollouts"],
        f"{where}: trajectory samples {sampled} "
        f"rollouts, sampled_rollouts says {search['sampled_rollouts']}",
    )
    p.check(
        valid == search["valid_rollouts"],
        f"{where}: trajectory has {valid} valid "
        f"rollouts, valid_rollouts says {search['valid_rollouts']}",
    )
    p.check(sampled == updates * grid, f"{where}: {sampled} sampled != updates × G×R")
    p.check(
        0 <= search["well_formed_guidance"] <= sampled,
        f"{where}: well_formed_guidance {search['well_formed_guidance']} not within 0..{sampled}",
    )
    _check_case(run.get("selected_case"), best, direction, where, p)
    _check_repeats(run.get("fixed_candidate_reevaluation"), where, p)


def _check_case(case: Any, best: list[float], direction: str, where: str, p: Problems) -> None:
    if case is None:
        return
    update = case.get("update") if isinstance(case, dict) else None
    if not p.check(
        isinstance(update, int) and 1 <= update < len(best),
        f"{where}: selected_case.update {update!r} is not an update of the run",
    ):
        return
    score = case.get("candidate_score")
    p.check(
        _number(score, float) and not _better(direction, score, best[update]),
        f"{where}: selected_case.candidate_score {score!r} beats the cumulative best "
        f"{best[update]} of its update",
    )


def _check_repeats(repeat: Any, where: str, p: Problems) -> None:
    """A fixed-candidate re-evaluation: the reference's form (`scores_microseconds`, its mean
    and sample deviation, all repeats correct), or `guidance-ttt reevaluate`'s (`scores`, `mean`,
    `sample_std` of the best candidate, the suite it was re-judged on, and each candidate's
    figures)."""
    if repeat is None:
        return
    if not p.check(
        isinstance(repeat, dict), f"{where}: fixed_candidate_reevaluation not an object"
    ):
        return
    if "scores_microseconds" in repeat and "candidates" not in repeat:
        _check_spread(repeat, "_microseconds", where, p)
        p.check(repeat.get("all_correct") is True, f"{where}: repeats were not all correct")
        return
    p.check(
        isinstance(repeat.get("suite"), str)
        and repeat.get("suite") != repeat.get("searched_suite"),
        f"{where}: fixed_candidate_reevaluation.suite {repeat.get('suite')!r} must name a suite "
        f"other than the searched one ({repeat.get('searched_suite')!r})",
    )
    suffix = "_microseconds" if "scores_microseconds" in repeat else ""
    candidates = repeat.get("candidates")
    if not p.check(
        isinstance(candidates, list) and candidates,
        f"{where}: fixed_candidate_reevaluation.candidates is {candidates!r}",
    ):
        return
    for index, row in enumerate([repeat, *candidates, repeat.get("seed") or {}]):
        if row.get(f"scores{suffix}"):
            least = 1 if repeat.get("repeats") == 1 else 2  # one repeat: a deterministic task
            _check_spread(row, suffix, f"{where} re-evaluation row {index}", p, least)
        p.check(
            isinstance(row.get("all_correct", True), bool),
            f"{where}: re-evaluation row {index} all_correct is {row.get('all_correct')!r}",
        )


def _check_spread(
    row: dict[str, Any], suffix: str, where: str, p: Problems, least: int = 2
) -> None:
    scores = row.get(f"scores{suffix}") or []
    if not p.check(
        len(scores) >= least, f"{where}: fixed_candidate_reevaluation needs ≥ {least} scores"
    ):
        return
    if len(scores) == 1:  # `reevaluate --repeats 1`: the score is the mean, there is no spread
        p.check(
            row.get(f"mean{suffix}") == scores[0] and row.get(f"sample_std{suffix}") is None,
            f"{where}: one repeat's mean must be its score and its sd null, got {row}",
        )
        return
    p.check(
        math.isclose(statistics.fmean(scores), row.get(f"mean{suffix}", math.nan)),
        f"{where}: repeat mean {row.get(f'mean{suffix}')} != mean of {scores}",
    )
    p.check(
        math.isclose(
            statistics.stdev(scores), row.get(f"sample_std{suffix}", math.nan), abs_tol=1e-12
        ),
        f"{where}: repeat std {row.get(f'sample_std{suffix}')} != stdev of {scores}",
    )


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def check_state_dir(
    run: dict[str, Any], rows: list[dict[str, Any]], state_dir: Path, where: str, p: Problems
) -> None:
    """Recompute the provenance hashes and the trajectory from the run's state directory."""
    sys.path.insert(0, str(RESULTS_DIR.parent))
    from harness import results as harness_results  # the harness reads the archive

    view = harness_results.load_run(state_dir)
    actual = harness_results.provenance(view)
    recorded = run.get("provenance") or {}
    for key, value in actual.items():
        p.check(
            recorded.get(key) == value,
            f"{where}: provenance.{key} is "
            f"{recorded.get(key)!r}, the run at {state_dir} hashes to {value!r}",
        )
    rebuilt = harness_results.trajectory(view.archive, run["task"], view.committed_step)
    mine = [(r["update"], r["best"], r["valid"], r["sampled"]) for r in rows]
    theirs = [(r.update, r.cumulative_best, r.valid_rollouts, r.sampled_rollouts) for r in rebuilt]
    p.check(
        mine == theirs,
        f"{where}: trajectory differs from the archive at {state_dir}: "
        f"{[(a, b) for a, b in zip(mine, theirs, strict=False) if a != b][:3] or 'length'}",
    )


def check_dir(directory: Path, args: argparse.Namespace) -> tuple[Problems, int, int]:
    """All checks of one results directory; returns the problems and the run and row counts."""
    p = Problems()
    runs_path, csv_path = directory / "runs.json", directory / "trajectory.csv"
    for path in (runs_path, csv_path):
        p.check(path.is_file(), f"{path} is missing")
    if len(p):
        return p, 0, 0
    try:
        document = json.loads(runs_path.read_text(encoding="utf-8"))
    except ValueError as exc:
        p.append(f"{runs_path}: not JSON ({exc})")
        return p, 0, 0
    runs = document.get("runs") if isinstance(document, dict) else None
    if not p.check(
        document.get("schema_version") == 1 and isinstance(runs, list) and runs,
        f"{runs_path}: needs schema_version 1 and a non-empty `runs` list",
    ):
        return p, 0, 0
    by_task = read_rows(csv_path, p)
    tasks = [r.get("task") for r in runs]
    p.check(len(set(tasks)) == len(tasks), f"{runs_path}: tasks repeat: {tasks}")
    p.check(
        set(by_task) == set(tasks),
        f"{csv_path} has tasks {sorted(by_task)}, {runs_path} has {sorted(map(str, tasks))}",
    )
    for run in runs:
        where = f"{runs_path} [{run.get('task')}]"
        check_run(run, by_task.get(run.get("task"), []), where, p)
    chosen = [r for r in runs if args.task in (None, r.get("task"))]
    if (args.state_dir or args.library) and not p.check(
        len(chosen) == 1, f"{runs_path}: name the run the archive belongs to with --task"
    ):
        return p, len(runs), sum(map(len, by_task.values()))
    if args.library:
        recorded = (chosen[0].get("provenance") or {}).get("committed_library_sha256")
        actual = _sha256(Path(args.library).read_bytes())
        p.check(
            recorded == actual,
            f"{runs_path} [{chosen[0]['task']}]: "
            f"committed_library_sha256 {recorded!r} but {args.library} hashes to {actual}",
        )
    if args.state_dir:
        run = chosen[0]
        check_state_dir(
            run,
            by_task.get(run["task"], []),
            Path(args.state_dir),
            f"{runs_path} [{run['task']}]",
            p,
        )
    return p, len(runs), sum(map(len, by_task.values()))


def main(argv: list[str] | None = None) -> int:
    """Check every directory given (default: each directory under results/ with a runs.json)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="*", type=Path)
    parser.add_argument("--state-dir", type=Path, help="the run's state directory (hash check)")
    parser.add_argument("--library", type=Path, help="a committed library.json (hash check)")
    parser.add_argument("--task", help="which run of runs.json the archive belongs to")
    args = parser.parse_args(argv)
    dirs = args.dirs or sorted(p.parent for p in RESULTS_DIR.rglob("runs.json"))
    if not dirs:
        print(f"check_results: no runs.json under {RESULTS_DIR}", file=sys.stderr)
        return 2
    failed = False
    for directory in dirs:
        problems, runs, rows = check_dir(directory, args)
        for problem in problems:
            print(f"check_results: {problem}", file=sys.stderr)
        failed = failed or bool(problems)
        if not problems:
            print(f"ok: {directory}: {runs} runs, {rows} trajectory rows")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
