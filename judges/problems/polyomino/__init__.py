"""Polyomino Packing (FrontierCS algorithmic problem 0): free-polyomino enumeration, the seeded
instance generator and the checker."""
