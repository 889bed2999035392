"""Child program of the crash-torture tests (``test_kill_writer.py``): a log writer to kill.

Two ways to run it:

``python writer.py run '<json params>'``
    Open a Log in ``params["dir"]`` and append batches until killed.
``python writer.py zygote``
    Import everything once, then read commands from stdin, one per line:

    * ``run <json params>``: fork a child that does what ``run`` does (a fresh process
      per trial without paying the interpreter start and imports each time);
    * ``sync <token>``: reap finished children, answer ``S <token>``;
    * ``quit``.

    It prints ``R`` once it is ready (imports done, a throwaway log opened once).

Every line a writer prints goes to fd 1 with a single ``os.write`` (atomic on a pipe):

* ``P <pid>``: started (printed before the log is opened, so a kill can land in ``Log.open``);
* ``A <last offset>``: an ``append_as_leader`` returned (with ``fsync_on_produce`` it was fsynced);
* ``D``: ``max_appends`` done, now idling (a minute at most) until killed;
* ``E <message>``: the writer failed (a bug: the parent fails the trial).

Record content is a pure function of the offset (:func:`record_for`), so the parent can
check every record it finds, acknowledged or not. The child imports only the engine and
the formats layer.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
import traceback

from plog.engine.storage.log_config import LogConfig
from plog.engine.storage.log import Log
from plog.formats.record_batch import encode_batch

TS0 = 1_700_000_000_000
CODECS = (0, 0, 0, 1, 2, 3, 4)  # none (most), gzip, snappy, lz4, zstd


def record_for(offset: int) -> tuple[int, bytes, bytes, tuple]:
    """(timestamp, key, value, headers) of the record at ``offset``."""
    n = (offset * 2654435761 >> 5) % 301  # 0..300 bytes
    value = ((b"<%d>" % offset) * (n // 3 + 1))[:n]
    headers = ((("h", b"%d" % offset),) if offset % 7 == 0 else ())
    return TS0 + offset, b"k%d" % offset, value, headers


def config_for(params: dict) -> LogConfig:
    return LogConfig(segment_bytes=params["segment_bytes"], index_interval_bytes=params["index_interval_bytes"],
                     fsync_on_produce=True)


def producer_batch(base: int, count: int, codec: int) -> bytes:
    """A producer batch (offsets 0..count-1) holding the records for ``base..base+count-1``."""
    recs = []
    for j in range(count):
        ts, key, value, headers = record_for(base + j)
        recs.append((j, ts, key, value, headers))
    return encode_batch(recs, compression_codec=codec)


def say(fd: int, line: str) -> None:
    os.write(fd, (line + "\n").encode())


def run_writer(params: dict, fd: int = 1) -> None:
    rnd = random.Random(params["seed"])
    say(fd, f"P {os.getpid()}")
    log = Log.open(params["dir"], config_for(params), had_clean_shutdown=False)
    max_records = max(1, params["segment_bytes"] // 800)  # a batch stays well under segment.bytes
    for _ in range(params["max_appends"]):
        base = log.log_end_offset
        count = rnd.randint(1, max_records)
        info = log.append_as_leader(producer_batch(base, count, rnd.choice(CODECS)))
        if info.first_offset != base or info.last_offset != base + count - 1:
            raise AssertionError(f"append at LEO {base} of {count} records returned {info}")
        say(fd, f"A {info.last_offset}")
    say(fd, "D")
    time.sleep(60)  # wait to be killed (bounded, should the parent be gone)


def _child(params: dict) -> None:
    try:
        run_writer(params)
    except BaseException:
        say(1, "E " + traceback.format_exc().replace("\n", " | "))
    finally:
        os._exit(1)


def warm_up() -> None:
    """Open, append to and close a throwaway log, so the forked writers start with every
    lazy import done and spend their time appending."""
    import shutil
    import tempfile

    d = tempfile.mkdtemp(prefix="plog-writer-warmup-")
    try:
        log = Log.open(os.path.join(d, "warm-0"), LogConfig(segment_bytes=8192), had_clean_shutdown=False)
        for codec in sorted(set(CODECS)):
            log.append_as_leader(producer_batch(log.log_end_offset, 8, codec))
        log.roll()
        log.close()
        Log.open(os.path.join(d, "warm-0"), LogConfig(segment_bytes=8192), had_clean_shutdown=False).close()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def zygote() -> None:
    warm_up()
    say(1, "R")
    for line in sys.stdin:
        cmd, _, arg = line.strip().partition(" ")
        if cmd == "run":
            params = json.loads(arg)
            if os.fork() == 0:
                _child(params)
        elif cmd == "sync":
            try:
                while os.waitpid(-1, os.WNOHANG)[0]:
                    pass
            except ChildProcessError:
                pass
            say(1, f"S {arg}")
        elif cmd == "quit":
            return


if __name__ == "__main__":
    if sys.argv[1] == "zygote":
        zygote()
    elif sys.argv[1] == "run":
        _child(json.loads(sys.argv[2]))
    else:
        sys.exit(f"usage: {sys.argv[0]} zygote | run JSON")
