"""The Polyomino Packing checker (FrontierCS algorithmic problem 0), written from the rules.

Given the instance and the contestant's output `W H` then n lines `X Y R F`, the checker:
reads W, H in [1, 4e12]; reads every placement with X, Y in [-4e12, 4e12], R in 0..3, F in 0..1;
refuses extra tokens; transforms every cell of every piece in input order — reflect x -> -x when
F = 1, then rotate R times with one clockwise step (x, y) -> (y, -x), then translate by (X, Y) —
and refuses a cell outside [0, W) x [0, H) or a cell already taken; refuses W*H above int64.
A valid packing scores ratio = total cells / (W*H) as testlib partial points.

Verdicts and messages are those of the FrontierCS checker (facts: verdict kinds, message texts,
check order), so the case `msg` this judge stores can be read exactly like FrontierCS's.

`check` first tries a fast path that can only say "valid": every token a plain integer (the form
testlib reads without question), the right count, every value in range, every cell inside the
rectangle and no cell taken twice, all of a case's cells at once as NumPy arrays. Anything else,
and every verdict but a valid packing, comes from the token-by-token reading below, so messages
and check order are unchanged; a valid packing's message is built by the same code either way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from judges.problems.polyomino.shapes import MAX_PIECE_SIZE
from judges.problems.testlib import (
    INT64_MAX,
    INT64_MIN,
    CheckerQuit,
    Outcome,
    OutputReader,
    Verdict,
    points_verdict,
    quit_with,
)

LIMIT = 4_000_000_000_000  # bound of W, H and |X|, |Y| (4e12)
MIN_PIECES, MAX_PIECES = 100, 10_000
_COORDINATE_BOUND = INT64_MAX // 4  # input coordinates are read in [LLONG_MIN/4, LLONG_MAX/4]


@dataclass(frozen=True)
class Instance:
    """A parsed problem input: the pieces' cells in input order."""

    pieces: tuple[tuple[tuple[int, int], ...], ...]

    @cached_property
    def total_cells(self) -> int:
        """Number of cells over all pieces (the numerator of the ratio)."""
        return sum(len(piece) for piece in self.pieces)

    @cached_property
    def flat(self) -> Cells:
        """Every cell of every piece as arrays, in input order, built once per instance (for
        the fast path; the judge keeps a suite's instances parsed)."""
        owner = np.repeat(np.arange(len(self.pieces)), [len(piece) for piece in self.pieces])
        xy = np.array([cell for piece in self.pieces for cell in piece], dtype=np.int64)
        xy = xy.reshape(-1, 2)
        return Cells(owner, xy[:, 0].copy(), xy[:, 1].copy())


@dataclass(frozen=True)
class Cells:
    """An instance's cells as arrays: the piece each belongs to, its x and its y."""

    owner: np.ndarray
    x: np.ndarray
    y: np.ndarray


# a clockwise turn's cosine and sine for R = 0..3: (x, y) -> (cos x + sin y, cos y - sin x)
_COS = np.array([1, 0, -1, 0], dtype=np.int64)
_SIN = np.array([0, 1, 0, -1], dtype=np.int64)


def transform(
    x: np.ndarray, y: np.ndarray, rotations: np.ndarray, flip: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Cells (x, y) reflected (x -> -x) where `flip`, then turned `rotations` times clockwise:
    `_rotate` for arrays, every cell with its own R and F."""
    reflected = x * (1 - 2 * flip)
    cos, sin = _COS[rotations], _SIN[rotations]
    return cos * reflected + sin * y, cos * y - sin * reflected


def parse_instance(text: str) -> Instance:
    """Parse and validate a problem input; raise ValueError naming the first offending value.

    Accepts 100 <= n <= 10^4 pieces of 1..10 cells with coordinates within int64/4, and no
    trailing tokens. (The checker trusts inputs; validation happens once, when a suite loads.)
    A valid input is read at once (`_pieces_at_once`, a judge's start parses its whole suite);
    anything that path does not accept is read token by token, which names the first problem.
    """
    tokens = text.split()
    try:
        pieces = _pieces_at_once(list(map(int, tokens)))
    except ValueError:
        pieces = None
    if pieces is not None:
        return Instance(pieces)
    return _read_token_by_token(tokens)


def _pieces_at_once(values: list[int]) -> tuple[tuple[tuple[int, int], ...], ...] | None:
    """The pieces of an input whose tokens are `values`, or None unless every rule
    `_read_token_by_token` checks holds (it then finds the same pieces)."""
    if not values or not MIN_PIECES <= values[0] <= MAX_PIECES:
        return None
    if min(values) < -_COORDINATE_BOUND - 1 or max(values) > _COORDINATE_BOUND:
        return None
    pieces = []
    position, end = 1, len(values)
    for _ in range(values[0]):
        k = values[position] if position < end else 0
        stop = position + 1 + 2 * k
        if not 1 <= k <= MAX_PIECE_SIZE or stop > end:
            return None
        cells = values[position + 1 : stop]
        pieces.append(tuple(zip(cells[0::2], cells[1::2], strict=True)))
        position = stop
    return tuple(pieces) if position == end else None


def _read_token_by_token(tokens: list[str]) -> Instance:
    """`parse_instance`, one token at a time: ValueError naming the first offending token."""
    position = 0

    def take(low: int, high: int, what: str) -> int:
        nonlocal position
        if position >= len(tokens):
            raise ValueError(f"input ends early: expected {what} at token {position + 1}")
        try:
            value = int(tokens[position])
        except ValueError:
            raise ValueError(
                f"input token {position + 1} ({tokens[position]!r}) for {what} is not an integer"
            ) from None
        if not low <= value <= high:
            raise ValueError(f"input {what} = {value} is outside [{low}, {high}]")
        position += 1
        return value

    n = take(MIN_PIECES, MAX_PIECES, "n")
    pieces = []
    for i in range(1, n + 1):
        k = take(1, MAX_PIECE_SIZE, f"k of piece {i}")
        cells = []
        for _ in range(k):
            x = take(-_COORDINATE_BOUND - 1, _COORDINATE_BOUND, f"x of piece {i}")
            y = take(-_COORDINATE_BOUND - 1, _COORDINATE_BOUND, f"y of piece {i}")
            cells.append((x, y))
        pieces.append(tuple(cells))
    if position != len(tokens):
        raise ValueError(f"input has {len(tokens) - position} extra tokens after piece {n}")
    return Instance(tuple(pieces))


def check(instance: Instance, output: bytes) -> Verdict:
    """Judge one output for `instance`; return the checker's verdict (never raises).

    A valid packing gives a POINTS verdict whose message is
    `Ratio: <r %.9f> (cells=<c>, W=<W>, H=<H>, area=<W*H>)`; anything else a WRONG_ANSWER or
    PRESENTATION_ERROR verdict naming the first problem found, in the FrontierCS checker's order.
    """
    placed = _valid_at_a_glance(instance, output)
    if placed is not None:
        return _points(instance, *placed)
    try:
        return _check(instance, OutputReader(output))
    except CheckerQuit as stop:
        return stop.verdict


_UTF8_BOM = b"\xef\xbb\xbf"
# A plain integer, the form testlib reads as written (testlib.py): 0|-?[1-9][0-9]{0,17}, checked
# for a whole output at once (`_plain_integers`).
_DIGITS_AND_MINUS = b"0123456789-"
_LEADING_ZERO = re.compile(rb" 0[0-9]")
_MOST_DIGITS = 18


def _plain_integers(tokens: list[bytes], joined: bytes) -> bool:
    """Is every token (`joined` is them with one space between) a plain integer? Only digits
    and minus signs; a minus only first and followed by 1-9; no leading zero; at most 18
    characters (a longer token is out of every range here, and the slow reading decides)."""
    return (
        len(joined.translate(None, _DIGITS_AND_MINUS)) == len(tokens) - 1
        and joined.count(b"-") == joined.count(b" -") + joined.startswith(b"-")
        and b"-0" not in joined
        and b"- " not in joined
        and not joined.endswith(b"-")
        and _LEADING_ZERO.search(b" " + joined) is None
        and _longest(joined) <= _MOST_DIGITS
    )


def _longest(joined: bytes) -> int:
    """The length of the longest of the space-separated tokens in `joined`."""
    spaces = np.flatnonzero(np.frombuffer(joined, dtype=np.uint8) == 0x20)
    return int(np.diff(np.concatenate(([-1], spaces, [len(joined)]))).max()) - 1


def _valid_at_a_glance(instance: Instance, output: bytes) -> tuple[int, int] | None:
    """(W, H) when `output` is a valid packing read the plain way (module docstring); None
    when it is not, or might not be: the token-by-token reading then decides. Every cell at
    once, as arrays: the plain tokens have at most 18 characters and the input's coordinates are
    within int64 / 4, so every value and sum fits int64; a cell key x * H + y is formed only
    once every cell is inside the rectangle, where it is below W * H <= int64's maximum."""
    data = output[len(_UTF8_BOM) :] if output.startswith(_UTF8_BOM) else output
    if b"\x0b" in data or b"\x0c" in data:  # blanks to bytes.split, token characters to testlib
        return None
    tokens = data.split()
    if len(tokens) != 2 + 4 * len(instance.pieces):
        return None
    joined = b" ".join(tokens)
    if not _plain_integers(tokens, joined):
        return None
    values = np.fromstring(joined, dtype=np.int64, sep=" ")  # text mode: plain integers only
    if values.size != len(tokens):
        return None
    width, height = int(values[0]), int(values[1])
    if not (1 <= width <= LIMIT and 1 <= height <= LIMIT) or width * height > INT64_MAX:
        return None
    dx, dy, rotations, flip = values[2:].reshape(-1, 4).T
    if ((dx < -LIMIT) | (dx > LIMIT) | (dy < -LIMIT) | (dy > LIMIT)).any():
        return None
    if ((rotations < 0) | (rotations > 3) | (flip < 0) | (flip > 1)).any():
        return None
    cells = instance.flat
    x, y = transform(cells.x, cells.y, rotations[cells.owner], flip[cells.owner])
    x += dx[cells.owner]
    y += dy[cells.owner]
    if ((x < 0) | (x >= width) | (y < 0) | (y >= height)).any():
        return None
    keys = x * height + y
    keys.sort()
    if keys.size > 1 and (keys[1:] == keys[:-1]).any():
        return None  # an overlap: the slow reading names the first one
    return width, height


def _check(instance: Instance, reader: OutputReader) -> Verdict:
    n = len(instance.pieces)
    width = reader.read_long(1, LIMIT, "W")
    height = reader.read_long(1, LIMIT, "H")
    placements = []
    for _ in range(n):
        x = reader.read_long(-LIMIT, LIMIT, "X_i")
        y = reader.read_long(-LIMIT, LIMIT, "Y_i")
        rotations = reader.read_int(0, 3, "R_i")
        flip = reader.read_int(0, 1, "F_i")
        placements.append((x, y, rotations, flip))
    if not reader.seek_eof():
        raise quit_with(
            Outcome.PRESENTATION_ERROR, f"Extra data after expected {n} placement lines"
        )

    occupied: set[tuple[int, int]] = set()
    for index, (piece, (dx, dy, rotations, flip)) in enumerate(
        zip(instance.pieces, placements, strict=True), start=1
    ):
        for cx, cy in piece:
            qx, qy = _rotate(-cx if flip else cx, cy, rotations)
            gx, gy = qx + dx, qy + dy
            if not (INT64_MIN <= gx <= INT64_MAX and INT64_MIN <= gy <= INT64_MAX):
                raise quit_with(Outcome.WRONG_ANSWER, f"Overflow after transforming piece {index}")
            if not (0 <= gx < width and 0 <= gy < height):
                raise quit_with(
                    Outcome.WRONG_ANSWER,
                    f"Out of bounds: piece {index} cell -> ({gx},{gy}) not in "
                    f"[0,{width})\u00d7[0,{height})",
                )
            if (gx, gy) in occupied:
                raise quit_with(Outcome.WRONG_ANSWER, f"Overlap at cell ({gx},{gy})")
            occupied.add((gx, gy))

    if width * height > INT64_MAX:
        raise quit_with(Outcome.WRONG_ANSWER, "Area overflow: W*H exceeds 64-bit")
    return _points(instance, width, height)


def _points(instance: Instance, width: int, height: int) -> Verdict:
    """A valid packing's verdict: the ratio as testlib partial points, and its message."""
    area = width * height
    cells = instance.total_cells
    ratio = float(cells) / float(area)  # double division, as the C checker does
    return points_verdict(
        ratio, f"Ratio: {ratio:.9f} (cells={cells}, W={width}, H={height}, area={area})"
    )


def _rotate(x: int, y: int, rotations: int) -> tuple[int, int]:
    """R clockwise quarter turns, one step being (x, y) -> (y, -x)."""
    match rotations:
        case 0:
            return x, y
        case 1:
            return y, -x
        case 2:
            return -x, -y
        case _:
            return -y, x
