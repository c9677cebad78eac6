"""Attack: a call that never returns. On a GPU, a Triton kernel that spins forever on a value
that never changes (a hung kernel); elsewhere a Python loop. Expected verdict Time Limit
Exceeded at the package's call limit, the sandbox killed, and the GPU healthy for the next
candidate."""

import torch


def custom_kernel(data):
    x = data[0]
    if x.device.type == "cuda":
        import triton
        import triton.language as tl

        @triton.jit
        def spin(flag):
            value = tl.load(flag)
            while value == 0:
                value = tl.load(flag, volatile=True)

        flag = torch.zeros(1, dtype=torch.int32, device=x.device)
        spin[(1,)](flag)
        torch.cuda.synchronize()
    while True:
        pass
