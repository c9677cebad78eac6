"""The Polyomino pieces, the seeded generator and the checker, as plain functions.

The checker table holds hand-made outputs and the exact verdict text the FrontierCS testlib
checker prints for each (prefix, message, newline): the case `msg` a client reads.
"""

from __future__ import annotations

import hashlib
import math
import re
import statistics
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

import judges.problems.polyomino.checker as checker_module
from judges.problems.polyomino.checker import Instance, check, parse_instance
from judges.problems.polyomino.generator import generate_instance, piece_count, write_suite
from judges.problems.polyomino.shapes import (
    all_free_polyominoes,
    canonical,
    free_polyominoes,
    is_connected,
    normalize,
    orientations,
    transform,
)
from judges.problems.testlib import (
    INT64_MAX,
    INT64_MIN,
    CheckerQuit,
    Outcome,
    OutputReader,
    strip_trailing_zeroes,
    token_excerpt,
)

GENERATED_1_1 = "1b6838b1d04770c17b1f3c1b0193ad84ec1e7f99f55d111b6b7357075e926d2f"
PUBLISHED_COUNTS = [1, 1, 2, 5, 12, 35, 108, 369, 1285, 4655]  # OEIS A000105, sizes 1..10


def test_free_polyomino_counts_match_the_published_sequence() -> None:
    assert [len(free_polyominoes(size)) for size in range(1, 11)] == PUBLISHED_COUNTS
    assert len(all_free_polyominoes()) == sum(PUBLISHED_COUNTS) == 6473


def test_every_enumerated_piece_is_connected_canonical_and_distinct() -> None:
    pieces = all_free_polyominoes()
    assert len(set(pieces)) == len(pieces)
    for piece in pieces:
        assert is_connected(piece)
        assert canonical(piece) == piece


def test_transform_reflects_before_rotating_clockwise() -> None:
    l_piece = ((0, 0), (1, 0), (2, 0), (0, 1))
    assert transform(l_piece, 1, False) == ((0, 0), (0, -1), (0, -2), (1, 0))
    assert transform(l_piece, 0, True) == ((0, 0), (-1, 0), (-2, 0), (0, 1))
    assert transform(l_piece, 1, True) == ((0, 0), (0, 1), (0, 2), (1, 0))
    assert transform(l_piece, 4, False) == l_piece


def test_orientations_are_the_transforms_in_their_fixed_order() -> None:
    """The generator draws an orientation by its index, so the written-out orientations must be
    `transform`'s, rotations 0..3 unreflected then reflected, first occurrence kept."""
    for piece in all_free_polyominoes(8):
        expected = {
            normalize(transform(piece, rotations, reflect)): None
            for reflect in (False, True)
            for rotations in range(4)
        }
        assert orientations(piece) == tuple(expected), piece


def test_a_generated_instance_is_the_same_bytes_as_before_the_faster_enumeration() -> None:
    """sha256 of seed 1's first case as written before the enumeration was made faster: the
    same pieces, drawn in the same order, in the same orientation."""
    digest = hashlib.sha256(generate_instance(1, 1).encode()).hexdigest()
    assert digest == GENERATED_1_1


def test_generated_instances_are_deterministic_per_seed_and_case() -> None:
    assert generate_instance(7, 1) == generate_instance(7, 1)
    assert generate_instance(7, 1) != generate_instance(7, 2)
    assert generate_instance(7, 1) != generate_instance(8, 1)


def test_generated_instances_follow_the_generation_rule() -> None:
    free_set = set(all_free_polyominoes())
    sizes: Counter[int] = Counter()
    for case in range(1, 6):
        instance = parse_instance(generate_instance(3, case))  # also checks the input format
        assert 100 <= len(instance.pieces) <= 10_000
        for piece in instance.pieces:
            assert normalize(piece) == tuple(sorted(piece)), "pieces start at x = y = 0"
            assert canonical(piece) in free_set
            sizes[len(piece)] += 1
    # Uniform over the 6473 pieces (not over sizes): 4655/6473 = 71.9 % have 10 cells.
    share_of_tens = sizes[10] / sum(sizes.values())
    assert abs(share_of_tens - 4655 / 6473) < 0.03, share_of_tens


def test_piece_count_is_ten_to_a_uniform_power_between_two_and_four() -> None:
    import random

    rng = random.Random(5)
    exponents = [math.log10(piece_count(rng)) for _ in range(2000)]
    assert min(exponents) >= 2.0 and max(exponents) <= 4.0
    assert abs(statistics.mean(exponents) - 3.0) < 0.05
    assert abs(statistics.pstdev(exponents) - 2 / math.sqrt(12)) < 0.03  # sd of U(2, 4)


def test_written_suite_is_a_frontiercs_package_and_is_reused(tmp_path) -> None:
    problem = write_suite(tmp_path / "0", seed=2, cases=2)
    config = (problem / "config.yaml").read_text()
    assert "time: 2s" in config and "memory: 256m" in config and "n_cases: 2" in config
    first = (problem / "testdata" / "1.in").read_text()
    assert first == generate_instance(2, 1)
    stamp = (problem / "testdata" / "1.in").stat().st_mtime_ns
    write_suite(tmp_path / "0", seed=2, cases=2)
    assert (problem / "testdata" / "1.in").stat().st_mtime_ns == stamp


# --- the checker table ---------------------------------------------------------------------

L_PIECE = ((0, 0), (1, 0), (2, 0), (0, 1))  # chiral: tells reflection and rotation apart
MONOMINOES = 99


@pytest.fixture(scope="module")
def instance() -> Instance:
    text = f"{1 + MONOMINOES}\n4\n0 0\n1 0\n2 0\n0 1\n" + "1\n0 0\n" * MONOMINOES
    return parse_instance(text)


def packing(width: int, height: int, first: str, first_cells: set[tuple[int, int]]) -> str:
    """Output text: the L piece placed by `first` (covering `first_cells`), then the monominoes
    row by row in the free cells of the W x H box."""
    free = [(x, y) for y in range(height) for x in range(width) if (x, y) not in first_cells]
    lines = [f"{width} {height}", first] + [f"{x} {y} 0 0" for x, y in free[:MONOMINOES]]
    return "\n".join(lines) + "\n"


VALID = packing(52, 2, "0 0 0 0", {(0, 0), (1, 0), (2, 0), (0, 1)})
VALID_MSG = "points 0.9903846154 Ratio: 0.990384615 (cells=103, W=52, H=2, area=104)\n"
VALID_LINES = VALID.splitlines()


def replace_line(index: int, text: str) -> str:
    lines = list(VALID_LINES)
    lines[index] = text
    return "\n".join(lines) + "\n"


WA = "wrong answer "
PE = "wrong output format "
CHECKER_TABLE = [
    ("valid", VALID, VALID_MSG),
    (
        "valid_crlf_tabs_and_bom",
        "\ufeff" + VALID.replace("\n", "\r\n").replace(" ", "\t"),
        VALID_MSG,
    ),
    ("overlap", replace_line(3, "3 0 0 0"), WA + "Overlap at cell (3,0)\n"),
    (
        "out_of_bounds",
        replace_line(2, "52 0 0 0"),
        WA + "Out of bounds: piece 2 cell -> (52,0) not in [0,52)\u00d7[0,2)\n",
    ),
    (
        "out_of_bounds_negative",
        replace_line(2, "0 -1 0 0"),
        WA + "Out of bounds: piece 2 cell -> (0,-1) not in [0,52)\u00d7[0,2)\n",
    ),
    (
        "too_few_lines",
        "\n".join(VALID_LINES[:-1]) + "\n",
        PE + "Unexpected end of file - int64 expected\n",
    ),
    (
        "line_missing_r_and_f",
        replace_line(100, "50 1"),
        PE + "Unexpected end of file - int32 expected\n",
    ),
    ("extra_line", VALID + "0 0 0 0\n", PE + "Extra data after expected 100 placement lines\n"),
    ("extra_token", VALID + "7", PE + "Extra data after expected 100 placement lines\n"),
    ("empty_output", "", PE + "Unexpected end of file - int64 expected\n"),
    (
        "r_too_large",
        replace_line(1, "0 0 4 0"),
        WA + "Integer parameter [name=R_i] equals to 4, violates the range [0, 3]\n",
    ),
    (
        "r_negative",
        replace_line(1, "0 0 -1 0"),
        WA + "Integer parameter [name=R_i] equals to -1, violates the range [0, 3]\n",
    ),
    (
        "f_out_of_range",
        replace_line(1, "0 0 0 2"),
        WA + "Integer parameter [name=F_i] equals to 2, violates the range [0, 1]\n",
    ),
    (
        "w_zero",
        replace_line(0, "0 2"),
        WA + "Integer parameter [name=W] equals to 0, violates the range [1, 4*10^12]\n",
    ),
    (
        "h_negative",
        replace_line(0, "52 -2"),
        WA + "Integer parameter [name=H] equals to -2, violates the range [1, 4*10^12]\n",
    ),
    (
        "w_above_4e12",
        replace_line(0, "4000000000001 2"),
        WA + "Integer parameter [name=W] equals to 4000000000001, violates the range "
        "[1, 4*10^12]\n",
    ),
    (
        "x_above_4e12",
        replace_line(1, "4000000000001 0 0 0"),
        WA + "Integer parameter [name=X_i] equals to 4000000000001, violates the range "
        "[-4*10^12, 4*10^12]\n",
    ),
    (
        "area_above_int64",
        replace_line(0, "4000000000000 4000000000000"),
        WA + "Area overflow: W*H exceeds 64-bit\n",
    ),
    ("leading_zero", replace_line(0, "052 2"), PE + 'Expected integer, but "052" found\n'),
    ("minus_zero", replace_line(1, "-0 0 0 0"), PE + 'Expected integer, but "-0" found\n'),
    ("plus_sign", replace_line(0, "+52 2"), PE + 'Expected integer, but "+52" found\n'),
    ("decimal_point", replace_line(0, "52.0 2"), PE + 'Expected integer, but "52.0" found\n'),
    (
        "int64_wraps_negative",
        replace_line(0, "9223372036854775808 2"),
        PE + 'Expected integer, but "9223372036854775808" found\n',
    ),
    (
        "int64_wraps_positive",
        replace_line(0, "18446744073709551617 2"),
        PE + 'Expected integer, but "18446744073709551617" found\n',
    ),
    (
        "r_beyond_int32",
        replace_line(1, "0 0 4294967296 0"),
        PE + 'Expected int32, but "4294967296" found\n',
    ),
    (
        "nul_in_token",
        replace_line(0, "52\0 2"),
        PE + 'Expected integer, but "52~" found (it contains \\0)\n',
    ),
    (
        "y_below_minus_4e12",
        replace_line(1, "0 -4000000000001 0 0"),
        WA + "Integer parameter [name=Y_i] equals to -4000000000001, violates the range "
        "[-4*10^12, 4*10^12]\n",
    ),
    (
        "long_garbage_token",
        replace_line(0, "52" + "a" * 98 + " 2"),
        PE + 'Expected integer, but "52' + "a" * 28 + "..." + "a" * 31 + '" found\n',
    ),
]


@pytest.mark.parametrize(
    ("name", "output", "expected"), CHECKER_TABLE, ids=[row[0] for row in CHECKER_TABLE]
)
def test_checker_verdict_matches_the_frontiercs_text(
    instance: Instance, name: str, output: str, expected: str
) -> None:
    verdict = check(instance, output.encode())
    assert verdict.render() == expected
    assert (verdict.outcome is Outcome.POINTS) == name.startswith("valid")


def test_reflection_happens_before_a_clockwise_rotation(instance: Instance) -> None:
    # F=1, R=1 turns the L into cells (0,0), (0,1), (0,2), (1,0): it fits a 35 x 3 box at (0, 0).
    right = packing(35, 3, "0 0 1 1", {(0, 0), (0, 1), (0, 2), (1, 0)})
    verdict = check(instance, right.encode())
    assert verdict.render() == (
        "points 0.980952381 Ratio: 0.980952381 (cells=103, W=35, H=3, area=105)\n"
    )
    # The same cells computed with the other conventions (rotate then reflect, or a
    # counter-clockwise step) need the translation (1, 2); the checker's rules reject that.
    wrong = packing(35, 3, "1 2 1 1", {(1, 2), (1, 1), (1, 0), (0, 2)})
    assert check(instance, wrong.encode()).render() == (
        WA + "Out of bounds: piece 1 cell -> (1,3) not in [0,35)\u00d7[0,3)\n"
    )


def test_perfect_packing_prints_one_point_zero() -> None:
    straight = parse_instance(
        f"{1 + MONOMINOES}\n4\n0 0\n1 0\n2 0\n3 0\n" + "1\n0 0\n" * MONOMINOES
    )
    row = "".join(f"{x} 0 0 0\n" for x in range(4, 4 + MONOMINOES))
    assert check(straight, f"103 1\n0 0 0 0\n{row}".encode()).render() == (
        "points 1.0 Ratio: 1.000000000 (cells=103, W=103, H=1, area=103)\n"
    )


def test_testlib_number_and_token_formatting() -> None:
    assert strip_trailing_zeroes("0.5000000000") == "0.5"
    assert strip_trailing_zeroes("1.0000000000") == "1.0"
    assert strip_trailing_zeroes("0.1234567891") == "0.1234567891"
    assert token_excerpt("a\0b") == "a~b"
    assert token_excerpt("x" * 64) == "x" * 64


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("99\n" + "1\n0 0\n" * 99, "n = 99"),
        ("100\n" + "1\n0 0\n" * 99, "input ends early"),
        ("100\n11\n" + "0 0\n" * 11, "k of piece 1 = 11"),
        ("100\n" + "1\n0 0\n" * 100 + "5", "1 extra tokens"),
        ("100\n1\nzero 0\n", "is not an integer"),
    ],
)
def test_malformed_inputs_are_refused_with_the_offending_value(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_instance(text)


def _input_token_by_token(text: str) -> Instance | str:
    """What the token-by-token reading makes of `text`: its instance, or its refusal."""
    try:
        return checker_module._read_token_by_token(text.split())
    except ValueError as refusal:
        return str(refusal)


@pytest.mark.parametrize(
    "edit",
    [
        lambda text: text,
        lambda text: text + " 7",
        lambda text: text.rsplit(None, 1)[0],
        lambda text: text.replace("\n", "\n+", 5),
        lambda text: text.replace("\n", " 1_0 ", 1),
        lambda text: text.replace("\n", f" {INT64_MAX // 4 + 1} ", 4),
        lambda text: f"{text}\n".replace("\n", f" {-(INT64_MAX // 4) - 2}\n", 3),
        lambda text: "1" + "0" * 5000 + " " + text,
        lambda text: "12\n" + text.split(None, 1)[1],
    ],
)
def test_an_input_read_at_once_is_what_reading_token_by_token_makes_of_it(edit) -> None:
    """The judge's start reads its suite's inputs at once; every instance and every refusal
    (the first offending value, named) is the token-by-token reading's."""
    text = edit(generate_instance(5, 2))
    try:
        read: Instance | str = parse_instance(text)
    except ValueError as refusal:
        read = str(refusal)
    assert read == _input_token_by_token(text)


def test_coordinates_at_the_input_bounds_are_read_at_once_and_token_by_token() -> None:
    low, high = -(INT64_MAX // 4) - 1, INT64_MAX // 4
    text = f"100\n2\n{low} {high}\n{high} {low}\n" + "1\n0 0\n" * 99
    assert parse_instance(text) == _input_token_by_token(text)
    assert parse_instance(text).pieces[0] == ((low, high), (high, low))


@given(st.integers(min_value=INT64_MIN, max_value=INT64_MAX))
def test_every_int64_reads_back_exactly(value: int) -> None:
    assert OutputReader(f" {value}\n".encode()).read_long(INT64_MIN, INT64_MAX, "v") == value


@given(st.integers(min_value=INT64_MAX + 1, max_value=10**21), st.booleans())
def test_integers_beyond_int64_are_format_errors(magnitude: int, negative: bool) -> None:
    token = f"-{magnitude}" if negative else str(magnitude)
    if token == str(INT64_MIN):
        return
    with pytest.raises(CheckerQuit) as stop:
        OutputReader(token.encode()).read_long(INT64_MIN, INT64_MAX, "v")
    assert stop.value.verdict.outcome is Outcome.PRESENTATION_ERROR


# --- the fast path: the same verdict as the token-by-token reading, always ------------------

NOISE = [b" ", b"\t", b"\r\n", b"\x0b", b"\x0c", b"+", b"0", b"-", b"9" * 19, b"\xef\xbb\xbf"]


def _read_slowly(instance: Instance, output: bytes) -> str:
    try:
        return checker_module._check(instance, OutputReader(output)).render()
    except CheckerQuit as stop:
        return stop.verdict.render()


@given(
    st.lists(
        st.tuples(st.integers(-3, 60), st.integers(-3, 4), st.integers(-1, 4), st.integers(-1, 2)),
        min_size=MONOMINOES + 1,
        max_size=MONOMINOES + 1,
    ),
    st.tuples(st.integers(0, 60), st.integers(0, 4)),
    st.lists(st.tuples(st.integers(0, 400), st.sampled_from(NOISE)), max_size=2),
)
def test_the_fast_path_gives_the_token_by_token_verdict(
    instance: Instance,
    placements: list[tuple[int, int, int, int]],
    box: tuple[int, int],
    noise: list[tuple[int, bytes]],
) -> None:
    """Random placements (mostly invalid: overlaps, cells out of the box, R and F out of range),
    sometimes with a byte inserted that testlib reads differently from `bytes.split`."""
    lines = [f"{box[0]} {box[1]}"] + [" ".join(map(str, row)) for row in placements]
    output = ("\n".join(lines) + "\n").encode()
    for where, text in noise:
        output = output[:where] + text + output[where:]
    assert check(instance, output).render() == _read_slowly(instance, output)


@pytest.mark.parametrize("name", ["valid", "valid_crlf_tabs_and_bom"])
def test_a_valid_packing_takes_the_fast_path(instance: Instance, name: str) -> None:
    output = dict((row[0], row[1]) for row in CHECKER_TABLE)[name].encode()
    assert checker_module._valid_at_a_glance(instance, output) == (52, 2)
    assert check(instance, output).render() == _read_slowly(instance, output) == VALID_MSG
    for row in CHECKER_TABLE:  # and no other row of the table does
        if not row[0].startswith("valid"):
            assert checker_module._valid_at_a_glance(instance, row[1].encode()) is None


# testlib's plain integer (testlib.py reads these as written): what `_plain_integers` decides
PLAIN_INTEGER = re.compile(rb"0|-?[1-9][0-9]{0,17}")


@given(
    st.lists(
        st.text(alphabet="0123456789-+", min_size=1, max_size=20).map(str.encode),
        min_size=1,
        max_size=6,
    )
)
def test_plain_integers_are_testlibs_plain_form(tokens: list[bytes]) -> None:
    """Whole-output check against the token-by-token definition; a token longer than 18
    characters (a minus and 18 digits: out of every range) goes to the slow reading."""
    expected = all(PLAIN_INTEGER.fullmatch(token) and len(token) <= 18 for token in tokens)
    assert checker_module._plain_integers(tokens, b" ".join(tokens)) == expected


def test_every_orientation_matches_the_cell_by_cell_transform(instance: Instance) -> None:
    """The fast path's array transform, for each piece's cells under each (R, F), is the
    slow reading's `_rotate` cell by cell."""
    import numpy as np

    cells = instance.flat
    assert [(int(x), int(y)) for x, y in zip(cells.x, cells.y, strict=True)] == [
        cell for piece in instance.pieces for cell in piece
    ]
    for flip in (0, 1):
        for rotations in range(4):
            count = cells.x.size
            x, y = checker_module.transform(
                cells.x, cells.y, np.full(count, rotations), np.full(count, flip)
            )
            expected = [
                checker_module._rotate(-cx if flip else cx, cy, rotations)
                for piece in instance.pieces
                for cx, cy in piece
            ]
            assert [(int(a), int(b)) for a, b in zip(x, y, strict=True)] == expected


@given(
    st.integers(0, 1),
    st.integers(0, 3),
    st.integers(40, 120),
    st.lists(st.sampled_from([" ", "\t", "\r\n", "\n", "  "]), min_size=8, max_size=8),
)
def test_valid_packings_in_any_orientation_and_spacing_agree(
    instance: Instance, flip: int, rotations: int, width: int, blanks: list[str]
) -> None:
    cells = [checker_module._rotate(-x if flip else x, y, rotations) for x, y in L_PIECE]
    dx, dy = -min(x for x, _ in cells), -min(y for _, y in cells)
    placed = {(x + dx, y + dy) for x, y in cells}
    text = packing(width, 4, f"{dx} {dy} {rotations} {flip}", placed)
    for number, blank in enumerate(blanks):  # respace some lines
        text = text.replace("\n", blank, 1) if number % 2 else text.replace(" ", blank, 1)
    output = text.encode()
    assert checker_module._valid_at_a_glance(instance, output) == (width, 4)
    assert check(instance, output).render() == _read_slowly(instance, output)
    assert check(instance, output).outcome is Outcome.POINTS
