"""Reef: the guidance channel and receipts (`channel`), the status page (`status`), the training
bridge (`training_bridge`) and `reef serve` as a process beside a run (`process`)."""
