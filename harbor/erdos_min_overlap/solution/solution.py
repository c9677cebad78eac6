"""Seed for the Erdős minimum overlap problem: projected subgradient descent on a step function.

Starts from a symmetric bump of 200 equal steps on [0, 2] and, for a fixed number of rounds,
lowers the worst shift's overlap: a step along the subgradient of that shift's correlation,
then a projection back onto {0 <= h <= 1, integral 1}. Deterministic (no clock, no randomness),
numpy only. Prints n and the n values.
"""

import sys

import numpy as np

STEPS = 200
ROUNDS = 1500


def project(h: np.ndarray, total: float) -> np.ndarray:
    """The point of {0 <= h <= 1, sum(h) = total} reached by shifting h and clipping."""
    low, high = -1.0 - h.max(), 1.0 - h.min()
    for _ in range(60):
        middle = (low + high) / 2
        if np.clip(h + middle, 0.0, 1.0).sum() > total:
            high = middle
        else:
            low = middle
    return np.clip(h + (low + high) / 2, 0.0, 1.0)


def overlap(h: np.ndarray) -> tuple[float, int]:
    """The bound (2/n) max_j sum_i h_i (1 - h_{i+j}) and the index of the worst shift."""
    correlation = np.correlate(h, 1.0 - h, mode="full")
    worst = int(np.argmax(correlation))
    return float(correlation[worst]) * 2.0 / h.size, worst


def main() -> None:
    n = STEPS
    x = (np.arange(n) + 0.5) * 2.0 / n
    h = project(np.exp(-((x - 1.0) ** 2) / 0.18), n / 2)
    best, best_value = h.copy(), overlap(h)[0]
    rate = 0.05
    for _ in range(ROUNDS):
        _, worst = overlap(h)
        shift = worst - (n - 1)  # correlation index -> shift j in sum_i h_{i+j} (1 - h_i)
        gradient = np.zeros(n)
        # d/dh of sum_i h_{i+j} (1 - h_i): (1 - h_{m-j}) at m, minus h_{m+j} at m.
        indices = np.arange(n)
        partner = indices - shift
        inside = (partner >= 0) & (partner < n)
        gradient[inside] += 1.0 - h[partner[inside]]
        partner = indices + shift
        inside = (partner >= 0) & (partner < n)
        gradient[inside] -= h[partner[inside]]
        h = project(h - rate * gradient, n / 2)
        h = (h + h[::-1]) / 2
        value = overlap(h)[0]
        if value < best_value:
            best, best_value = h.copy(), value
        rate *= 0.998
    sys.stdout.write(f"{n}\n" + "\n".join(repr(float(v)) for v in best) + "\n")


if __name__ == "__main__":
    main()
