"""What a run tells the outside: the event log, cost accounting (with its price table), the live
progress display, a step's search metrics and the W&B sink. Imports the core and `storage`.
"""
