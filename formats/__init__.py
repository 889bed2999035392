"""plog.formats: Apache Kafka on-disk byte structures, decoded and encoded. No file I/O."""
