"""What a failure of the candidate says: the exception and the candidate's frames, bounded.

A call's or an import's failure reaches the candidate's author (a model reading its parent's
verdict, or a person) as the case's message, which the record and its readers cut short. So the
message leads with what went wrong — the exception's type and text, then the causes it was
raised from or during, one line each — and ends with the tail of the traceback, innermost last:
the frames of the candidate and of the libraries it called, never the worker's own (this
folder's files). Every part is bounded: the text keeps its head and its tail (a compiler's
error of `load_inline` sits in its middle or end), and at most `FRAMES` frames are kept.
"""

from __future__ import annotations

import os
import traceback

FRAMES = 8
TEXT_LIMIT = 2400
CAUSES = 2
OWN_FOLDER = os.path.dirname(os.path.abspath(__file__))


def describe(error: BaseException) -> str:
    """The message of `error` (module docstring)."""
    lines = [headline(error)]
    seen = {id(error)}
    link = _cause(error)
    while link is not None and len(lines) <= CAUSES and id(link[1]) not in seen:
        seen.add(id(link[1]))
        lines.append(f"{link[0]} {headline(link[1], TEXT_LIMIT // 4)}")
        link = _cause(link[1])
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if not os.path.abspath(frame.filename).startswith(OWN_FOLDER + os.sep)
    ]
    if frames:
        kept = frames[-FRAMES:]
        skipped = len(frames) - len(kept)
        lines.append(
            "Traceback, innermost last"
            + (f" ({skipped} outer frames left out):" if skipped else ":")
        )
        lines += [line.rstrip("\n") for line in traceback.format_list(kept)]
    return "\n".join(lines)


def headline(error: BaseException, limit: int = TEXT_LIMIT) -> str:
    """`Type: text`, the text cut in its middle to `limit` characters."""
    text = str(error).strip()
    if len(text) > limit:
        half = limit // 2
        cut = len(text) - 2 * half
        text = f"{text[:half]}\n[... {cut} characters left out ...]\n{text[-half:]}"
    name = type(error).__name__
    module = type(error).__module__
    if module not in ("builtins", "__main__", None):
        name = f"{module}.{name}"
    return f"{name}: {text}" if text else name


def _cause(error: BaseException) -> tuple[str, BaseException] | None:
    if error.__cause__ is not None:
        return "raised from", error.__cause__
    if error.__context__ is not None and not error.__suppress_context__:
        return "raised while handling", error.__context__
    return None
