"""A guidance call Reef's Tinker sampler could not serve: the SDK's exception, as Reef's log
prints it, read into one line with what to do (`harness.adapters.reef.tinker_faults`). The
real Reef on the Tinker stand-in, with a revoked key, is in test_tinker_reef_on_stand_in.py."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from harness.adapters.reef.channel import ReefClientError
from harness.adapters.reef.tinker_faults import (
    TinkerKeyRefused,
    TinkerReefChannel,
    TinkerUnavailable,
    log_size,
    tinker_fault,
)
from tests.loopback import serving

REVOKED = (
    "tinker.AuthenticationError: Error code: 401 - "
    "{'detail': 'Invalid API key: this key has been revoked'}\n"
)
RATE_LIMITED = "tinker.RateLimitError: Error code: 429 - {'detail': 'slow down'}\n"


def test_only_the_log_written_since_the_call_began_is_read(tmp_path):
    log = tmp_path / "reef.log"
    assert log_size(log) == 0 and tinker_fault(log, 0) is None
    log.write_text("Traceback (most recent call last):\n" + REVOKED)
    offset = log_size(log)
    assert tinker_fault(log, offset) is None
    with log.open("a") as handle:
        handle.write("  File ...\n" + RATE_LIMITED)
    fault = tinker_fault(log, offset)
    assert fault is not None and fault.name == "RateLimitError"


def test_a_refused_key_names_its_variable_and_the_fix_in_one_line(tmp_path):
    log = tmp_path / "reef.log"
    log.write_text(REVOKED.replace("Invalid API key", "key tml-abc123 invalid"))
    error = tinker_fault(log, 0).error("MY_TINKER_KEY")
    assert isinstance(error, TinkerKeyRefused)
    text = str(error)
    assert "put a valid Tinker API key in MY_TINKER_KEY" in text and "re-run" in text
    assert "\n" not in text and "abc123" not in text


def test_any_other_tinker_error_says_how_to_resume(tmp_path):
    log = tmp_path / "reef.log"
    log.write_text(RATE_LIMITED)
    error = tinker_fault(log, 0).error("TINKER_API_KEY")
    assert isinstance(error, TinkerUnavailable)
    assert "RateLimitError" in str(error) and "became no reward" in str(error)


@contextmanager
def failing_reef(log: Path, line: str) -> Iterator[str]:
    """A loopback server answering every request as Reef 0.1.3 answers a guidance call its
    Tinker sampler could not serve: a bare 500, the SDK's exception appended to `log`."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with log.open("a") as handle:
                handle.write("Traceback (most recent call last):\n" + line)
            body = b"500 Internal Server Error\n\nServer got itself in trouble"
            self.send_response(500)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as url:
        yield url


BODY = {"model": "Qwen/Qwen3-8B", "messages": [{"role": "user", "content": "guide"}]}


def test_the_run_channel_turns_reefs_bare_500_into_the_tinker_fault(tmp_path):
    log = tmp_path / "reef.log"
    log.write_text(RATE_LIMITED)  # an earlier call's fault, not this one's
    with failing_reef(log, REVOKED) as url:
        channel = TinkerReefChannel(url, "s", token="t", reef_log=log, key_env="TINKER_API_KEY")
        with pytest.raises(TinkerKeyRefused, match="revoked") as refused:
            channel.guide(BODY)
    assert isinstance(refused.value.__cause__, ReefClientError)
    assert "put a valid Tinker API key in TINKER_API_KEY" in str(refused.value)


def test_a_500_without_a_tinker_fault_stays_reefs_error(tmp_path):
    log = tmp_path / "reef.log"
    with failing_reef(log, "KeyError: 'choices'\n") as url:
        channel = TinkerReefChannel(url, "s", token="t", reef_log=log, key_env="TINKER_API_KEY")
        with pytest.raises(ReefClientError):
            channel.guide(BODY)
