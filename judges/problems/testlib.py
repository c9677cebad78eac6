"""Verdicts and output reading with the exact behaviour of a testlib checker.

FrontierCS checkers are testlib programs: they read the contestant's output token by token and
end with a verdict printed on stderr as `<kind prefix><message>` plus a newline, and an exit code.
The orchestrator stores that text as the case `msg` and regex-matches `Ratio: <number>` in it.
This module reproduces those facts (written from testlib's documented behaviour, not copied):

- tokens are separated by space, tab, CR and LF only; a leading UTF-8 BOM of the output is skipped;
- integers: optional `-`, digits, no leading zeros (`0` only alone, no `-0`), at most 20
  characters, must fit in int64, otherwise "wrong output format Expected integer, but … found"
  (with " (it contains \\0)" after a token holding a NUL); a `readInt` value outside int32 is
  "Expected int32, but … found";
- a value outside the requested range is "wrong answer Integer parameter [name=…] equals to …,
  violates the range [min, max]", a bound with 7 or more trailing zeros printed as `4*10^12`;
- a missing token is "wrong output format Unexpected end of file - int64 expected" (`int32` for
  `readInt`): testlib maps unexpected EOF to a presentation error;
- partial points print `points <p>` where p is `%.10f` without trailing zeros (keeping one digit
  after the point), followed by the checker's message; the exit code is 7.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_TOKEN_LENGTH = 32 * 1024 * 1024
MAX_MESSAGE_LENGTH = 32_000
_BLANKS = b" \t\r\n"
_TOKEN = re.compile(rb"[^ \t\r\n]+")
_NON_BLANK = re.compile(rb"[^ \t\r\n]")
_UTF8_BOM = b"\xef\xbb\xbf"
_PLAIN_INTEGER = re.compile(r"0|-?[1-9][0-9]{0,17}")


class Outcome(Enum):
    """A testlib verdict kind: its stderr prefix and its process exit code."""

    OK = ("ok ", 0)
    WRONG_ANSWER = ("wrong answer ", 1)
    PRESENTATION_ERROR = ("wrong output format ", 2)
    FAIL = ("FAIL ", 3)
    POINTS = ("points ", 7)

    @property
    def prefix(self) -> str:
        """What testlib prints before the message, e.g. `points `."""
        return self.value[0]

    @property
    def exit_code(self) -> int:
        """The checker's exit status for this verdict (7 for partial points)."""
        return self.value[1]


@dataclass(frozen=True)
class Verdict:
    """A checker's final word on one output: kind, message, and the points of a partial score."""

    outcome: Outcome
    message: str
    points: float | None = None

    def render(self) -> str:
        """The checker's stderr text exactly as testlib prints it (prefix, message, newline)."""
        message = self.message.strip()
        if len(message) > MAX_MESSAGE_LENGTH:
            warn = f"message length exceeds {MAX_MESSAGE_LENGTH}, the message is truncated: "
            message = warn + message[: MAX_MESSAGE_LENGTH - len(warn)]
        return f"{self.outcome.prefix}{message}\n"


class CheckerQuit(Exception):
    """Raised to end checking with `verdict`, like testlib's `quit`; caught by the checker."""

    def __init__(self, verdict: Verdict) -> None:
        super().__init__(verdict.render())
        self.verdict = verdict


def quit_with(outcome: Outcome, message: str) -> CheckerQuit:
    """Build the exception that ends checking with `outcome` and `message`."""
    return CheckerQuit(Verdict(outcome, message))


def points_verdict(points: float, message: str) -> Verdict:
    """testlib's `quitp(points, message)`: the message is prefixed by the formatted points."""
    return Verdict(Outcome.POINTS, f"{strip_trailing_zeroes(f'{points:.10f}')} {message}", points)


def strip_trailing_zeroes(number: str) -> str:
    """testlib's removeDoubleTrailingZeroes: drop trailing zeros after the point, keep `X.0`."""
    if "." in number:
        number = number.rstrip("0")
    return number + "0" if number.endswith(".") else number


def token_excerpt(token: str) -> str:
    """testlib's `__testlib_part`: NULs shown as `~`, tokens over 64 characters shortened."""
    text = token.replace("\0", "~")
    return text if len(text) <= 64 else text[:30] + "..." + text[-31:]


class OutputReader:
    """Reads a contestant's output like testlib's non-strict `ouf` stream.

    Every read either returns a value or raises `CheckerQuit` with the verdict testlib would give.
    Scanning is done by compiled regular expressions on bytes, so a 128 MiB output is cheap.
    """

    def __init__(self, data: bytes) -> None:
        self._data = data[len(_UTF8_BOM) :] if data.startswith(_UTF8_BOM) else data
        self._pos = 0

    def seek_eof(self) -> bool:
        """True when only blanks (space, tab, CR, LF) remain."""
        return _NON_BLANK.search(self._data, self._pos) is None

    def _token(self, expected: str) -> str:
        match = _TOKEN.search(self._data, self._pos)
        if match is None:
            raise quit_with(
                Outcome.PRESENTATION_ERROR, f"Unexpected end of file - {expected} expected"
            )
        self._pos = match.end()
        raw = match.group()
        if len(raw) > MAX_TOKEN_LENGTH:
            part = token_excerpt(raw[: MAX_TOKEN_LENGTH + 1].decode("latin-1"))
            raise quit_with(
                Outcome.PRESENTATION_ERROR,
                f"Length of token exceeds {MAX_TOKEN_LENGTH}, token is '{part}...'",
            )
        return raw.decode("latin-1")

    def read_long(self, low: int, high: int, name: str) -> int:
        """testlib `readLong(low, high, name)`: one int64 token checked against [low, high]."""
        return _in_range(_parse_int64(self._token("int64")), low, high, name)

    def read_int(self, low: int, high: int, name: str) -> int:
        """testlib `readInt(low, high, name)`: one int32 token checked against [low, high]."""
        token = self._token("int32")
        value = _parse_int64(token)
        if not INT32_MIN <= value <= INT32_MAX:
            raise quit_with(
                Outcome.PRESENTATION_ERROR, f'Expected int32, but "{token_excerpt(token)}" found'
            )
        return _in_range(value, low, high, name)


def _in_range(value: int, low: int, high: int, name: str) -> int:
    if low <= value <= high:
        return value
    raise quit_with(
        Outcome.WRONG_ANSWER,
        f"Integer parameter [name={name}] equals to {value}, violates the range "
        f"[{human_readable(low)}, {human_readable(high)}]",
    )


def human_readable(value: int) -> str:
    """testlib's toHumanReadableString for a range's bounds: a number with 7 or more trailing
    zeros as `d*10^k` (`10^k`, `-10^k` for d = 1, -1), any other as it is."""
    if value == 0:
        return "0"
    digits = str(abs(value))
    zeros = len(digits) - len(digits.rstrip("0"))
    if zeros < 7:
        return str(value)
    mantissa = value // 10**zeros
    if mantissa in (1, -1):
        return f"{'-' if mantissa < 0 else ''}10^{zeros}"
    return f"{mantissa}*10^{zeros}"


def _parse_int64(token: str) -> int:
    """testlib's stringToLongLong: a token with a NUL is refused saying so; then at most 20
    characters, an optional `-` and digits, a value within int64 (`std::stoll`), no leading
    zero (`0` only alone, no `-0`)."""
    if _PLAIN_INTEGER.fullmatch(token):  # at most 18 digits: no overflow, same value as testlib
        return int(token)
    excerpt = token_excerpt(token)
    if "\0" in token:
        raise quit_with(
            Outcome.PRESENTATION_ERROR,
            f'Expected integer, but "{excerpt}" found (it contains \\0)',
        )
    bad = quit_with(Outcome.PRESENTATION_ERROR, f'Expected integer, but "{excerpt}" found')
    minus = len(token) > 1 and token[0] == "-"
    digits = token[1:] if minus else token
    if len(token) > 20 or not digits or any(not "0" <= ch <= "9" for ch in digits):
        raise bad
    value = -int(digits) if minus else int(digits)
    zeroes = len(digits) - len(digits.lstrip("0"))
    if not INT64_MIN <= value <= INT64_MAX or (zeroes > 0 and (value != 0 or minus)) or zeroes > 1:
        raise bad
    return value
