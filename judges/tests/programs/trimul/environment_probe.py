"""An honest candidate that first checks the sandbox is an ordinary place for PyTorch and
Triton: its uid has a user name (`getpass.getuser()`, which PyTorch's compiler asks to place its
caches, and `pwd`), and every compiler cache directory is set, inside the private /tmp, writable,
and holds nothing of another candidate (each run leaves a marker there and fails on finding
one). Expected verdict: valid, however often judged; otherwise Runtime Error with a report."""

import getpass
import json
import os
import pwd
import uuid

import torch
import torch.nn.functional as F

CACHES = ("TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "CUDA_CACHE_PATH", "XDG_CACHE_HOME",
          "TORCH_EXTENSIONS_DIR")  # fmt: skip


def _report():
    problems = {}
    try:
        user = getpass.getuser()
        if pwd.getpwuid(os.getuid()).pw_name != user:
            problems["user"] = f"getuser {user!r} is not the passwd entry of uid {os.getuid()}"
    except Exception as error:
        problems["user"] = f"{type(error).__name__}: {error}"
    for name in CACHES:
        folder = os.environ.get(name)
        if not folder or not folder.startswith("/tmp/"):
            problems[name] = f"not a folder of the private /tmp: {folder!r}"
            continue
        try:
            os.makedirs(folder, exist_ok=True)
            others = [f for f in os.listdir(folder) if f.startswith("candidate-marker-")]
            if others:
                problems[name] = f"another candidate's files are here: {others}"
            with open(os.path.join(folder, f"candidate-marker-{uuid.uuid4().hex}"), "w") as f:
                f.write("x")
        except OSError as error:
            problems[name] = f"not writable: {error}"
    return problems


PROBLEMS = _report()


def custom_kernel(data):
    if PROBLEMS:
        raise RuntimeError("sandbox environment: " + json.dumps(PROBLEMS, sort_keys=True))
    x, mask, w, config = data
    dim, hidden = config["dim"], config["hidden_dim"]
    z = F.layer_norm(x, (dim,), w["norm.weight"], w["norm.bias"])
    keep = mask.to(torch.float32).unsqueeze(-1)
    left = F.linear(z, w["left_proj.weight"]) * keep
    left = left * torch.sigmoid(F.linear(z, w["left_gate.weight"]))
    right = F.linear(z, w["right_proj.weight"]) * keep
    right = right * torch.sigmoid(F.linear(z, w["right_gate.weight"]))
    t = torch.einsum("bikh,bjkh->bijh", left, right)
    t = F.layer_norm(t, (hidden,), w["to_out_norm.weight"], w["to_out_norm.bias"])
    return F.linear(t * torch.sigmoid(F.linear(z, w["out_gate.weight"])), w["to_out.weight"])
