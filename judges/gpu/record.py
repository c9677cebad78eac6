"""The judge's final record of a GPU submission, from the trusted process's results lines.

Pure. The record has FrontierCS's shape, like every record of this judge, with one case per
test and per benchmark, in order:

    {"status": "done", "passed", "result", "score", "scoreUnbounded", "suite",
     "value": <geometric mean of the benchmarks' mean latencies, µs>, "valueMean": "geometric",
     "cases": [{"ok", "status", "time", "memory", "msg", "scoreRatio", "scoreRatioUnbounded",
                "runStatus", "kind", "index", "spec", "maxError", "calls",
                (benchmarks) "value": <mean µs>, "timing": {runs, meanUs, stdUs, errUs, bestUs,
                worstUs, earlyUs, lateUs, windowUs, floorUs, callsCharged}}],
     "gpu": {device and library versions, idle probe, peaks},
     "determinism": {test, checked, identical, differing, maxDifference} (when checked)}

A passed case has ratio 1 and status "Correct"; a failed or unrun one ratio 0. `value` is present
only when every case passed; the contract's `verifier: geomean` makes it the raw score. A
trusted process that ended without its `end` line, or with a judge error, gives an `error`
record of kind `judge` (the harness's infrastructure fault, never a reward).
"""

from __future__ import annotations

import json
from typing import Any

from judges.gpu.package import GpuCase
from judges.gpu.timing import geometric_mean

NOT_RUN = "not run: an earlier case failed"


def read_lines(text: str) -> list[dict[str, Any]]:
    """The JSON objects of a results file; a torn last line (a killed writer) is dropped."""
    events = []
    for line in text.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            events.append(item)
    return events


def build_record(
    cases: tuple[GpuCase, ...], events: list[dict[str, Any]], suite: dict[str, Any]
) -> dict[str, Any]:
    """The final record (module docstring); an `error` record when the trial did not end."""
    end = next((e for e in events if e.get("event") == "end"), None)
    if end is None:
        return judge_error_record("the trusted GPU process ended without finishing the trial")
    if end.get("status") != "done":
        return judge_error_record(str(end.get("error", "the trusted GPU process failed"))[:4000])
    results = {(e.get("kind"), e.get("index")): e for e in events if e.get("event") == "case"}
    startup = next((e for e in events if e.get("event") == "startup"), {})
    records, failure = [], None
    for case in cases:
        found = results.get((case.kind, case.index))
        if failure is None and found is None and startup.get("status") != "Accepted":
            status = str(startup.get("status", "Runtime Error"))
            failure = f"{status}: the candidate did not start: {startup.get('detail', '')}"
            records.append(_failed(case, status, failure[:4000]))
            continue
        if found is None:
            records.append(_failed(case, "Not Run", NOT_RUN))
            continue
        record = _case(case, found)
        records.append(record)
        if record["scoreRatio"] == 0.0 and failure is None:
            failure = record["msg"]
    passed = all(record["scoreRatio"] == 1.0 for record in records)
    score = 100.0 * sum(record["scoreRatio"] for record in records) / len(records)
    final: dict[str, Any] = {
        "status": "done",
        "passed": passed,
        "result": "Correct Answer" if passed else "Wrong Answer",
        "score": score,
        "scoreUnbounded": score,
        "suite": suite,
        "cases": records,
    }
    if passed:
        final["value"] = geometric_mean([r["value"] for r in records if "value" in r])
        final["valueMean"] = "geometric"
    meta = next((e for e in events if e.get("event") == "meta"), {})
    final["gpu"] = {k: v for k, v in meta.items() if k != "event"}
    final["gpu"]["freezing"] = startup.get("freezing")
    final["gpu"]["calibration"] = startup.get("calibration")
    final["gpu"]["healthyAfter"] = end.get("healthyAfter") is None
    determinism = next((e for e in events if e.get("event") == "determinism"), None)
    if determinism is not None:  # a flag, never a failure (judges.gpu.trusted)
        final["determinism"] = {k: v for k, v in determinism.items() if k != "event"}
    warmup = next((e for e in events if e.get("event") == "warmup"), None)
    if warmup is not None:
        final["warmup"] = {"calls": warmup.get("calls"), "status": warmup.get("status")}
    return final


def _case(case: GpuCase, found: dict[str, Any]) -> dict[str, Any]:
    status = found.get("runStatus", "Runtime Error")
    label = f"{case.kind} {case.index} ({case.label()})"
    if status != "Accepted":
        return _failed(case, status, f"{status}: {label}: {found.get('detail', '')}"[:4000], found)
    record = _base(case, 1.0, "Accepted", "", found)
    if case.kind == "test":
        record["msg"] = f"pass: {label}: {found.get('detail', '')}"
        record["time"] = int(found.get("durationNs", 0))
        return record
    timing = dict(found.get("stats") or {})
    charged = found.get("charged") or {}
    mean = round(float(timing.get("meanUs", 0.0)), 6)
    timing.update(
        {
            "earlyUs": charged.get("earlyNs", 0) / 1e3,
            "lateUs": charged.get("lateNs", 0) / 1e3,
            "windowUs": charged.get("windowNs", 0) / 1e3,
            "floorUs": charged.get("floorNs", 0) / 1e3,
            "callsCharged": charged.get("callsCharged", 0),
            # the candidate's process's own account (diagnostic, untrusted), summed over the calls
            "worker": {
                key: charged.get(f"worker{key}Ns", 0) / 1e3 for key in ("Call", "Sync", "Export")
            }
            | {"clockUs": charged.get("clockNs", 0) / 1e3},
        }
    )
    if "trace" in charged:  # the package's `trace_calls`: every timed call's figures, in µs,
        timing["calls"] = charged["trace"]  # and the benchmark's own steps, in ms
        timing["steps"] = charged.get("steps", {})
    record.update({"value": mean, "timing": timing, "time": round(mean * 1e3)})
    record["msg"] = (
        f"pass: {label}: mean {mean:.6f} us over {timing.get('runs')} timed calls "
        f"(std {timing.get('stdUs', 0):.3f} us, best {timing.get('bestUs', 0):.3f} us, "
        f"worst {timing.get('worstUs', 0):.3f} us)"
    )
    return record


def _base(
    case: GpuCase, ratio: float, status: str, msg: str, found: dict[str, Any] | None = None
) -> dict[str, Any]:
    found = found or {}
    return {
        "ok": ratio == 1.0,
        "status": "Correct" if ratio == 1.0 else "Wrong Answer",
        "time": int(found.get("durationNs", 0)),
        "memory": 0,
        "msg": msg,
        "scoreRatio": ratio,
        "scoreRatioUnbounded": ratio,
        "runStatus": status,
        "kind": case.kind,
        "index": case.index,
        "spec": case.label(),
        "maxError": found.get("maxError"),
        "calls": found.get("calls", 0),
    }


def _failed(
    case: GpuCase, status: str, msg: str, found: dict[str, Any] | None = None
) -> dict[str, Any]:
    return _base(case, 0.0, status, msg, found)


def judge_error_record(message: str) -> dict[str, Any]:
    """An `error` record of kind `judge`: the judge's failure, never the candidate's verdict."""
    return {"status": "error", "error": f"Error: judge failure: {message}", "errorKind": "judge"}
