"""The project's local judge: the FrontierCS judge protocol on 127.0.0.1, without Docker.

Layout, by stage:

- `service` — the HTTP surface (`/health`, `/problems`, `/submit`, `/result/{sid}`) and `main()`;
- `engine` — the submission queue, parallel cases and the FrontierCS-compatible result record;
- `store` — results persisted on disk, readable any number of times, surviving restarts;
- `sandbox` — compiling and running untrusted C++ under bubblewrap with rlimits;
- `problems` — FrontierCS problem packages (`config.yaml`, `testdata/<i>.in`);
- `checkers`, `testlib`, `polyomino/` — the checkers (pure functions) and the Polyomino
  piece enumeration and seeded instance generator.
"""
