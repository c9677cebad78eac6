"""Attack: write the armed call's DONE in the worker's control block (it runs in the
candidate's process), then keep computing on the CPU and never return. The judge's clock stops
at DONE; waiting for the output's description is bounded. Expected verdict: Time Limit Exceeded
within the judge's answer limit (20 s) of the DONE, the sandbox killed."""

import gc


def _block():
    for item in gc.get_objects():
        if type(item).__name__ == "Control" and hasattr(item, "get") and hasattr(item, "set"):
            return item
    return None


def custom_kernel(data):
    block = _block()
    if block is not None:
        block.set(3, block.get(1))  # DONE of the armed call
    total = 0
    while True:
        total += 1
