"""What a summary says once its disguises are taken off: the normal forms the summary filter
compares (`harness.archive.summary_filter`, docs/design.md §1).

Three forms, each undoing a family of disguises:

- `visible_text`: the text as a reader sees it. Unicode compatibility forms folded (NFKC:
  full-width letters and punctuation), look-alikes of ASCII operators and quotes (`−`, `∗`,
  `‹`, curly quotes) made ASCII, format characters (zero-width spaces and joiners, bidi
  controls, soft hyphens, byte-order marks) and combining marks dropped, HTML entities decoded,
  line ends unified, quote (`> `) and line-number (`12: `) prefixes taken off every line.
- `skeleton`: the program shape of a text, blind to whitespace and names. Comments are dropped,
  string and character literals become one token, and every run of words and numbers becomes
  one `w` token, so renaming identifiers, removing spaces, joining lines, cutting lines short
  or in two (even inside a name) leave it unchanged; what remains is the punctuation and
  operators, one token per character.
- `decoded_blobs`: the text carried by base64 runs (standard or URL-safe, on one line or wrapped
  over several) and by runs of hexadecimal digits, when it decodes to readable UTF-8.
"""

from __future__ import annotations

import base64
import binascii
import functools
import html
import re
import unicodedata

#: Characters that render as nothing although Unicode files them as letters or separators.
_INVISIBLE = frozenset("\u115f\u1160\u3164\uffa0\u180e\u2800")
#: Line separators as `\n`, and look-alikes of ASCII operators and quotes that NFKC leaves as
#: they are as their ASCII selves.
_FOLDS = str.maketrans(
    {
        **dict.fromkeys("\u2028\u2029\x85\r", "\n"),
        **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2212\u2796\ufe63", "-"),
        **dict.fromkeys("\u2217\u2731\u00d7\u22c5", "*"),
        **dict.fromkeys("\u2039\u02c2\u276e\u3008", "<"),
        **dict.fromkeys("\u203a\u02c3\u276f\u3009", ">"),
        **dict.fromkeys("\u2018\u2019\u201a\u2032", "'"),
        **dict.fromkeys("\u201c\u201d\u201e\u2033", '"'),
        "\u2044": "/",
        "\u2215": "/",
        "\u2795": "+",
        "\u2261": "=",
    }
)
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_LINE_PREFIX = re.compile(r"(?m)^[ \t]*(?:>[ \t]?)*(?:\d{1,5}[:|][ \t])?")

#: Comments and literals, in one pass so that a `//` inside a string is no comment. A `#`
#: starts a comment unless it is a C preprocessor line; character literals are at most two
#: characters, so an apostrophe in prose ("the piece's box") is no literal.
_LITERAL_OR_COMMENT = re.compile(
    r'(?P<string>"""[\s\S]{0,4000}?"""|\'\'\'[\s\S]{0,4000}?\'\'\'|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n]){1,2}\')'
    r"|(?P<comment>/\*[\s\S]*?\*/|//[^\n]*"
    r"|#(?![ \t]*(?:include|define|pragma|ifn?def|if|endif|else|elif|undef)\b)[^\n]*)"
)
_WORDS = re.compile(r"\w+")
#: The skeleton's tokens for a run of words (a name cut in two, or two names whose spaces were
#: removed, are one run) and for a literal; neither is a character a skeleton keeps otherwise.
WORD, LITERAL = "w", "\x01"
_WORD_RUN = re.compile(f"{WORD}+")

#: A base64 run: 24+ characters of one alphabet, `=` padding allowed at its end.
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/\-_]{24,}={0,2}")
_WRAPPED_LINE_BREAK = re.compile(r"(?<=[A-Za-z0-9+/\-_=])[ \t]*\n[ \t]*(?=[A-Za-z0-9+/\-_])")
#: A hex run: 32+ hexadecimal digits (16+ bytes).
_HEX_RUN = re.compile(r"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{2}){16,}(?![0-9A-Fa-f])")
#: Decoded bytes are text when they are UTF-8 and this share of them is printable.
_PRINTABLE_SHARE = 0.9
_MIN_DECODED_CHARS = 16


@functools.lru_cache(maxsize=4096)
def _visible_char(char: str) -> str:
    category = unicodedata.category(char)
    if category in ("Cf", "Mn", "Me") or char in _INVISIBLE:
        return ""
    return " " if category == "Zs" else char


def visible_text(text: str) -> str:
    """`text` as a reader sees it (see the module docstring)."""
    folded = html.unescape(text) if "&" in text else text
    if not folded.isascii():
        folded = unicodedata.normalize("NFKC", folded).translate(_FOLDS)
        folded = _NON_ASCII.sub(lambda match: _visible_char(match.group(0)), folded)
    elif "\r" in folded:
        folded = folded.replace("\r", "\n")
    return _LINE_PREFIX.sub("", folded)


def skeleton(text: str, *, comments: bool = False) -> str:
    """The program shape of `text` (see the module docstring), one character per token: `w`
    for a run of words and numbers, `LITERAL` for a string or character literal, and every
    other visible character as itself. Comments are dropped unless `comments` is set: a
    program's are no part of its shape, but a text to compare with a program keeps them, since
    prose around a copy may start like one (a `//` eats the rest of its line, which may be a
    whole program joined into one line)."""

    def literal_or_blank(match: re.Match[str]) -> str:
        if match.group("string") is not None:
            return f" {LITERAL} "
        return match.group(0) if comments else " "

    words = _WORDS.sub(WORD, _LITERAL_OR_COMMENT.sub(literal_or_blank, text))
    return _WORD_RUN.sub(WORD, "".join(words.split()))


def _readable(data: bytes) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if len(text) < _MIN_DECODED_CHARS:
        return None
    printable = sum(1 for char in text if char.isprintable() or char in "\n\t")
    return text if printable >= _PRINTABLE_SHARE * len(text) else None


def decode_base64(run: str) -> str | None:
    """The readable text a base64 run carries, or None."""
    body = run.rstrip("=")
    body = body[: len(body) - len(body) % 4] if len(body) % 4 == 1 else body
    padded = body + "=" * (-len(body) % 4)
    decoders = (base64.urlsafe_b64decode,) if re.search(r"[-_]", body) else (base64.b64decode,)
    for decode in decoders:
        try:
            return _readable(decode(padded))
        except (binascii.Error, ValueError):
            return None
    return None


def base64_runs(text: str) -> list[str]:
    """Every base64-alphabet run of 24+ characters in `text`, on one line or wrapped (line
    breaks inside a run of such lines joined)."""
    runs = _BASE64_RUN.findall(text)
    joined = _WRAPPED_LINE_BREAK.sub("", text)
    runs.extend(run for run in _BASE64_RUN.findall(joined) if run not in runs)
    return runs


def decoded_blobs(text: str) -> list[str]:
    """The readable texts carried by base64 runs of `text` (`base64_runs`) and by its runs of
    hexadecimal digits."""
    decoded = [decode_base64(run) for run in base64_runs(text)]
    joined = _WRAPPED_LINE_BREAK.sub("", text)
    decoded.extend(_readable(bytes.fromhex(run)) for run in _HEX_RUN.findall(joined))
    return [blob for blob in decoded if blob is not None]
