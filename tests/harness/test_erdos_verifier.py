"""The Erdős task's verifier certifies exactly the bound of the step function it is given.

Run as the judge runs it (`python3 verify.py in out ans`, the system Python with numpy), on
step functions whose bound is known by hand: h = 1 on the middle half of [0, 2] gives Erdős's
trivial 1/2; a function that integrates to less than 1 is rescaled first, as TTT-Discover's
verifier does; values outside [0, 1], a wrong count or a zero function are refused.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

TASK = Path(__file__).resolve().parents[2] / "harbor" / "erdos_min_overlap"
PACKAGE = TASK / "judge" / "erdos_min_overlap"
PYTHON = "/usr/bin/python3"


def numpy_missing() -> bool:
    done = subprocess.run([PYTHON, "-c", "import numpy"], capture_output=True, check=False)
    return done.returncode != 0


pytestmark = pytest.mark.skipif(
    numpy_missing(), reason="the system python3 lacks numpy (scripts/system-packages.sh)"
)


def verify(output: str, tmp_path: Path) -> tuple[int, str]:
    out = tmp_path / "out.txt"
    out.write_text(output)
    done = subprocess.run(
        [PYTHON, str(PACKAGE / "verify.py"), str(PACKAGE / "testdata" / "1.in"), str(out)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    return done.returncode, done.stdout.strip()


def test_middle_half_certifies_the_trivial_bound(tmp_path: Path) -> None:
    assert verify("4\n0 1 1 0\n", tmp_path) == (0, "ok Value: 0.5 (n=4)")


def test_a_function_integrating_below_one_is_rescaled_first(tmp_path: Path) -> None:
    assert verify("4\n0 0.5 0.5 0\n", tmp_path) == (0, "ok Value: 0.5 (n=4)")


def test_constant_half_certifies_its_overlap(tmp_path: Path) -> None:
    # h = 1/2 on all of [0, 2]: at shift 0 the overlap is the integral of 1/4 over [0, 2].
    code, message = verify("8\n" + " ".join(["0.5"] * 8) + "\n", tmp_path)
    assert (code, message) == (0, "ok Value: 0.5 (n=8)")


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        ("3\n0 1.5 0\n", "h leaves [0, 1]"),
        ("3\n0 1\n", "expected 3 values after n, found 2"),
        ("2\n0 0\n", "h is zero everywhere"),
        ("4\n0 1 0.5 0\n", "rescaled to integral 1 exceeds 1"),
        ("", "empty output"),
        ("2\n0 nan\n", "NaN or infinite"),
    ],
)
def test_invalid_step_functions_are_refused(output: str, reason: str, tmp_path: Path) -> None:
    code, message = verify(output, tmp_path)
    assert code == 1 and message.startswith("wrong answer") and reason in message
