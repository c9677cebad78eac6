"""Attack: patch every comparison and clock it can reach, then return zeros.

GPU MODE's evaluator imports the candidate next to its checker, so replacing the check there
passes anything. Here the check runs in another process: expected verdict Wrong Answer.
"""

import sys
import time

import torch

torch.allclose = lambda *args, **kwargs: True
torch.testing.assert_close = lambda *args, **kwargs: None
time.perf_counter_ns = lambda: 0
time.perf_counter = lambda: 0.0
for module in list(sys.modules.values()):
    for attribute in ("compare", "check_implementation", "verbose_allclose", "match_reference"):
        if hasattr(module, attribute):
            setattr(module, attribute, lambda *args, **kwargs: (True, ""))


def custom_kernel(data):
    x = data[0]
    return torch.zeros_like(x)
