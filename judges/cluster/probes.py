"""Reading a node's probe answer, the same for CPU and GPU nodes: a node is refused (its record's
`refused` says why, in one line) when the probe task failed, the node answered that its sandbox
cannot run, or it runs other judge code than the front."""

from __future__ import annotations

from typing import Any

import ray
from ray.exceptions import RayError

from judges.verdicts.fingerprints import judge_code


def read_probe(record: Any, ref: Any, what: str = "probe") -> None:
    """Wait for the probe task `ref` and set `record.host`, or `record.refused` naming why."""
    try:
        answer = ray.get(ref)
    except RayError as error:
        record.refused = f"its {what} failed: {type(error).__name__}: {first_line(error)}"
        return
    record.host = answer.get("host", record.host)
    if not answer["ok"]:
        record.refused = answer["error"]
    elif answer["code"] != judge_code():
        record.refused = "it runs other judge code than the front; install the same version"


def first_line(error: BaseException | None) -> str:
    """The first line of an error's message, at most 300 characters."""
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else "no message"
