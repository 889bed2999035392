"""plog.engine: Kafka storage layer over files (segments, indexes, logs, loader)."""
