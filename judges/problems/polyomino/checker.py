"""The Polyomino Packing checker (FrontierCS algorithmic problem 0), written from the rules.

Given the instance and the contestant's output `W H` then n lines `X Y R F`, the checker:
reads W, H in [1, 4e12]; reads every placement with X, Y in [-4e12, 4e12], R in 0..3, F in 0..1;
refuses extra tokens; transforms every cell of every piece in input order — reflect x -> -x when
F = 1, then rotate R times with one clockwise step (x, y) -> (y, -x), then translate by (X, Y) —
and refuses a cell outside [0, W) x [0, H) or a cell already taken; refuses W*H above int64.
A valid packing scores ratio = total cells / (W*H) as testlib partial points.

Verdicts and messages are those of the FrontierCS checker (facts: verdict kinds, message texts,
check order), so the case `msg` this judge stores can be read exactly like FrontierCS's.
"""

from __future__ import annotations

from dataclasses import dataclass

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

    @property
    def total_cells(self) -> int:
        """Number of cells over all pieces (the numerator of the ratio)."""
        return sum(len(piece) for piece in self.pieces)


def parse_instance(text: str) -> Instance:
    """Parse and validate a problem input; raise ValueError naming the first offending value.

    Accepts 100 <= n <= 10^4 pieces of 1..10 cells with coordinates within int64/4, and no
    trailing tokens. (The checker trusts inputs; validation happens once, when a suite loads.)
    """
    tokens = text.split()
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
    try:
        return _check(instance, OutputReader(output))
    except CheckerQuit as stop:
        return stop.verdict


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

    area = width * height
    if area > INT64_MAX:
        raise quit_with(Outcome.WRONG_ANSWER, "Area overflow: W*H exceeds 64-bit")
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
