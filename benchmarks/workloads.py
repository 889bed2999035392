"""The record workload every benchmark shares (the one ../shared/docs/perf-anchors.md uses):
10-byte keys and 100-byte JSON-ish values, timestamps rising by 0-2 ms per record."""

from __future__ import annotations

import random


def json_events(n: int, seed: int = 1) -> list[tuple]:
    """``n`` records ``(offset, timestamp, key, value)`` with offsets 0..n-1."""
    rnd = random.Random(seed)
    ts = 1_700_000_000_000
    out = []
    for i in range(n):
        ts += rnd.randint(0, 2)
        value = ('{"id":%d,"user":"u%05d","event":"%s","path":"/api/v1/%s","ok":%s,"ms":%d}' % (
            i, rnd.randrange(100000), rnd.choice(["click", "view", "buy", "scroll"]),
            rnd.choice(["items", "cart", "users", "search"]), rnd.choice(["true", "false"]), rnd.randrange(1000)
        )).encode()
        out.append((i, ts, b"key-%06d" % rnd.randrange(1000000), value[:100].ljust(100, b" ")))
    return out
