"""Running untrusted programs under bubblewrap: the runner (`runner`, with `runner.cpp` as the
sandbox's PID 1), a submission's kept sandboxes (`session`), its argv (`argv`), its pipes and
files (`streams`), the limits and the pure classification of what a program did (`outcome`), and
the memory bound a run may take (`bounds`). Imports only `judges.cgroups`."""
