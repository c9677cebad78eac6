"""Attack: return the input tensor itself (same shape as the output), or a view of it.

Expected verdict Wrong Answer: the output must be memory the candidate allocated.
"""


def custom_kernel(data):
    return data[0].view(data[0].shape)
