"""The project's local judge: the FrontierCS judge protocol on 127.0.0.1, without Docker.

Layout, by stage:

- `service` — the HTTP surface (`/health`, `/problems`, `/submit`, `/result/{sid}`) and `main()`;
- `engine` — the bounded submission queue, dispatchers and parallel cases;
- `judging` — compile, run and check one case, and the FrontierCS-compatible result records;
- `store` — results persisted on disk, readable any number of times, surviving restarts;
- `sandbox` (+ `runner.cpp`) — running untrusted programs under bubblewrap with rlimits;
  `outcome` — the limits and the pure classification of what a program did;
- `problems` — FrontierCS problem packages (`config.yaml`, `testdata/<i>.in`);
- `checkers`, `testlib`, `polyomino/` — the checkers (pure functions), testlib's reading rules,
  the Polyomino piece enumeration and the seeded instance generator;
- `verdict_cache`, `fingerprints` — identical submissions answered from stored verdicts, keyed by
  the content digests of everything a verdict depends on;
- `cluster/` — compiles and cases as Ray tasks on a cluster's nodes (`--ray`; only then is Ray
  imported); `service_extras` — the flags and set-up of the cache and the Ray workers;
- `process` — starting the service as a subprocess (tests, benchmarks).
"""
