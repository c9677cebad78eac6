"""The Tinker stand-in as a service process of its own, outliving the rehearsal that started it.

Tinker is a service apart from its clients: when a run dies, Tinker stays up, and the Reef it
leaves behind finishes its Tinker sessions while it stops. A stand-in inside the rehearsal's
process would die with it, and Reef's stop would then retry those calls for minutes, holding
its Tinker state directory, so the resumed rehearsal's Reef could not start. So the rehearsal
runs the stand-in here: tied to the rehearsal (``start_tied``: SIGTERM when it dies, however),
it keeps answering after SIGTERM until nothing has called it for ``IDLE_S`` (Reef's stop is
done), at most ``DRAIN_S``, then exits. Its durable checkpoints are in ``--store``, so the next
stand-in serves them.

    python -m harness.rehearsal.tinker_process --store FILE [--scripted-guidance]

prints ``port N`` once it listens on 127.0.0.1:N. ``--scripted-guidance``: the sampler answers
with the rehearsal's scripted guidance (``harness.rehearsal.stand_ins.GuidanceScript``, call 2
malformed, as in the frozen rehearsal), encoded with the stand-in tokenizer.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.adapters.child_process import start_tied
from harness.rehearsal.openai_server import RecordedRequest
from harness.rehearsal.stand_ins import MALFORMED_CALL, GuidanceScript
from harness.rehearsal.tinker_service import Completion
from harness.rehearsal.tinker_stand_in import TinkerStandIn
from harness.rehearsal.tinker_tokenizer import encode

#: After SIGTERM: exit once no request came for IDLE_S seconds, or after DRAIN_S at most.
IDLE_S = 3.0
DRAIN_S = 60.0
START_TIMEOUT_S = 60.0


@contextmanager
def running_stand_in(store: Path, *, scripted_guidance: bool = True) -> Iterator[str]:
    """Start the stand-in process with durable checkpoints in ``store`` (its output in
    ``tinker-stand-in.log`` beside it); yield its base URL; stop it on exit (SIGTERM, then it
    drains). Raises ``RuntimeError`` naming the log when it does not listen within
    ``START_TIMEOUT_S``."""
    command = [sys.executable, "-m", __name__, "--store", str(store)]
    if scripted_guidance:
        command.append("--scripted-guidance")
    store.parent.mkdir(parents=True, exist_ok=True)
    log_path = store.with_name("tinker-stand-in.log")
    with log_path.open("ab") as log:
        process = start_tied(command, stdout=subprocess.PIPE, stderr=log)
    try:
        yield f"http://127.0.0.1:{_port(process, log_path)}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=DRAIN_S + 5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def scripted_guidance(script: GuidanceScript) -> Completion:
    """The stand-in sampler's answers: ``script``'s guidance texts, in call order, as the
    stand-in tokenizer's ids (Reef's sampler decodes them back into the same text)."""

    def complete(prompt: object) -> list[int]:
        request = RecordedRequest("POST", "/v1/chat/completions", {}, {})
        return encode(script(request).content)

    return complete


def _port(process: subprocess.Popen[bytes], log_path: Path) -> int:
    """The port of the ``port N`` line the process prints once it listens."""
    assert process.stdout is not None
    found: list[bytes] = []
    reader = threading.Thread(target=lambda: found.append(process.stdout.readline()), daemon=True)
    reader.start()
    reader.join(START_TIMEOUT_S)
    line = found[0].decode(errors="replace") if found else ""
    if not line.startswith("port "):
        process.kill()
        raise RuntimeError(
            f"the Tinker stand-in did not start within {START_TIMEOUT_S:.0f}s; see {log_path}"
        )
    return int(line.split()[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.rehearsal.tinker_process")
    parser.add_argument("--store", type=Path, required=True, help="the durable checkpoints")
    parser.add_argument("--scripted-guidance", action="store_true")
    args = parser.parse_args(argv)

    completion = None
    if args.scripted_guidance:
        completion = scripted_guidance(GuidanceScript(malformed=[MALFORMED_CALL]))
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    with TinkerStandIn(completion=completion, store=args.store) as stand_in:
        print(f"port {stand_in.base_url.rsplit(':', 1)[1]}", flush=True)
        while not stopping.wait(0.5):
            pass
        deadline = time.monotonic() + DRAIN_S
        while time.monotonic() < deadline and time.monotonic() - stand_in.last_request_at < IDLE_S:
            time.sleep(0.1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
