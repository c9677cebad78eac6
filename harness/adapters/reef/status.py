"""Reef's training status page (`GET /reef/status`), read for the run controller's barrier.

`read_step_status` is pure: it turns the JSON page into the three facts the controller acts on —
a service-level `error`, a discarded step (the tttd grouping's `failed_steps`, e.g. reason
`mixed_release_ids`), and the slots of an open step that Reef has not received yet. Reef itself
does not list missing slots (docs/design.md §12); the tttd grouping's `status()` does, and Reef
publishes it under `scenarios.<scenario>.processor`. `ReefStatusClient` is the thin HTTP adapter.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

Slot = tuple[int, int]


class StatusSource(Protocol):
    """Anything that returns the current `/reef/status` page as a mapping."""

    def fetch(self) -> Mapping[str, Any]: ...


class ReefStatusUnavailable(RuntimeError):
    """The status page could not be read this time (transport error or a 5xx answer). The
    barrier treats it as transient and asks again on its next poll."""


@dataclass(frozen=True)
class FailedStep:
    """A step Reef discarded and will never train, with the releases its reports spanned."""

    step: int
    reason: str
    release_ids: tuple[str, ...]


@dataclass(frozen=True)
class StepStatus:
    """What the status page says about one step of one scenario. `missing_slots` is None when the
    page does not list the step as open (not started, already complete, or no scenario yet)."""

    error: str | None
    failed: FailedStep | None
    missing_slots: tuple[Slot, ...] | None


def read_step_status(
    page: Mapping[str, Any], scenario: str, step: int, *, strict: bool = False
) -> StepStatus:
    """Pick `step`'s facts for `scenario` out of a `/reef/status` page. A malformed field that
    the controller relies on is a RuntimeError naming it; unrelated fields are ignored.

    `strict` is the training barrier's reading, the reference's (its run_controller.py
    `failed_training_step`): a scenario block without its `processor` block or without a
    `failed_steps` list, or a failed step without a non-empty `reason` and a `release_ids` list,
    is refused — the barrier cannot tell whether the step failed. A page without the scenario's
    block at all is not refused (the reference's `scenario_status` refuses it): a Reef without a
    training backend for the scenario — the record-only Reef of the CPU rehearsal behind
    `guidance-ttt rehearse` — lists none, and the training bridge, not the page, decides
    durability; the barrier's deadline bounds the wait (docs/differences.md, row 43). Without
    `strict` (the `status` command, which may ask before the first report) a missing block
    means "nothing known yet"."""
    if not isinstance(page, Mapping):
        raise RuntimeError(f"/reef/status returned {type(page).__name__}, not a JSON object")
    error = page.get("error")
    if error is not None and not isinstance(error, str):
        raise RuntimeError(f"/reef/status field `error` is {error!r}, not a string or null")
    scenarios = page.get("scenarios") or {}
    block = scenarios.get(scenario) if isinstance(scenarios, Mapping) else None
    processor = block.get("processor") if isinstance(block, Mapping) else None
    where = f"/reef/status scenarios.{scenario}"
    if (
        strict
        and error is None
        and isinstance(block, Mapping)
        and not isinstance(processor, Mapping)
    ):
        raise RuntimeError(
            f"Reef returned no processor block for scenario {scenario!r} ({where}); is "
            "serve.yaml's recipe the tttd recipe?"
        )
    if not isinstance(processor, Mapping):
        return StepStatus(error or None, None, None)
    where += ".processor"
    failed = next((f for f in _failed_steps(processor, where, strict) if f.step == step), None)
    return StepStatus(error or None, failed, _missing_slots(processor, step, where))


def _failed_steps(processor: Mapping[str, Any], where: str, strict: bool) -> list[FailedStep]:
    entries = processor.get("failed_steps")
    if entries is None and not strict:
        entries = []
    if not isinstance(entries, list):
        raise RuntimeError(f"{where}.failed_steps is {entries!r}, not a list")
    failed = []
    for entry in entries:
        if not isinstance(entry, Mapping) or not _is_int(entry.get("step")):
            raise RuntimeError(f"{where}.failed_steps entry {entry!r} has no integer `step`")
        reason, releases = entry.get("reason"), entry.get("release_ids")
        if strict and not (isinstance(reason, str) and reason and isinstance(releases, list)):
            raise RuntimeError(
                f"{where}.failed_steps entry {entry!r} needs a non-empty `reason` and a "
                "`release_ids` list"
            )
        failed.append(FailedStep(int(entry["step"]), str(reason), tuple(map(str, releases or []))))
    return failed


def _missing_slots(processor: Mapping[str, Any], step: int, where: str) -> tuple[Slot, ...] | None:
    # tttd's grouping: open_steps = [{"step", "filled", "expected", "missing": [{group, rollout}]}]
    entries = processor.get("open_steps") or []
    if not isinstance(entries, list):
        raise RuntimeError(f"{where}.open_steps is {entries!r}, not a list")
    for entry in entries:
        if isinstance(entry, Mapping) and entry.get("step") == step:
            slots = entry.get("missing")
            if not isinstance(slots, list) or not all(_is_slot(s) for s in slots):
                raise RuntimeError(f"{where}.open_steps[step={step}].missing is {slots!r}")
            return tuple((s["group"], s["rollout"]) for s in slots)
    return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_slot(value: Any) -> bool:
    return (
        isinstance(value, Mapping) and _is_int(value.get("group")) and _is_int(value.get("rollout"))
    )


def format_slots(slots: tuple[Slot, ...]) -> str:
    """`(group, rollout)` slots as a short human list: `g0r1, g1r3`."""
    return ", ".join(f"g{g}r{r}" for g, r in slots) or "none"


class ReefStatusClient:
    """Reads `GET {base_url}/reef/status` with the Reef bearer token (never logged).

    Transport errors and 5xx answers raise `ReefStatusUnavailable` (worth asking again); any other
    non-200 answer or a non-JSON body is a RuntimeError carrying the status and body.
    """

    def __init__(self, base_url: str, *, token: str | None = None, timeout_s: float = 10.0) -> None:
        self._url = base_url.rstrip("/") + "/reef/status"
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        # One pooled client: the barrier asks every few seconds for hours.
        self._client = httpx.Client(headers=headers, timeout=timeout_s)

    def close(self) -> None:
        """Release the connection pool."""
        self._client.close()

    def fetch(self) -> dict[str, Any]:
        """One read of the status page as a dict."""
        try:
            response = self._client.get(self._url)
        except httpx.TransportError as exc:
            raise ReefStatusUnavailable(f"GET {self._url} failed: {exc!r}") from exc
        if response.status_code >= 500:
            raise ReefStatusUnavailable(
                f"GET {self._url} answered {response.status_code}: {response.text[:300]}"
            )
        if response.status_code != 200:
            raise RuntimeError(
                f"GET {self._url} answered {response.status_code}: {response.text[:300]}"
            )
        try:
            page = response.json()
        except ValueError as exc:
            raise RuntimeError(f"GET {self._url} returned non-JSON: {response.text[:300]}") from exc
        if not isinstance(page, dict):
            raise RuntimeError(f"GET {self._url} returned {type(page).__name__}, not an object")
        return page
