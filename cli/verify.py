"""``plog verify`` (being written)."""
