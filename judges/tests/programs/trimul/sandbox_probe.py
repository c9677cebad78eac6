"""Attack: look for the judge's reference and state, the network and writable places; raise
with a report of what was reachable. Expected verdict Runtime Error whose message reports
nothing reachable (the reference module is not mounted, there is no network, only /tmp is
writable)."""

import glob
import json
import os
import socket


def _write(path):
    with open(path, "w") as file:
        file.write("x")


def _read(path):
    with open(path) as file:
        return file.read()


def _attempt(name, action, found):
    try:
        action()
        found[name] = "REACHABLE"
    except Exception as error:
        found[name] = f"blocked ({type(error).__name__})"


def custom_kernel(data):
    found = {}
    roots = [
        r for r in ("/box", "/tmp", "/opt", "/root", "/home", "/work", "/srv") if os.path.isdir(r)
    ]
    hits = [
        p for r in roots for p in glob.glob(f"{r}/**/reference.py", recursive=True) if "judge" in p
    ]
    hits = hits[:3]
    found["judge reference files"] = hits or "none visible"
    found["box writable"] = os.access("/box", os.W_OK)
    _attempt("write /usr", lambda: _write("/usr/probe"), found)
    _attempt("write /box", lambda: _write("/box/probe"), found)
    _attempt("tcp 127.0.0.1:8081", lambda: socket.create_connection(("127.0.0.1", 8081), 1), found)
    _attempt("dns", lambda: socket.getaddrinfo("pypi.org", 443), found)
    _attempt("read /etc/shadow", lambda: _read("/etc/shadow"), found)
    raise RuntimeError("escape report: " + json.dumps(found, sort_keys=True))
