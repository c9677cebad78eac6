"""The project's local judge: the FrontierCS judge protocol on 127.0.0.1, without Docker.

`judges/` imports nothing of `harness` or `tttd`: it is deployed alone, on judge hosts and Ray
workers. What other programs may use is `api` (the launcher, the console entry, the rules a
problem folder is read by). Layout, by role (top to bottom; a package imports only the ones
below it):

- `service/` — the HTTP surface and `main()` (`app`), auth, connections, request reading,
  the bounded submission queue and its dispatchers (`engine`, `slots`), the flags and set-up of
  the cache and the Ray workers (`setup`), the problem sources named by the flags (`sources`),
  and starting the service as a subprocess (`process`: tests, benchmarks);
- `cluster/` — compiles and cases as Ray tasks on a cluster's nodes (`--ray`; only then is Ray
  imported);
- `gpu/` — `type: gpu` problems: a Python kernel timed on a GPU in a sandbox of its own;
- `kinds` — the loader table of problem kinds (`load_problem`, `load_problems`): above both
  `problems/` and `gpu/`, so neither imports the other;
- `verdicts/` — compile, run and check one case (`judging`, `cases`, `programs`: checker and
  interactor programs), the results store (`store`, `nofollow`), and the verdict cache keyed by
  content digests (`cache`, `fingerprints`);
- `problems/` — FrontierCS problem packages (`package`), the checkers (pure functions), testlib's
  reading rules, and `polyomino/`: the piece enumeration and the seeded instance generator;
- `sandbox/` — running untrusted programs under bubblewrap with rlimits (`runner` + `runner.cpp`,
  `argv`, `streams`), the limits and the pure classification of what a program did
  (`outcome`), the memory bound a run may take (`bounds`);
- `cgroups/` — the cgroup file system: run groups, the CPU bound, the files themselves.
"""
