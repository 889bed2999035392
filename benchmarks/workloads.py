"""What every benchmark shares: the record workload of ../shared/docs/perf-anchors.md
(10-byte keys, 100-byte JSON-ish values, timestamps rising by 0-2 ms per record) and the
JSON output."""

from __future__ import annotations

import json
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


def emit(result: dict, path: str | None) -> None:
    """Print a benchmark's JSON result, and write it to ``path`` when given."""
    text = json.dumps(result, indent=2)
    print(text)
    if path:
        with open(path, "w") as f:
            f.write(text + "\n")
