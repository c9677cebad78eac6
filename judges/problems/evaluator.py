"""Problem kind `evaluator`: an operator's Python `evaluate(program_path) -> metrics` function.

    <id>/config.yaml        type: evaluator, evaluator: evaluator.py, language: python,
                            time: 60s, memory: 2g, n_cases: 1
    <id>/evaluator.py       the operator's evaluator (OpenEvolve's form: `evaluate`, and
                            optionally `evaluate_stage1/2/3`)
    <id>/testdata/1.in      the settings, JSON: {"metric": "combined_score", "cascade": null}

The package has one case, whose input is the settings: `metric` names the metric that is the
score, `cascade` is null or the thresholds of OpenEvolve's cascade (`EVALUATION_SETTINGS`). The
judge runs `evaluator_runner.py` with the evaluator and the candidate in the sandbox under the
case's limits (`judges.verdicts.evaluated`): the candidate is Python and is never run by the
judge's own process, nor is the evaluator. The verdict is a verifier's: `ok Value: <metric>`
certifies the case (ratio 1, `value` the metric), anything else fails it with the reason; the
other metrics travel in the case record's `metrics`.

An evaluator's verdict is not a function of the source alone (evaluators sample, time, seed from
the clock), so it is not cached unless config.yaml says `verdict_is_pure: true`.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from judges.problems.folders import ProblemError, member, read_bounded, regular
from judges.problems.package import Problem, Suite, load_cpu_problem

KIND = "evaluator"
#: The in-sandbox script that calls the evaluator (standard library only).
RUNNER = Path(__file__).with_name("evaluator_runner.py")
#: The keys of a package's settings (its case input) and what each holds.
EVALUATION_SETTINGS = {
    "metric": "the metric that is the score (a finite number), e.g. combined_score",
    "cascade": "null, or 1-2 thresholds of OpenEvolve's cascade (evaluate_stage1, 2, 3)",
}
SETTINGS_LIMIT = 64 * 1024


def load_evaluator_problem(
    directory: Path,
    config: dict[str, Any],
    config_path: Path,
    suite: Suite | None = None,
    testlib: Path | None = None,
) -> Problem:
    """An `evaluator` package: its evaluator file, one case (the settings) and its limits.
    ProblemError naming the file and key when something is missing or malformed."""
    where = str(config_path)
    if str(config.get("language", "python")).lower() != "python":
        raise ProblemError(f"{where}: an evaluator problem judges Python candidates (language)")
    name = config.get("evaluator") or "evaluator.py"
    source = member(directory, name, "evaluator", where)
    if not regular(directory, source, "evaluator").is_file():
        raise ProblemError(f"{source}: missing; an evaluator problem needs its evaluator")
    as_verifier = {**config, "type": "verifier", "verifier": name, "language": "python"}
    as_verifier.setdefault("n_cases", 1)
    problem = load_cpu_problem(directory, as_verifier, config_path, suite, testlib)
    if len(problem.cases) != 1:
        raise ProblemError(f"{where}: an evaluator problem has one case (n_cases: 1)")
    evaluation_settings(
        read_bounded(directory, problem.cases[0].input_path, SETTINGS_LIMIT, "settings"),
        str(problem.cases[0].input_path),
    )
    return replace(problem, kind=KIND)


def evaluation_settings(text: str, where: str) -> dict[str, Any]:
    """The settings of an evaluator package (its case input), validated; ProblemError naming
    the key otherwise."""
    try:
        settings = json.loads(text)
    except ValueError as error:
        raise ProblemError(f"{where}: not JSON ({error}); expected {EVALUATION_SETTINGS}") from None
    if not isinstance(settings, dict) or set(settings) - set(EVALUATION_SETTINGS):
        raise ProblemError(f"{where}: expected a JSON object with keys {EVALUATION_SETTINGS}")
    metric = settings.get("metric", "combined_score")
    if not isinstance(metric, str) or not metric.strip():
        raise ProblemError(f"{where}: metric {metric!r} is not a metric name")
    cascade = settings.get("cascade")
    if cascade is not None and (
        not isinstance(cascade, list)
        or len(cascade) > 2
        or not all(isinstance(t, int | float) and not isinstance(t, bool) for t in cascade)
    ):
        raise ProblemError(f"{where}: cascade {cascade!r} is not null or 1-2 numeric thresholds")
    return {"metric": metric, "cascade": cascade}
