"""``plog ls`` (being written)."""
