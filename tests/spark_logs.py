"""A generated log directory for the Spark suite: several topics and partitions, small
segments with dense indexes (so scans split segments), every codec, headers, null keys
and values, binary (non-UTF-8) payloads, a transaction with its commit marker."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from plog.formats.record_batch import encode_batch

CODECS = (0, 1, 2, 3, 4)  # none, gzip, snappy, lz4, zstd


def build(root: Path) -> Path:
    from plog.engine.storage.log_manager import LogManager

    config = {"segment.bytes": "6000", "index.interval.bytes": "512", "plog.fsync.on.produce": "false"}
    with LogManager([root], cluster_id="spark-test") as lm:
        for topic, partitions in (("orders", 3), ("audit", 1)):
            for partition in range(partitions):
                log = lm.get_or_create_log((topic, partition), config=config, topic_id=uuid.UUID(int=9))
                ts = 1_700_000_000_000 + partition
                for i in range(90):
                    records = []
                    for j in range(5):
                        n = i * 5 + j
                        key = None if n % 17 == 0 else (b"\xff\xfe%d" % (n % 40) if n % 11 == 0 else b"key-%d" % (n % 60))
                        value = None if n % 23 == 0 else (b"ERROR " if n % 7 == 0 else b"ok ") + bytes([n % 256]) * 40
                        headers = [("trace", b"t%d" % (n % 5)), ("bin", b"\x00\xff")] if n % 3 == 0 else []
                        if n % 13 == 0:
                            headers.append(("nullh", None))
                        # CreateTime that goes backwards now and then.
                        records.append((j, ts + (n % 9) * 1000 - 3000, key, value, headers))
                    codec = CODECS[i % len(CODECS)]
                    log.append_as_leader(encode_batch(records, compression_codec=codec,
                                                      producer_id=5000 + partition, producer_epoch=0,
                                                      base_sequence=i * 5))
                    ts += 60_000
    os.remove(root / ".lock")
    return root
