"""A run's results: reading its state directory, and the records and views built from it.

Callers use this package as one namespace (`from harness import results`; `results.load_run`,
`results.run_record`, ...); each name lives in the module of the stage it serves:

- `run_view`: `load_run(state_dir)` reads, without taking any lock, what a running or finished
  run has made durable, as a frozen `RunView`; the only module here that reads the run;
- `score_trajectory`: scores and the per-update trajectory (`trajectory.csv` rows), pure;
- `inspection`: the best candidates, lineage, failure modes per step, guidance → candidate case
  studies, and the run's labels (`mode`, `suite`), pure;
- `records`: the two records `export` writes, with their usage, cost and provenance:

  - `runs.json`: `{"schema_version": 1, "runs": [run, ...]}`, one run per task (see
    `run_record`), each labelled with its `mode` (`trained` or `frozen`; one directory never
    mixes the two) and the `suite` its scores were measured on;
  - `trajectory.csv`: `task,update,cumulative_best,valid_rollouts,sampled_rollouts`; update 0 is
    the seed (no valid count, 0 sampled), update u ≥ 1 is step u - 1.
"""

from harness.archive.best import ranked, run_best, run_best_score
from harness.results.inspection import (
    CaseStudy,
    best_entries,
    case_studies,
    entry_lineage,
    failure_modes,
    lineage,
    node_of,
    parent_score,
    run_arm,
    run_mode,
    run_note,
    run_requests,
    run_seed,
    run_suite,
    run_task_text,
    seed_rescored,
    selected_case,
)
from harness.results.records import (
    EXPORTED_ARCHIVES,
    SCHEMA_VERSION,
    UNKNOWN_MODEL,
    exported_archive_path,
    models,
    provenance,
    read_runs_json,
    run_cost,
    run_record,
    run_usage,
    sha256_bytes,
    write_records,
)
from harness.results.run_view import (
    COMMITTED_LIBRARY,
    RUN_DIR,
    STORE_CANDIDATES,
    RunNotFound,
    RunView,
    find_store,
    load_run,
)
from harness.results.score_trajectory import (
    TRAJECTORY_FIELDS,
    TrajectoryRow,
    best_step,
    best_update,
    better,
    read_trajectory_csv,
    seed_entry,
    trajectory,
    trajectory_csv,
)

__all__ = [
    "COMMITTED_LIBRARY",
    "EXPORTED_ARCHIVES",
    "RUN_DIR",
    "SCHEMA_VERSION",
    "STORE_CANDIDATES",
    "TRAJECTORY_FIELDS",
    "UNKNOWN_MODEL",
    "CaseStudy",
    "RunNotFound",
    "RunView",
    "TrajectoryRow",
    "best_entries",
    "best_step",
    "best_update",
    "better",
    "case_studies",
    "entry_lineage",
    "exported_archive_path",
    "failure_modes",
    "find_store",
    "lineage",
    "load_run",
    "models",
    "node_of",
    "parent_score",
    "provenance",
    "ranked",
    "read_runs_json",
    "read_trajectory_csv",
    "run_arm",
    "run_best",
    "run_best_score",
    "run_cost",
    "run_mode",
    "run_note",
    "run_record",
    "run_requests",
    "run_seed",
    "run_suite",
    "run_task_text",
    "run_usage",
    "seed_entry",
    "seed_rescored",
    "selected_case",
    "sha256_bytes",
    "trajectory",
    "trajectory_csv",
    "write_records",
]
