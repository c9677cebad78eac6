"""Task verifier: re-score the final program with the judge and write the reward.

Runs inside the trial container (Python 3.12 + httpx, see environment/Dockerfile), so it cannot
import the project's harness; it speaks the same protocol in its simplest form (one submit, poll
until a final answer or the deadline, a few attempts when the judge is unreachable) and applies
the same score hardening: every case ratio finite in [0, 1], score = 100 × mean ratio, and this
task's `score_check.check_case` on every case. A parity test pins its verdicts to the harness's.

Writes `reward.json` (`{"reward": <score>}`), `reason.txt` (one line saying why) and
`verdict.json` (status, message, judge details, the judge's suite) into the log directory, and
exits 0. Every candidate failure — missing or empty program, compile error, no case scored, an
inconsistent result, an evaluation still queued at the deadline — is reward 0 with its reason.
When the verifier cannot score at all — the judge unreachable after its attempts, a judge-side
exception, a bug here — it fails loudly instead: no `reward.json` (never a silent 0), the reason
in `reason.txt` and `verdict.json` (`"status": "verifier_failed"`), a `VERIFIER FAILED` line on
stderr, exit status 1; Harbor then records the trial's verification as an error.

Environment (all optional): FRONTIERCS_JUDGE_URL, GUIDANCE_TTT_JUDGE_TOKEN (the judge's access
token, sent as `Authorization: Bearer`; a judge bound off loopback needs it), FRONTIERCS_PROBLEM_ID,
VERIFIER_SOLUTION_PATH,
VERIFIER_LOG_DIR, VERIFIER_DEADLINE_S, VERIFIER_POLL_INTERVAL_S, VERIFIER_ATTEMPTS,
VERIFIER_RETRY_BACKOFF_S, VERIFIER_BUDGET_S (780: all attempts together, inside Harbor's 900 s).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx


def _own_check_case() -> Any:
    """This task's `score_check.check_case`, loaded from the file beside this one by path: an
    `import score_check` could pick up another task's module of the same name already loaded."""
    path = Path(__file__).resolve().parent / "score_check.py"
    spec = importlib.util.spec_from_file_location(f"score_check_{path.parent.parent.name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.check_case


check_case = _own_check_case()  # the task's own hook, beside this file

DEFAULT_JUDGE_URL = "http://host.docker.internal:8081"
TOKEN_ENV = "GUIDANCE_TTT_JUDGE_TOKEN"  # the judge's access token (judges/README.md, "Access")
# This file is the same in every task (a test keeps the copies identical); the task's own facts —
# judge problem, candidate language, where the program is, scoring rule — are in `task_facts.json`
# beside it, which a test keeps in agreement with the task's contract.json and task.toml.
FACTS = json.loads((Path(__file__).resolve().parent / "task_facts.json").read_text())
PROBLEM_ID = str(FACTS["judge_problem_id"])
LANG = FACTS["solution_language"]
SOLUTION_PATH = FACTS["solution_path"]
# "frontiercs": the judge's score; "value": the mean certified case value; "geomean": the
# geometric mean of the case values (a timing task)
VERIFIER = FACTS["verifier"]
DIRECTION = FACTS["score_direction"]  # "min": the reward is 1 / raw, so it grows as raw falls
#: The file part the judge receives, by candidate language (as the harness's client sends it).
UPLOADS = {"cpp": ("solution.cpp", "text/x-c++src"), "python": ("solution.py", "text/x-python")}


#: `error` answers that are the candidate's compile failure (as the harness client reads them);
#: every other `error` answer is a judge-side exception. `errorKind` (local judge) wins.
COMPILE_FAILURE_MARKERS = (
    "compile failed",
    "compilation failed",
    "compile error",
    "compilation error",
)


class JudgeDown(Exception):
    """The judge could not give a final answer (unreachable, 5xx, malformed, lost result)."""


class CannotScore(Exception):
    """No verdict can be given: the verifier must fail loudly rather than write a reward."""


def main() -> int:
    """Score the program named by the environment and write the reward files. Returns 0, or 1
    when no verdict could be given (then no reward file is written)."""
    env = os.environ
    log_dir = Path(env.get("VERIFIER_LOG_DIR", "/logs/verifier"))
    solution = Path(env.get("VERIFIER_SOLUTION_PATH", SOLUTION_PATH))
    log_dir.mkdir(parents=True, exist_ok=True)
    try:
        reward, reason, details = score(solution, env)
    except Exception as exc:  # no verdict: fail loudly, never a silent reward 0
        reason = str(exc) if isinstance(exc, CannotScore) else f"{type(exc).__name__}: {exc}"
        (log_dir / "reward.json").unlink(missing_ok=True)
        (log_dir / "reason.txt").write_text(f"verifier failed: {reason}\n")
        failed = {"status": "verifier_failed", "reason": reason}
        (log_dir / "verdict.json").write_text(json.dumps(failed, indent=2) + "\n")
        print(f"VERIFIER FAILED (no reward written): {reason}", file=sys.stderr)
        return 1
    (log_dir / "reward.json").write_text(json.dumps({"reward": reward}) + "\n")
    (log_dir / "reason.txt").write_text(reason + "\n")
    verdict = {"reward": reward, "reason": reason, **details}
    (log_dir / "verdict.json").write_text(json.dumps(verdict, indent=2) + "\n")
    print(f"reward {reward}: {reason}")
    return 0


def score(solution: Path, env: os._Environ[str] | dict[str, str]) -> tuple[float, str, dict]:
    """Return (reward, reason, details) for the program at `solution`."""
    if not solution.is_file():
        return 0.0, f"no program at {solution}: nothing to score", {}
    code = solution.read_text(errors="replace")
    if not code.strip():
        return 0.0, f"the program at {solution} is empty", {}
    url = env.get("FRONTIERCS_JUDGE_URL") or DEFAULT_JUDGE_URL
    problem = env.get("FRONTIERCS_PROBLEM_ID") or PROBLEM_ID
    attempts = max(1, int(env.get("VERIFIER_ATTEMPTS", "3")))
    backoff = float(env.get("VERIFIER_RETRY_BACKOFF_S", "5"))
    # Harbor kills the verifier after 900 s; all attempts together stay well inside that.
    budget_end = time.monotonic() + float(env.get("VERIFIER_BUDGET_S", "780"))
    details: dict[str, Any] = {"judge_url": url, "problem_id": problem}
    for attempt in range(1, attempts + 1):
        try:
            answer = judge(code, url, problem, env, budget_end)
            break
        except JudgeDown as exc:
            details["judge_fault"] = str(exc)
            pause = backoff * 2 ** (attempt - 1)
            if attempt == attempts or time.monotonic() + pause >= budget_end:
                raise CannotScore(f"judge unavailable after {attempt} attempts: {exc}") from exc
            time.sleep(pause)
    if answer is None:
        return 0.0, f"evaluation timed out after {env.get('VERIFIER_DEADLINE_S', '340')}s", details
    if answer.get("status") == "error":
        message = str(answer.get("error", ""))[:500]
        kind = answer.get("errorKind")
        compile_failure = kind == "compile" or (
            kind is None and any(m in message.lower() for m in COMPILE_FAILURE_MARKERS)
        )
        if not compile_failure:
            raise CannotScore(f"judge-side exception at {url}: {message}")
        return 0.0, f"compile error: {message}", details
    if isinstance(answer.get("suite"), dict):
        details["suite"] = answer["suite"].get("name") or answer["suite"].get("kind")
    else:
        details["suite"] = "public"  # FrontierCS's own judge labels no suite: its public cases
    problem_found = inconsistency(answer)
    if problem_found:
        return 0.0, f"inconsistent judge result, score rejected: {problem_found}", details
    details["case_ratios"] = [float(case["scoreRatio"]) for case in answer["cases"]]
    if VERIFIER in ("value", "geomean"):
        geometric = VERIFIER == "geomean"  # over the cases that carry a value (the timed ones)
        values = [c.get("value") for c in answer["cases"] if not geometric or "value" in c]
        failed = [case for case in answer["cases"] if case["scoreRatio"] != 1.0]
        finite = bool(values) and all(_finite(v) for v in values) and _finite(answer.get("value"))
        if failed or not finite or (geometric and min(values) <= 0):
            first = (failed or answer["cases"])[0]
            return 0.0, "no certified value: " + str(first.get("msg", ""))[:300], details
        raw = float(answer["value"])
        if geometric:
            expected = math.exp(math.fsum(math.log(v) for v in values) / len(values))
        else:
            expected = math.fsum(values) / len(values)
        if abs(raw - expected) > 1e-6 * max(1.0, abs(raw)):
            return 0.0, f"inconsistent judge result: value {raw!r} vs cases {values!r}", details
    else:
        raw = float(answer["score"])
    details["raw_score"] = raw
    if DIRECTION == "min":
        if raw <= 0:
            return 0.0, f"raw score {raw!r} is not positive", details
        return 1.0 / raw, f"raw score {raw!r} (lower is better; reward 1/raw)", details
    return raw, f"score {raw:.6f} over {len(answer['cases'])} cases", details


def judge(code: str, url: str, problem: str, env: Any, budget_end: float) -> dict[str, Any] | None:
    """Submit once and poll for the first final answer; None when still queued at the deadline
    (340 s from the submit, or the end of the verifier's budget if that comes first)."""
    deadline_s = float(env.get("VERIFIER_DEADLINE_S", "340"))
    interval = float(env.get("VERIFIER_POLL_INTERVAL_S", "2"))
    deadline = min(time.monotonic() + deadline_s, budget_end)
    token = str(env.get(TOKEN_ENV) or "").strip()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with httpx.Client(base_url=url.rstrip("/"), headers=headers) as client:
        try:
            response = client.post(
                "/submit",
                data={"pid": problem, "lang": LANG},
                files={"code": (UPLOADS[LANG][0], code.encode(), UPLOADS[LANG][1])},
                timeout=max(min(30.0, deadline - time.monotonic()), 0.001),
            )
            sid = response.json().get("sid") if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            raise JudgeDown(f"submit failed: {type(exc).__name__}: {exc}") from exc
        if response.status_code == 401:
            state = "is wrong" if token else "is not set"
            raise JudgeDown(f"submit answered 401: the judge wants its token; {TOKEN_ENV} {state}")
        if sid is None or isinstance(sid, bool):
            raise JudgeDown(f"submit answered {response.status_code}: {response.text[:200]!r}")
        queued = False
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                response = client.get(f"/result/{sid}", timeout=min(10.0, remaining))
                body = response.json() if response.status_code == 200 else None
            except httpx.TimeoutException:
                body = "no answer in time"  # keeps `queued` as it was
            except (httpx.HTTPError, ValueError):
                body = None
            status = body.get("status") if isinstance(body, dict) else None
            if status in ("done", "error"):
                return body  # the first final answer; a read-once judge forgets it now
            if not isinstance(body, str):
                queued = status in ("queued", "running")
            time.sleep(max(min(interval, deadline - time.monotonic()), 0))
    if queued:
        return None
    raise JudgeDown(f"no final answer for submission {sid} within {deadline_s:g}s")


def inconsistency(answer: dict[str, Any]) -> str | None:
    """What makes a `done` answer untrustworthy (docs/task.md, 'Score hardening'), or None."""
    cases, score_value = answer.get("cases"), answer.get("score")
    if not isinstance(cases, list) or not cases or not all(isinstance(c, dict) for c in cases):
        return "the result has no list of cases"
    if not _finite(score_value):
        return f"the judge reported a non-finite score {score_value!r}"
    for index, case in enumerate(cases, start=1):
        ratio = case.get("scoreRatio")
        if not _finite(ratio) or not 0.0 <= ratio <= 1.0:
            return f"case {index} has ratio {ratio!r}, not a finite number in [0, 1]"
        problem = check_case(case)
        if problem is not None:
            return f"case {index}: {problem}"
    expected = 100.0 * math.fsum(case["scoreRatio"] for case in cases) / len(cases)
    if abs(score_value - expected) > 1e-6:
        return f"score {score_value!r} disagrees with 100 × mean case ratio {expected!r}"
    return None


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


if __name__ == "__main__":
    sys.exit(main())
