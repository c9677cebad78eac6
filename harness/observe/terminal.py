"""Text for a terminal: what a model or a candidate wrote, shown, never obeyed.

Guidance, summaries, programs, judge messages and raw answers are written by a model or by a
candidate program; printed as they are, an escape sequence in them would retitle the terminal,
write the clipboard (OSC 52), move the cursor over earlier lines, or ask the terminal a question
whose answer lands in the shell's input. `escape_terminal` turns every such character into a
visible escape (`\\x1b`, `\\x9b`, `\\u202e`) so the text is shown and nothing in it acts:

- C0 controls (U+0000–U+001F) but the line feed and the tab (kept unless `multiline=False`),
  DEL, and C1 controls (U+0080–U+009F, which some terminals take as CSI/OSC introducers);
- Unicode bidirectional overrides and isolates (U+202A–U+202E, U+2066–U+2069), which reorder
  what is shown (a "Trojan Source" line);
- a backslash stays a backslash: the escapes are for reading, not for round-tripping.

Every command that prints such text (`inspect`, `show`, `status`, `compare`, `reevaluate`,
`browse`'s terminal lines) passes it through here, as a `rich.text.Text` (never markup).
"""

from __future__ import annotations

_BIDI = frozenset([*range(0x202A, 0x202F), *range(0x2066, 0x206A)])


def _escape(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _table(multiline: bool) -> dict[int, str]:
    codes = [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *sorted(_BIDI)]
    keep = {0x0A, 0x09} if multiline else set()
    return {code: _escape(code) for code in codes if code not in keep}


_MULTILINE = _table(True)
_ONE_LINE = _table(False)


def escape_terminal(text: object, *, multiline: bool = True) -> str:
    """`text` (made a string) with every control, escape and bidi character shown escaped;
    line feeds and tabs are kept when `multiline`, escaped too otherwise."""
    return str(text).translate(_MULTILINE if multiline else _ONE_LINE)


def bounded(text: str, limit: int) -> str:
    """`text` cut to `limit` characters with a note of how much was left out."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit:,} more characters not shown)"
