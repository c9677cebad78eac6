"""Reef: the guidance channel and receipts (`channel`), the status page (`status`) and the training
bridge (`training_bridge`)."""
