"""``plog lookup`` (being written)."""
