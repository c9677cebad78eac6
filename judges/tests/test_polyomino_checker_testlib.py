"""The Polyomino checker (judges/problems/polyomino/checker.py) against the problem's own testlib
checker, compiled here from `../shared/data/frontiercs` (chk.cc and testlib.h; the test skips
when they are absent): over fuzzed outputs — valid packings, values at and past every range,
past int64 and 2^64, tokens holding a NUL, malformed integers, odd blanks, missing and extra
tokens, overlaps — both print the same verdict text and exit with the same status."""

from __future__ import annotations

import random
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from judges.problems.polyomino.checker import check, parse_instance
from judges.problems.polyomino.generator import generate_instance

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "frontiercs"
CHECKER = SHARED / "problems" / "0" / "chk.cc"
FUZZED = 400

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (CHECKER.is_file() and (SHARED / "include" / "testlib.h").is_file()),
        reason="FrontierCS test data ../shared/data/frontiercs is absent",
    ),
]

# Tokens that sit at or past the edges of what the checker reads.
EDGES = [
    "0",
    "1",
    "2",
    "3",
    "4",
    "-1",
    "-0",
    "00",
    "01",
    "+1",
    "1.0",
    "1e3",
    "-",
    "--1",
    "0x10",
    "4000000000000",
    "4000000000001",
    "-4000000000000",
    "-4000000000001",
    "3999999999999",
    "2147483647",
    "2147483648",
    "-2147483648",
    "-2147483649",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "18446744073709551616",
    "18446744073709551617",
    "99999999999999999999",
    "-9999999999999999999",
    "999999999999999999999",
    "00000000000000000000",
    "1" * 40,
    "a" * 70,
    "5\0",
    "\0",
    "1\x002",
    "-\x001",
    "\x00" * 3,
    "7\x0b",
    "\x0c8",
]


@pytest.fixture(scope="module")
def testlib_checker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    binary = tmp_path_factory.mktemp("chk") / "chk"
    subprocess.run(
        [
            "g++",
            "-O1",
            "-std=gnu++17",
            "-I",
            str(SHARED / "include"),
            "-o",
            str(binary),
            str(CHECKER),
        ],
        check=True,
    )
    return binary


def packing(text: str) -> list[str]:
    """A valid packing of the instance: each piece in a column of its own (cells 0..9)."""
    n = int(text.split()[0])
    return [f"{11 * n} 10", *(f"{11 * i} 0 0 0" for i in range(n))]


def fuzzed(lines: list[str], rng: random.Random) -> Iterator[bytes]:
    """The packing itself, then outputs with one to three changes each."""
    yield ("\n".join(lines) + "\n").encode()
    for _ in range(FUZZED):
        tokens = [line.split() for line in lines]
        for _ in range(rng.randint(1, 3)):
            row = rng.choice([0, 0, 1, rng.randrange(len(tokens))])
            column = rng.randrange(len(tokens[row]))
            kind = rng.random()
            if kind < 0.6:
                tokens[row][column] = rng.choice(EDGES)
            elif kind < 0.7:
                del tokens[row][column]
            elif kind < 0.8:
                tokens[row].insert(column, rng.choice(EDGES))
            elif kind < 0.9:  # a shift: overlap or out of bounds
                tokens[row][column] = str(int(tokens[row][column] or 0) + rng.randint(-12, 12))
            else:
                tokens.append([rng.choice(EDGES)])
        blank = rng.choice([" ", " ", "\t", "  ", "\r"])
        text = "\n".join(blank.join(row) for row in tokens) + rng.choice(["\n", "", "\r\n"])
        yield (b"\xef\xbb\xbf" if rng.random() < 0.05 else b"") + text.encode("latin-1")


def test_every_verdict_and_exit_status_is_the_testlib_checkers(
    testlib_checker: Path, tmp_path: Path
) -> None:
    text = generate_instance(46, 1)
    instance = parse_instance(text)
    (tmp_path / "in.txt").write_text(text)
    (tmp_path / "ans.txt").write_text("")
    rng = random.Random(46)
    differences = []
    kinds = set()
    for number, output in enumerate(fuzzed(packing(text), rng)):
        (tmp_path / "out.txt").write_bytes(output)
        real = subprocess.run(
            [str(testlib_checker), "in.txt", "out.txt", "ans.txt"],
            cwd=tmp_path,
            capture_output=True,
            check=False,
        )
        ours = check(instance, output)
        kinds.add(ours.render().split(" ")[0])
        expected = real.stderr.decode()
        if (ours.render(), ours.outcome.exit_code) != (expected, real.returncode):
            differences.append((number, output[:80], ours.render(), expected, real.returncode))
    assert not differences, differences[:5]
    assert {"points", "wrong"} <= kinds  # valid packings and both refusals were compared


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "4000000000001 0 0 0",
            "Integer parameter [name=X_i] equals to 4000000000001, violates "
            "the range [-4*10^12, 4*10^12]",
        ),
        ("18446744073709551617 0 0 0", 'Expected integer, but "18446744073709551617" found'),
        ("1\x002 0 0 0", 'Expected integer, but "1~2" found (it contains \\0)'),
    ],
)
def test_the_three_messages_of_issue_46_are_testlibs(
    testlib_checker: Path, tmp_path: Path, line: str, message: str
) -> None:
    text = generate_instance(46, 2)
    lines = packing(text)
    lines[1] = line
    output = ("\n".join(lines) + "\n").encode("latin-1")
    (tmp_path / "in.txt").write_text(text)
    (tmp_path / "out.txt").write_bytes(output)
    (tmp_path / "ans.txt").write_text("")
    real = subprocess.run(
        [str(testlib_checker), "in.txt", "out.txt", "ans.txt"],
        cwd=tmp_path,
        capture_output=True,
        check=False,
    )
    ours = check(parse_instance(text), output).render()
    assert message in ours
    assert ours == real.stderr.decode()
