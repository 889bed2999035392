"""Crash torture of the producer: a ``Producer`` killed with SIGKILL in the middle of its
send rounds never loses a record it acknowledged, on both paths (the native batch builder
and the pure-Python reference, ``PLOG_NATIVE=0`` in the child's environment).

The child (``_CHILD`` below, a separate Python process) sends numbered records to a
3-partition topic, alternately by ``send_many`` (keyed and keyless items), ``send_values``
and ``send``, flushes after every few thousand, and after each flush prints ``A <records
acknowledged so far>`` per partition (``Producer.stats``: what a flush returned for). The
test kills it after a random delay, then reads the data directory back (a recovery, as after
a crash) and checks, per partition: every acknowledged record is there, and the records
form an unbroken, ordered prefix of what the child sent to that partition (a round cut
short may have left more than it acknowledged: at least once, never lost or reordered).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from plog.engine.clients.consumer_loop import ConsumeLoop
from plog.engine.cluster.data_dir import DataDir
from plog.engine.offset_spec import parse_offset_range

TRIALS = int(os.environ.get("PLOG_TORTURE_PRODUCE_TRIALS", "6"))
BASE_SEED = os.environ.get("PLOG_TORTURE_SEED") or str(random.SystemRandom().randrange(1 << 32))

_CHILD = r"""
import random, sys
from plog.engine.clients.producer import Producer
root, seed = sys.argv[1], sys.argv[2]
r = random.Random(seed)
p = Producer(root, batch_size=r.choice((200, 2000, 16384)), linger_ms=10**9,
             compression_type=r.choice(("none", "lz4", "zstd")), enable_idempotence=r.random() < 0.7)
print("S", "native" if p._nat is not None else "python", flush=True)
i = 0
while True:
    n = r.randrange(1, 5000)
    way = r.randrange(3)
    if way == 0:
        p.send_many("t", [(b"k%d" % (j % 7), b"v%d" % j) if j % 3 else b"v%d" % j for j in range(i, i + n)])
    elif way == 1:
        p.send_values("t", [b"v%d" % j for j in range(i, i + n)])
    else:
        for j in range(i, i + n):
            p.send("t", b"v%d" % j, key=b"k%d" % (j % 5) if j % 2 else None)
    i += n
    p.flush()
    print("A", " ".join(f"{tp.partition}:{st[2]}" for tp, st in sorted(p.stats.items())), flush=True)
"""


def _records(root: Path) -> dict[int, list[int]]:
    dd = DataDir.open(root)
    loop = ConsumeLoop.open(dd, "t", parse_offset_range("earliest"), exit_at_end=True)
    try:
        got = list(loop)
    finally:
        loop.close()
    out: dict[int, list[int]] = {}
    for rec in sorted(got, key=lambda r: (r.partition, r.offset)):
        out.setdefault(rec.partition, []).append(int(rec.value[1:]))
    return out


@pytest.mark.parametrize("path", ["native", "python"])
def test_killed_producer_loses_nothing_acknowledged(tmp_path, path):
    env = {k: v for k, v in os.environ.items() if k != "PLOG_NATIVE"}
    if path == "python":
        env["PLOG_NATIVE"] = "0"
    for trial in range(TRIALS):
        seed = f"{BASE_SEED}-{path}-{trial}"
        rng = random.Random(seed)
        root = tmp_path / f"d{trial}"
        dd = DataDir.init(root, brokers=1)
        dd.create_topic("t", partitions=3)
        child = subprocess.Popen([sys.executable, "-c", _CHILD, str(root), seed], stdout=subprocess.PIPE, env=env,
                                 text=True)
        try:
            first = child.stdout.readline().split()
            if path == "native" and first[1] != "native":
                # Without a build there is no native path to torture; CI requires one.
                if os.environ.get("PLOG_REQUIRE_NATIVE", "") not in ("", "0"):
                    pytest.fail("PLOG_REQUIRE_NATIVE is set but the producer runs on the pure-Python path")
                pytest.skip("the native module is not built (PLOG_REQUIRE_NATIVE=1 makes this a failure)")
            assert first[:2] == ["S", path], first
            time.sleep(rng.uniform(0.05, 1.5))
        finally:
            child.send_signal(signal.SIGKILL)
            out, _ = child.communicate()
        acked: dict[int, int] = {}
        for line in out.splitlines():
            if line.startswith("A ") and line.count(":") == len(line.split()) - 1:
                acked = {int(p): int(n) for p, n in (f.split(":") for f in line.split()[1:])}
        got = _records(root)
        for partition, n in acked.items():
            assert len(got.get(partition, [])) >= n, f"seed {seed!r}: partition {partition} lost acknowledged records"
        for partition, values in got.items():
            assert values == sorted(values), f"seed {seed!r}: partition {partition} out of order"
        everything = sorted(v for values in got.values() for v in values)
        # Every record present is one the child sent, once (the log holds no duplicate).
        assert len(everything) == len(set(everything)), f"seed {seed!r}: a record is in the log twice"
