"""Attack: an output of NaN, which |got - expected| > tol never flags (NaN compares false).

Expected verdict Wrong Answer: NaN positions must match the reference's.
"""

import torch


def custom_kernel(data):
    return torch.full_like(data[0], float("nan"))
