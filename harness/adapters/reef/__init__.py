"""Reef: the guidance channel and receipts (`channel`), the status page (`status`), the training
bridge."""
