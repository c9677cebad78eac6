"""The archive's pure parts: node records, parent selection (PUCT, greedy, uniform), the archive
filter, its consistency checks, and the run's best (`best`: the one definition every report
uses). Core: imports only the core (`harness.state`, `harness.puct`) and the standard library.
"""
