"""What a run tells the outside: the event log, cost accounting (with its price table), the live
progress
display. Imports the core and `storage`.
"""
