"""The archive's pure parts: node records, parent selection (PUCT, greedy, uniform), the archive
filter and its consistency checks. Core: imports only the core (`harness.state`, `harness.puct`)
and the standard library.
"""
