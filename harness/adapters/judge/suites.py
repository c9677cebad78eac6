"""One suite per comparison: which cases a score was measured on, and keeping a run on one.

A score means something only beside scores of the same cases. Suites are named `public`
(FrontierCS's public cases: a FrontierCS problem package, a folder of the public cases, or
FrontierCS's own judge, which labels nothing) and `generated:<seed>:<n>` (the local judge's
generated Polyomino suite: seed and case count). The local judge reports the name in
`GET /problems` and in every `done` result (`suite.name`).

A task's seed score is measured on a named suite (the seed record's `measured` entry with that
score names it, or a top-level `suite`). A new
run asks the judge which suite it serves; when that is another suite, the seed is re-scored on
the judge's suite before anything is compared (`align_seed`), and the run records both (the seed
entry's metadata and a `seed_rescored` event). A resumed run whose archive was scored on another
suite than the judge's now is refused (`check_resume_suite`): its old and new scores would not
compare.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from harness.adapters.judge.token import judge_headers, unauthorized_hint
from harness.library import Archive
from harness.scorer import Scorer
from harness.state import VALID, LibraryEntry

PUBLIC = "public"
#: Where a seed file names the suite its entry's score was measured on.
SEED_SUITE_KEY = "suite"
#: The seed entry's metadata keys this module writes.
SUITE_METADATA = "suite"
RESCORED_METADATA = "seed_rescored_from"


class SuiteMismatch(RuntimeError):
    """Scores of two different suites would be compared."""


def suite_name(suite: Any) -> str:
    """The name of a judge's suite label (`GET /problems` entry or `done` result `suite`): its
    `name`, else derived from its `kind` and `label`; a judge that labels nothing (FrontierCS's
    own) serves the public cases."""
    if not isinstance(suite, Mapping):
        return PUBLIC
    name = suite.get("name")
    if isinstance(name, str) and name.strip():
        return name.strip()
    if suite.get("kind") == "generated":
        return "generated"
    return PUBLIC


def judge_suite(judge_url: str, problem_id: str, timeout_s: float = 10.0) -> str:
    """The suite the judge at `judge_url` serves for `problem_id` (`GET /problems`). Raises
    `RuntimeError` naming the URL when the judge does not answer or does not list the problem."""
    url = judge_url.rstrip("/") + "/problems"
    try:
        response = httpx.get(url, timeout=timeout_s, headers=judge_headers())
        response.raise_for_status()
        body = response.json()
    except httpx.HTTPStatusError as exc:
        raise RuntimeError(
            f"cannot read the judge's suite from {url}: {exc.response.status_code}"
            + unauthorized_hint(exc.response.status_code)
        ) from exc
    except (httpx.HTTPError, ValueError) as exc:
        raise RuntimeError(
            f"cannot read the judge's suite from {url}: {type(exc).__name__}: {exc}; start the "
            "judge (guidance-ttt judge) or set FRONTIERCS_JUDGE_URL"
        ) from exc
    problems = body.get("problems") if isinstance(body, Mapping) else body
    if not isinstance(problems, list):
        raise RuntimeError(f"{url} answered {str(body)[:200]!r}, not a list of problems")
    for problem in problems:
        if isinstance(problem, Mapping) and str(problem.get("id")) == str(problem_id):
            return suite_name(problem.get("suite"))
        if not isinstance(problem, Mapping) and str(problem) == str(problem_id):
            return PUBLIC  # a judge that lists bare ids labels no suite
    listed = [p.get("id") if isinstance(p, Mapping) else p for p in problems]
    raise RuntimeError(
        f"the judge at {judge_url} does not serve problem {problem_id!r} (it lists {listed}); "
        "set FRONTIERCS_PROBLEM_ID or start the judge with that problem"
    )


def seed_suite(seed_path: Path) -> str:
    """The suite a seed record's entry score was measured on: its `suite`, else the suite of the
    `measured` record whose score is the entry's (the task's seed records name their suites)."""
    path = Path(seed_path)
    data = json.loads(path.read_text(encoding="utf-8"))
    value = data.get(SEED_SUITE_KEY) if isinstance(data, Mapping) else None
    if isinstance(value, str) and value.strip():
        return value.strip()
    entry = data.get("entry") if isinstance(data, Mapping) else None
    score = entry.get("verifier_raw_score") if isinstance(entry, Mapping) else None
    measured = data.get("measured") if isinstance(data, Mapping) else None
    for record in (measured or {}).values() if isinstance(measured, Mapping) else ():
        if (
            isinstance(record, Mapping)
            and isinstance(record.get("suite"), str)
            and isinstance(record.get("score"), int | float)
            and isinstance(score, int | float)
            and abs(record["score"] - score) <= 1e-9 * max(1.0, abs(score))
        ):
            return record["suite"]
    raise ValueError(
        f"{path} does not name the suite its seed score {score!r} was measured on; add "
        f'"{SEED_SUITE_KEY}": "public" (or "generated:<seed>:<n>"), or a `measured` record '
        "with that score and its suite"
    )


def entry_suite(entry: LibraryEntry, default: str) -> str:
    """The suite recorded on an archive's seed entry (`default` for an archive from before
    suites were recorded: the seed file's suite)."""
    value = entry.metadata.get(SUITE_METADATA)
    return value if isinstance(value, str) and value else default


def align_seed(
    seed: LibraryEntry, measured_on: str, serving: str, scorer: Scorer
) -> tuple[LibraryEntry, dict[str, Any] | None]:
    """The seed entry for a new run whose judge serves suite `serving`, and what was done.

    Same suite: the seed as measured, labelled with its suite, and None. Another suite: the seed
    program is judged on `serving` (a `JudgeUnavailableError` propagates: no comparison without
    a score) and the entry carries the new score, the suite and where it came from; returns the
    `seed_rescored` record. A seed that is not valid on the judge's suite is an error."""
    if measured_on == serving:
        return _labelled(seed, serving, None), None
    verdict = scorer(seed.solution)
    if verdict.status != VALID or verdict.raw_score is None:
        raise SuiteMismatch(
            f"the seed was measured on suite {measured_on} and the judge serves {serving}; "
            f"re-scoring it there gave {verdict.status}: {verdict.message}"
        )
    record = {
        "suite": serving,
        "score": verdict.raw_score,
        "from_suite": measured_on,
        "from_score": seed.verifier_raw_score,
        "message": verdict.message,
    }
    rescored = dataclasses.replace(
        seed,
        verifier_reward=verdict.reward,
        verifier_raw_score=verdict.raw_score,
        verifier_message=verdict.message,
    )
    origin = {"suite": measured_on, "score": seed.verifier_raw_score}
    return _labelled(rescored, serving, origin), record


def _labelled(entry: LibraryEntry, suite: str, origin: Mapping[str, Any] | None) -> LibraryEntry:
    metadata = {**entry.metadata, SUITE_METADATA: suite}
    if origin is not None:
        metadata[RESCORED_METADATA] = dict(origin)
    return dataclasses.replace(entry, metadata=metadata)


def check_resume_suite(archived: str, serving: str, judge_url: str) -> None:
    """Refuse to continue a run scored on suite `archived` against a judge serving `serving`."""
    if archived != serving:
        raise SuiteMismatch(
            f"this run's scores were measured on suite {archived}, but the judge at {judge_url} "
            f"serves suite {serving}; scores of two suites do not compare. Start the judge on "
            f"{archived} (see judges/README.md), or start a new state directory"
        )


@dataclass(frozen=True)
class SeedOnSuite:
    """The judge's suite at the start of a run; for a new run the seed entry on that suite and
    its `seed_rescored` record (None when the seed record already measured it there)."""

    suite: str
    entry: LibraryEntry | None = None
    record: dict[str, Any] | None = None


def seed_on_judge_suite(
    scorer: Scorer, seed_record: Path, seed: LibraryEntry | None
) -> SeedOnSuite:
    """Ask the judge its suite (`JudgeUnavailableError` propagates); for a new run (`seed`, the
    entry of `seed_record`) align the seed with that suite (`align_seed`)."""
    suite = scorer.suite()
    if seed is None:
        return SeedOnSuite(suite)
    entry, record = align_seed(seed, seed_suite(seed_record), suite, scorer)
    return SeedOnSuite(suite, entry, record)


def check_archive_suite(archive: Archive, seed_record: Path, serving: str, judge_url: str) -> None:
    """Refuse to resume an archive whose scores were measured on another suite than `serving`
    (its seed entry's label; an archive from before labels has the seed record's suite)."""
    seed = next(e for e in archive.entries.values() if e.timestep == 0)
    check_resume_suite(entry_suite(seed, seed_suite(seed_record)), serving, judge_url)
