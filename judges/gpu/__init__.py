"""The local judge's GPU kind: a Python candidate's `custom_kernel(data)` timed on one GPU.

A package with `type: gpu` (e.g. harbor/trimul/judge/trimul) names its cases, its reference
module (input generator and reference forward pass) and its limits (`judges.gpu.package`). Each
submission gets one GPU to itself (`judges.gpu.judge`) and two processes on it:

- the **trusted process** (`judges.gpu.trusted`, our code only): generates every call's inputs,
  computes the reference output, holds the clock and compares; the candidate never runs in it;
- the **candidate's process** (`judges.gpu.sandboxed.worker`), in a bubblewrap sandbox with only
  that GPU's device nodes: it imports the candidate and calls it when told to.

They share GPU memory through CUDA IPC (`judges.gpu.sandboxed.transport`) and a small control
block of host memory (`judges.gpu.sandboxed.control`). judges/README.md, "The GPU judge", says what
each part defends against and what was measured.
"""
