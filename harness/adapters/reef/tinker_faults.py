"""A guidance call Reef's Tinker sampler could not serve, said in one line with what to do.

Reef 0.1.3 answers a guidance call whose Tinker request failed with a bare ``500 Internal Server
Error``; the Tinker SDK's exception is written only to Reef's log (``<reef.run-dir>/reef/
reef.log``, e.g. ``tinker.AuthenticationError: Error code: 401 - {...}``). By then the SDK has
already retried what Tinker calls transient (408, 409, 429 and 5xx, with exponential backoff for
up to five minutes), so the harness does not retry it again. :class:`TinkerReefChannel` is the
run's Reef channel on Tinker: a guidance call Reef answers with a 5xx is looked up in the part of
Reef's log written since the call began, and raised as :class:`TinkerKeyRefused` (a 401 or 403:
the key) or :class:`TinkerUnavailable` (any other Tinker error). The slot was neither journaled
nor reported, so the failure never becomes a reward, and the same command resumes the step.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.adapters.reef.channel import ReefChannel, ReefClientError

#: The SDK's exception as Reef's log prints it: ``tinker.<Name>: <message>``.
_TINKER_ERROR = re.compile(r"\btinker\.(\w+(?:Error|Exception|Timeout))\b:\s*(.*)")
#: The SDK's exceptions of a key Tinker refused (HTTP 401, 403).
KEY_ERRORS = frozenset({"AuthenticationError", "PermissionDeniedError"})
#: The most of Reef's log read after a failed call.
_READ_LIMIT = 1 << 20


class TinkerKeyRefused(RuntimeError):
    """Tinker refused the run's API key; the message names the variable and the fix."""


class TinkerUnavailable(RuntimeError):
    """A Tinker request failed after the SDK's retries; the message says how to resume."""


@dataclass(frozen=True)
class TinkerFault:
    """The last Tinker SDK exception in a stretch of Reef's log."""

    name: str
    detail: str

    def error(self, key_env: str) -> RuntimeError:
        """The one-line error for this fault; ``key_env`` names the key's variable."""
        said = f"{self.name}: {_redacted(self.detail)}"
        if self.name in KEY_ERRORS:
            return TinkerKeyRefused(
                f"Tinker refused the API key in {key_env} ({said}); put a valid Tinker API key "
                f"in {key_env} in this shell's environment and re-run the same command — the "
                "step resumes from its journal, and the refused call became no reward"
            )
        return TinkerUnavailable(
            f"Tinker failed a guidance call after the SDK's retries ({said}); re-run the same "
            "command once Tinker answers again — the step resumes from its journal, and the "
            "failed call became no reward (Reef's log: <reef.run-dir>/reef/reef.log)"
        )


def tinker_fault(log: Path, offset: int) -> TinkerFault | None:
    """The last ``tinker.<Error>: ...`` line of ``log`` from byte ``offset`` on (None if none)."""
    try:
        with log.open("rb") as handle:
            handle.seek(offset)
            text = handle.read(_READ_LIMIT).decode("utf-8", "replace")
    except OSError:
        return None
    found = None
    for line in text.splitlines():
        match = _TINKER_ERROR.search(line)
        if match:
            found = TinkerFault(match.group(1), match.group(2).strip()[:300])
    return found


def log_size(log: Path) -> int:
    """The byte length of ``log`` now (0 when it does not exist yet)."""
    try:
        return log.stat().st_size
    except OSError:
        return 0


class TinkerReefChannel(ReefChannel):
    """The Reef channel of a run on Reef's Tinker backend: a guidance call that failed on Tinker
    raises :class:`TinkerKeyRefused` or :class:`TinkerUnavailable` (read from ``reef_log``)."""

    def __init__(
        self, url: str, scenario: str, *, token: str | None, reef_log: Path, key_env: str
    ) -> None:
        super().__init__(url, scenario, token=token)
        self.reef_log = Path(reef_log)
        self.key_env = key_env

    def guide(self, body: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
        offset = log_size(self.reef_log)
        try:
            return super().guide(body)
        except ReefClientError as exc:
            if not isinstance(exc.status, int) or exc.status < 500:
                raise
            fault = tinker_fault(self.reef_log, offset)
            if fault is None:
                raise
            raise fault.error(self.key_env) from exc


def _redacted(text: str) -> str:
    """``text`` without anything shaped like a Tinker key (``tml-...``)."""
    return re.sub(r"tml-[A-Za-z0-9_\-]+", "tml-…", text)
