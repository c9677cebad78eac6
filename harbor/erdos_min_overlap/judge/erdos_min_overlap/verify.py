"""Verifier of the Erdős minimum overlap problem: the bound a step function certifies.

    python3 verify.py <input> <output> [<answer>]

The input holds the interval length (2) and the largest number of steps allowed. The output
is the candidate's step function: the number of steps n, then n values h_1..h_n in [0, 1],
h_i being the value on the i-th of n equal steps of [0, 2]. As TTT-Discover's verifier does, h is
rescaled to integrate to 1 (sum n/2) when it does not, and must still lie in [0, 1]. The bound
it certifies is

    C(h) = max over shifts k of  ∫ h(x) (1 − h(x + k)) dx,   with h and 1 − h zero outside [0, 2],

which for a step function on equal steps is attained at a multiple of the step width 2/n, where
it equals (2/n) · Σ_i h_i (1 − h_{i+j}): the maximum of the full discrete correlation of h with
1 − h, times 2/n (exact, computed by numpy.correlate).

Verdict, in testlib's form on stdout: `ok Value: <C> (n=<n>)` with exit status 0 (the case is
certified: ratio 1, value C), or `wrong answer <why>` with exit status 1 (ratio 0).
"""

import math
import sys

import numpy as np


def verdict(kind: str, message: str, code: int) -> None:
    print(f"{kind} {message}")
    sys.exit(code)


def main() -> None:
    with open(sys.argv[1]) as file:
        limits = file.read().split()
    length, max_steps = float(limits[0]), int(limits[1])
    with open(sys.argv[2], "rb") as file:
        tokens = file.read().split()
    if not tokens:
        verdict("wrong answer", "empty output: expected n, then n values", 1)
    try:
        n = int(tokens[0])
    except ValueError:
        verdict("wrong answer", f"the number of steps {tokens[0][:40]!r} is not an integer", 1)
    if not 1 <= n <= max_steps:
        verdict("wrong answer", f"n = {n} steps is outside [1, {max_steps}]", 1)
    if len(tokens) != n + 1:
        verdict("wrong answer", f"expected {n} values after n, found {len(tokens) - 1}", 1)
    try:
        h = np.array([float(token) for token in tokens[1:]], dtype=np.float64)
    except ValueError:
        verdict("wrong answer", "a value is not a number", 1)
    if not np.all(np.isfinite(h)):
        verdict("wrong answer", "a value is NaN or infinite", 1)
    if np.any(h < 0) or np.any(h > 1):
        verdict("wrong answer", f"h leaves [0, 1]: range [{h.min()!r}, {h.max()!r}]", 1)
    total = float(np.sum(h))
    if total <= 0:
        verdict("wrong answer", "h is zero everywhere: its integral cannot be 1", 1)
    if total != n / 2:
        h = h * ((n / 2) / total)
        if np.any(h > 1):
            verdict("wrong answer", f"h rescaled to integral 1 exceeds 1 (max {h.max()!r})", 1)
    width = length / n
    bound = float(np.max(np.correlate(h, 1.0 - h, mode="full")) * width)
    if not math.isfinite(bound):
        verdict("wrong answer", "the bound is not finite", 1)
    verdict("ok", f"Value: {bound!r} (n={n})", 0)


if __name__ == "__main__":
    main()
