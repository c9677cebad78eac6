"""Modules that run in the candidate's sandbox as well as in the trusted process.

They are copied next to the worker into the sandbox (`/box/judge/`) and imported there as
top-level modules, so they import nothing from `judges` — only the standard library and torch.
Nothing here is a secret: the candidate may read and even patch all of it in its own process;
the clock, the reference and the comparison live in the trusted process only.
"""

#: The files staged into the sandbox; `worker.py` is the program run there.
STAGED = ("worker.py", "control.py", "channel.py", "layout.py", "transport.py", "failure.py")
