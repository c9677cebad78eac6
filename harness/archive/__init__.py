"""The archive's pure parts: node records, rank-prior PUCT parent selection, the archive filter and
its
consistency checks. Core: imports only the core (`harness.state`, `harness.puct`) and nothing
outside the
standard library.
"""
