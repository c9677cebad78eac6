"""Run an operator's `evaluate(program_path)` on one candidate, inside the judge's sandbox.

    python3 evaluator_runner.py SETTINGS EVALUATOR PROGRAM

The judge (`judges.verdicts.evaluated`) starts this script in the sandbox with the candidate's
limits; it never runs in the judge's process. SETTINGS is the package's case input, a JSON
object: `metric` (the metric that is the score, e.g. `combined_score`) and `cascade` (null, or
the thresholds of OpenEvolve's cascade: `evaluate_stage1`, `evaluate_stage2`, `evaluate_stage3`
run in order, and the cascade stops after the first stage whose metrics fail the next threshold,
as OpenEvolve's evaluator does). EVALUATOR is the operator's file, PROGRAM the candidate's.

The candidate is copied into a private folder under /tmp (evaluators may write beside it) and
the evaluator's stdout and stderr go to a file under /tmp, so nothing it or the program prints
can reach the verdict; an evaluation that prints more than PRINT_LIMIT bytes fails (the sandbox's
/tmp is small, and an evaluation that floods it is broken). The verdict is one line on the
original stdout, in the form the judge's checkers use:

    ok Value: <metric>            exit 0: the score, every metric on the next line as JSON
    wrong answer <why>            exit 1: the metric is missing or not a finite number
    fail <why>                    exit 1: the evaluator raised, returned no metrics, or printed
                                  more than PRINT_LIMIT bytes

An evaluator that imports the candidate runs it in this process, as OpenEvolve does: the
sandbox bounds what both can do, and the verdict is only as trustworthy as that evaluator.
`from openevolve.evaluation_result import EvaluationResult` works without OpenEvolve installed.
Standard library only, Python 3.10 or later (the sandbox's system Python).
"""

import importlib.util
import json
import math
import os
import shutil
import sys
import tempfile
import traceback
import types

DETAIL_CHARS = 400
PRINT_LIMIT = 8 << 20


class EvaluationResult:
    """OpenEvolve's result type (`openevolve.evaluation_result`): metrics and artifacts."""

    def __init__(self, metrics, artifacts=None):
        self.metrics = metrics
        self.artifacts = artifacts if artifacts is not None else {}

    @classmethod
    def from_dict(cls, metrics):
        return cls(metrics)

    def to_dict(self):
        return self.metrics


def provide_openevolve():
    """Make `openevolve.evaluation_result.EvaluationResult` importable when OpenEvolve is not."""
    try:
        import openevolve.evaluation_result  # noqa: F401
    except ImportError:
        package = types.ModuleType("openevolve")
        package.__path__ = []
        module = types.ModuleType("openevolve.evaluation_result")
        module.EvaluationResult = EvaluationResult
        package.evaluation_result = module
        sys.modules["openevolve"] = package
        sys.modules["openevolve.evaluation_result"] = module


def metrics_of(result, where):
    """The metrics dict of what an evaluate function returned (a dict or an EvaluationResult)."""
    metrics = getattr(result, "metrics", result)
    if not isinstance(metrics, dict):
        raise Failed(f"{where} returned {type(result).__name__}, not a dict of metrics")
    return dict(metrics)


class Failed(Exception):
    """The evaluation gave no metrics: the evaluator raised or returned something else."""


def numeric(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def passes(metrics, threshold):
    """OpenEvolve's threshold rule: `combined_score` when numeric, else the mean of the numeric
    metrics other than `error`."""
    score = metrics.get("combined_score")
    if numeric(score):
        return float(score) >= threshold
    values = [float(v) for k, v in metrics.items() if k != "error" and numeric(v)]
    return bool(values) and sum(values) / len(values) >= threshold


def call(module, name, program):
    try:
        return metrics_of(getattr(module, name)(program), name)
    except Failed:
        raise
    except BaseException as error:  # SystemExit and KeyboardInterrupt from a program too
        raise Failed(f"{name} raised {described(error)}") from None


def evaluate(module, program, thresholds):
    """The metrics of one evaluation: `evaluate`, or the cascade when it has thresholds and the
    evaluator defines `evaluate_stage1`."""
    if thresholds is None or not hasattr(module, "evaluate_stage1"):
        if not hasattr(module, "evaluate"):
            raise Failed("the evaluator defines no evaluate(program_path)")
        return call(module, "evaluate", program)
    metrics = call(module, "evaluate_stage1", program)
    for stage, threshold in zip((2, 3), thresholds, strict=False):
        name = f"evaluate_stage{stage}"
        if not passes(metrics, threshold) or not hasattr(module, name):
            break
        try:
            later = call(module, name, program)
        except Failed as failure:  # OpenEvolve keeps the earlier stages' metrics
            metrics[f"stage{stage}_passed"] = 0.0
            metrics[f"stage{stage}_error"] = str(failure)[:DETAIL_CHARS]
            break
        kept = {k: float(v) for k, v in metrics.items() if k != "error" and numeric(v)}
        kept.update({k: float(v) for k, v in later.items() if k != "error" and numeric(v)})
        metrics = kept
    return metrics


def described(error):
    frames = traceback.extract_tb(error.__traceback__)
    where = f" at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else ""
    return f"{type(error).__name__}: {str(error)[:DETAIL_CHARS]}{where}"


def plain(metrics):
    """Metrics as JSON: numbers and short strings kept, anything else as a short repr."""
    kept = {}
    for key, value in list(metrics.items())[:64]:
        if isinstance(value, float) and not math.isfinite(value):
            value = repr(value)
        elif not isinstance(value, (int, float, str, bool)) and value is not None:
            value = repr(value)[:DETAIL_CHARS]
        kept[str(key)[:80]] = value[:DETAIL_CHARS] if isinstance(value, str) else value
    return json.dumps(kept, sort_keys=True)


def main():
    settings_path, evaluator_path, program_source = map(os.path.abspath, sys.argv[1:4])
    with open(settings_path) as file:
        settings = json.load(file)
    metric = settings.get("metric") or "combined_score"
    thresholds = settings.get("cascade")
    verdict = os.fdopen(os.dup(1), "w")
    log = os.open(
        os.path.join(tempfile.gettempdir(), "evaluation-output.log"),
        os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND,
        0o600,
    )
    os.dup2(log, 1)
    os.dup2(log, 2)

    def say(line, code):
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:  # a full /tmp: the size below tells
            pass
        printed = os.fstat(log).st_size
        if printed > PRINT_LIMIT:
            line = (
                f"fail the evaluation printed {printed} bytes, more than the {PRINT_LIMIT >> 20} "
                "MiB it may print: print less (the printed text is not read)"
            )
            code = 1
        verdict.write(line + "\n")
        verdict.flush()
        os._exit(code)

    work = tempfile.mkdtemp(prefix="evaluation-")
    program = os.path.join(work, "program.py")
    shutil.copyfile(program_source, program)
    os.chdir(work)
    provide_openevolve()
    sys.path.insert(0, os.path.dirname(evaluator_path))
    try:
        spec = importlib.util.spec_from_file_location("evaluation_module", evaluator_path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except BaseException as error:
            raise Failed(f"loading the evaluator raised {described(error)}") from None
        metrics = evaluate(module, program, thresholds)
    except Failed as failure:
        say(f"fail {failure}", 1)
    value = metrics.get(metric)
    if not numeric(value) or not math.isfinite(float(value)):
        found = "missing" if metric not in metrics else f"{value!r}"[:DETAIL_CHARS]
        say(
            f"wrong answer metric {metric!r} is {found}, not a finite number; "
            f"metrics: {plain(metrics)}",
            1,
        )
    say(f"ok Value: {float(value)!r}\nmetrics: {plain(metrics)}", 0)


if __name__ == "__main__":
    main()
