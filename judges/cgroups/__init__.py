"""The cgroup file system, written directly (v1 or v2): run groups and their usage (`groups`),
the CPU bound (`cpu`), and the files, names and stale-group sweep (`files`). Standard library
only."""
