"""The summary filter: does an executor's `<summary>` carry a program? (docs/design.md §1)

The guidance model reads a parent's summary and score, never its code. The executor is asked
for a code-free summary; this filter withholds one that carries a program anyway, in whatever
disguise, and lets honest prose through, however many code words it names. It looks at the
summary's normal forms (`harness.archive.summary_text`), and at the text of every base64 or
hex blob in it, for six signs:

1. **a fenced block**: a line opening a fence (three or more backticks or tildes, any tag)
   and a later line closing it. Triple backticks inside a sentence are no fence.
2. **a `<solution>` tag**, the answer format's own.
3. **the candidate's program**: enough of the program's skeleton (punctuation and operators
   in order, names and spacing ignored) reappears in the summary's skeleton: runs of
   `SHAPE_RUN` tokens covering at least `COPIED_TOKENS` of the summary's tokens, or
   `COPIED_SHARE` of a short program's. Comments and docstrings are not in a skeleton, so
   prose reusing the program's comment sentences is not a copy.
4. **quoted lines**: `QUOTED_LINES` distinct lines of the program whose skeletons (of
   `QUOTED_LINE_TOKENS`+ tokens, `QUOTED_LINE_MARKS`+ of them operators prose does not use)
   occur whole in the summary's.
5. **program shape**, in any language: statements counted by their marks (assignments,
   comparisons, indexing, braces, calls, `def`/`return`/`#include`, pseudo-code's `←`, block
   headers ending in `:` or `do`/`then`). At least `STATEMENT_MARKS` of them, and at least
   one per `WORDS_PER_MARK` words, is a program; prose naming a few code words is not.
6. **an opaque blob**: a base64 run of `OPAQUE_BLOB_CHARS`+ characters mixing cases and digits
   that does not decode to text (a compressed program, say).

The measured precision and recall of these rules on a labelled corpus are in
tests/harness/test_summary_filter.py (`python -m tests.summary_corpus` prints them).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from harness.archive.summary_text import (
    base64_runs,
    decode_base64,
    decoded_blobs,
    skeleton,
    visible_text,
)

SHAPE_RUN = 12
COPIED_TOKENS = 60
COPIED_SHARE = 0.5
STATEMENT_MARKS = 10
WORDS_PER_MARK = 4
QUOTED_LINES = 3
QUOTED_LINE_TOKENS = 8
QUOTED_LINE_MARKS = 2
OPAQUE_BLOB_CHARS = 64
#: A base64 blob's text is examined too, down to this many nested encodings.
BLOB_DEPTH = 2

_FENCE_LINE = re.compile(r"^[ \t]*(`{3,}|~{3,})", re.MULTILINE)
_SOLUTION_TAG = re.compile(r"<\s*/?\s*solution\s*>", re.IGNORECASE)

#: Marks read on the text with every whitespace character removed, so that cut or joined
#: lines and removed spaces change nothing.
_DENSE_MARKS = re.compile(
    r"[\w\])](?:[-+*/%&|^]|<<|>>)?=(?!=)"  # assignment, augmented assignment
    r"|==|!=|<=|>=|&&|\|\||->|::"  # comparison, logic, member access, scope
    r"|\w\[[^\]]{1,40}\]"  # indexing
    r"|\{"  # a block
    r"|:=|←|<-(?=\w)"  # pseudo-code assignment
)
#: Marks read on the visible text, where spacing separates words.
_SPACED_MARKS = re.compile(
    r"(?<![\w.])[A-Za-z_]\w*(?:\.\w+)*\((?!\s*\))[^()\n]{0,60}\)"  # a call with arguments
    r"|\w\+\+|\+\+\w|\w--(?!\w)"  # increments
    r"|;[ \t]*$|;(?=\S)"  # a statement's end
    r"|^[ \t]*#[ \t]*(?:include|define)\b"  # preprocessor
    r"|\b(?:def|fn|func|function|lambda)\s+\w+\s*\("  # a definition
    r"|^[ \t]*(?:return|yield|break|continue|import|from \w+ import)\b"  # statements
    r"|^[ \t]*(?:for|while|if|elif|else|with|try|except|repeat)\b[^\n]*(?::|\bdo|\bthen)[ \t]*$"
    r"|^[ \t]*end[ \t]*(?:for|if|while|function|procedure)?[ \t]*$",  # pseudo-code block ends
    re.MULTILINE | re.IGNORECASE,
)
_CODE_ONLY = frozenset("=<>[]{}&|!%^~#*+")
_WORD = re.compile(r"[^\W\d_]{2,}")
_MIXED = (re.compile("[a-z]"), re.compile("[A-Z]"), re.compile("[0-9]"))


def _fenced(text: str) -> bool:
    opened: str | None = None
    for match in _FENCE_LINE.finditer(text):
        marker = match.group(1)
        if opened is None:
            opened = marker
        elif marker[0] == opened[0] and len(marker) >= len(opened):
            return True
    return False


@dataclass(frozen=True)
class _ProgramShape:
    """What the filter compares a summary with, computed once per program."""

    tokens: int
    runs: frozenset[str]
    lines: tuple[tuple[str, str], ...]  # (skeleton, the line as written) of quotable lines


@functools.lru_cache(maxsize=32)
def _shape(program: str) -> _ProgramShape:
    source = skeleton(program)
    runs = frozenset(source[i : i + SHAPE_RUN] for i in range(len(source) - SHAPE_RUN + 1))
    lines = []
    for line in program.splitlines():
        tokens = skeleton(line)
        marks = sum(1 for token in tokens if token in _CODE_ONLY)
        if len(tokens) >= QUOTED_LINE_TOKENS and marks >= QUOTED_LINE_MARKS:
            lines.append((tokens, " ".join(line.split())))
    return _ProgramShape(len(source), runs, tuple(lines))


def copied_tokens(summary: str, program: str) -> int:
    """How many of the summary's skeleton tokens lie in a run of `SHAPE_RUN` tokens that also
    occurs in the program's skeleton."""
    shown, runs = skeleton(summary, comments=True), _shape(program).runs
    covered = end = 0
    for start in range(len(shown) - SHAPE_RUN + 1):
        if shown[start : start + SHAPE_RUN] in runs:
            covered += start + SHAPE_RUN - max(start, end)
            end = start + SHAPE_RUN
    return covered


def quoted_lines(summary: str, program: str) -> int:
    """How many distinct lines of the program the summary quotes: lines whose skeleton has
    `QUOTED_LINE_TOKENS`+ tokens, `QUOTED_LINE_MARKS`+ of them operators no prose uses, and
    occurs whole in the summary's skeleton."""
    shown = skeleton(summary, comments=True)
    return len({line for tokens, line in _shape(program).lines if tokens in shown})


def _copy_limit(program: str) -> int:
    tokens = _shape(program).tokens
    return min(COPIED_TOKENS, max(SHAPE_RUN, round(COPIED_SHARE * tokens)))


def statement_marks(text: str) -> int:
    """How many marks of a program statement `text` holds (see the module docstring)."""
    dense = "".join(text.split())
    return len(_DENSE_MARKS.findall(dense)) + len(_SPACED_MARKS.findall(text))


def _program_shaped(text: str) -> bool:
    marks = statement_marks(text)
    words = len(_WORD.findall(text))
    return marks >= STATEMENT_MARKS and marks * WORDS_PER_MARK >= words


def _opaque_blob(text: str) -> bool:
    return any(
        len(run) >= OPAQUE_BLOB_CHARS
        and all(kind.search(run) for kind in _MIXED)
        and decode_base64(run) is None
        for run in base64_runs(text)
    )


def _problem(text: str, program: str | None, depth: int) -> str | None:
    visible = visible_text(text)
    if _fenced(visible):
        return "it holds a fenced block"
    if _SOLUTION_TAG.search(visible):
        return "it holds a <solution> tag"
    if program:
        copied = copied_tokens(visible, program)
        if copied >= _copy_limit(program):
            return f"it repeats the candidate's program ({copied} tokens of its shape)"
        quoted = quoted_lines(visible, program)
        if quoted >= QUOTED_LINES:
            return f"it quotes {quoted} lines of the candidate's program"
    if _program_shaped(visible):
        return f"it is written as a program ({statement_marks(visible)} statement marks)"
    blobs = decoded_blobs(visible)
    for blob in blobs if depth < BLOB_DEPTH else ():
        found = _problem(blob, program, depth + 1)
        if found is not None:
            return f"a base64 blob in it decodes to a program: {found}"
    if _opaque_blob(visible):
        return "it holds an encoded blob"
    return None


def summary_code_problem(summary: str | None, program: str | None) -> str | None:
    """Why `summary` may not reach the guidance model, or None when it may. `program` is the
    candidate's own source (None when the rollout produced none)."""
    if not summary:
        return None
    return _problem(summary, program, 0)
