"""The producer's native write side (native/src/produce.rs, py_produce.rs: records built
into batches as they arrive, lines parsed, keys hashed, sticky partitions chosen) against
the pure-Python reference (engine/clients/producer.py with no native module).

Each workload runs twice, on two copies of one data directory, with the same injected
clock and the same partitioner random numbers: once on each path. The two data
directories must then be byte-identical, file by file (segments, indexes, snapshots,
checkpoints, metadata), and the errors the same (class, message, line number).
"""

from __future__ import annotations

import io
import json
import random
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from native_twins import native_module  # noqa: E402,F401  (fixture)
from plog.engine.clients.console_io import LineParser  # noqa: E402
from plog.engine.clients.producer import Producer  # noqa: E402
from plog.engine.clients.producer_loop import ProduceLoop  # noqa: E402
from plog.engine.cluster.data_dir import DataDir  # noqa: E402
from plog.engine.clients import producer as producer_module  # noqa: E402

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
#: linger.ms that never elapses in a test: batch boundaries depend on sizes only.
NEVER = 10**9


class Clock:
    """A wall clock that ticks a little (and now and then goes back) at every reading."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.ms = 1_700_000_000_000

    def __call__(self) -> float:
        self.ms += self.rng.choice((0, 0, 1, 3, 250, -7))
        return self.ms / 1000


#: Written with the wall-clock time the writer's closing maintenance ran (not the
#: producer's clock): compared as its keys only.
MAINTENANCE = ".plog-maintenance.json"


def _tree(root: Path) -> dict[str, bytes]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            out[str(p.relative_to(root))] = repr(sorted(json.loads(data))).encode() if p.name == MAINTENANCE else data
    return out


def _outcome(e: BaseException | None, loop=None) -> tuple | None:
    if e is None:
        return None
    return (type(e).__name__, str(e), getattr(loop, "line_number", None))


def _run_both(tmp_path, native_module, topics: dict[str, int], workload, *, seed: int = 1, **producer_kw):  # noqa: F811
    """Run ``workload(producer)`` on both paths over copies of one data directory; return
    the two trees and outcomes."""
    base = tmp_path / "base"
    dd = DataDir.init(base, brokers=1)
    for name, n in topics.items():
        dd.create_topic(name, partitions=n)
    results = []
    for path, module in (("python", None), ("native", native_module)):
        root = tmp_path / path
        shutil.copytree(base, root)
        rng = random.Random(seed)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(producer_module, "NATIVE", module)
            producer = Producer(DataDir.open(root), clock=Clock(seed), rng=lambda: rng.getrandbits(31),
                                **{"linger_ms": NEVER, **producer_kw})
            assert (producer._nat is None) == (module is None)
            error = None
            extra = None
            try:
                extra = workload(producer)
            except Exception as e:  # noqa: BLE001 - the outcome compared
                error = e
            finally:
                try:
                    producer.close()
                except Exception as e:  # noqa: BLE001
                    error = error or e
        results.append((_tree(root), _outcome(error, getattr(error, "loop", extra)), producer.stats,
                        producer.records_sent))
    (tree_py, out_py, stats_py, sent_py), (tree_nat, out_nat, stats_nat, sent_nat) = results
    assert sorted(tree_py) == sorted(tree_nat)
    for name in tree_py:
        assert tree_py[name] == tree_nat[name], name
    assert out_py == out_nat
    assert stats_py == stats_nat and sent_py == sent_nat
    return tree_nat, out_nat


def _lines(seed: int, count: int, *, keys: bool = False, sep: bytes = b"\t", width: int = 120) -> bytes:
    r = random.Random(seed)
    out = []
    for i in range(count):
        value = bytes(r.randrange(32, 127) for _ in range(r.randrange(0, width))).replace(b"\n", b"")
        if keys:
            key = b"" if r.random() < 0.05 else b"k%d" % r.randrange(50)
            out.append(key + sep + value)
        else:
            out.append(value)
        out.append(r.choice((b"\n", b"\n", b"\r\n")))
    if r.random() < 0.5 and out:
        out.pop()  # a last line without a newline
    return b"".join(out)


def _loop(data: bytes, parser: LineParser, **kw):
    def run(producer):
        loop = ProduceLoop(producer, "t", parser=parser, **kw)
        try:
            loop.run(io.BytesIO(data))
        except Exception as e:
            e.loop = loop
            raise
        return loop
    return run


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("batch_size", [100, 2000, 16384])
def test_plain_lines_sticky(tmp_path, native_module, codec, batch_size):  # noqa: F811
    data = _lines(batch_size, 3000)
    _run_both(tmp_path, native_module, {"t": 5}, _loop(data, LineParser()), batch_size=batch_size,
              compression_type=codec, max_request_size=20_000)


@pytest.mark.parametrize("idempotent", [True, False])
@pytest.mark.parametrize("partitions", [1, 12])
def test_keyed_lines(tmp_path, native_module, idempotent, partitions):  # noqa: F811
    data = _lines(partitions, 3000, keys=True, sep=b"::")
    parser = LineParser(parse_key=True, key_separator=b"::")
    _run_both(tmp_path, native_module, {"t": partitions}, _loop(data, parser), batch_size=700,
              enable_idempotence=idempotent)


def test_null_marker_and_ignore_error(tmp_path, native_module):  # noqa: F811
    data = b"k:v\nNULL:v2\nk2:NULL\nno separator\nNULL\n:\n" * 300
    parser = LineParser(parse_key=True, key_separator=b":", null_marker=b"NULL", ignore_error=True)
    _run_both(tmp_path, native_module, {"t": 3}, _loop(data, parser), batch_size=300)
    parser = LineParser(null_marker=b"")
    _run_both(tmp_path / "2", native_module, {"t": 3}, _loop(b"a\n\nb\n" * 500, parser), batch_size=300)


def test_explicit_partition(tmp_path, native_module):  # noqa: F811
    data = _lines(3, 2000, keys=True, sep=b":")
    _run_both(tmp_path, native_module, {"t": 4}, _loop(data, LineParser(parse_key=True, key_separator=b":"),
                                                       partition=2))
    _run_both(tmp_path / "2", native_module, {"t": 4}, _loop(data, LineParser(), partition=3))


@pytest.mark.parametrize("plain", [True, False])
def test_a_line_too_large(tmp_path, native_module, plain):  # noqa: F811
    lines = [b"k:%d" % i for i in range(5000)]
    lines[4500] = b"k:" + b"x" * 2000
    parser = LineParser() if plain else LineParser(parse_key=True, key_separator=b":")
    _, outcome = _run_both(tmp_path, native_module, {"t": 2}, _loop(b"\n".join(lines), parser),
                           max_request_size=1500)
    assert outcome[0] == "RecordTooLargeError"


def test_a_missing_separator(tmp_path, native_module):  # noqa: F811
    lines = [b"k%d\tv" % i for i in range(5000)]
    lines[3210] = b"no separator here"
    parser = LineParser(parse_key=True)
    _, outcome = _run_both(tmp_path, native_module, {"t": 2}, _loop(b"\n".join(lines), parser))
    assert outcome[0] == "InputRecordError" and "line number 3211" in outcome[1]


def test_a_long_line_across_reads(tmp_path, native_module):  # noqa: F811
    data = b"a\n" + b"y" * (3 << 20) + b"\nb\n"
    _run_both(tmp_path, native_module, {"t": 1}, _loop(data, LineParser()), max_request_size=8 << 20)


@pytest.mark.parametrize("seed", range(8))
def test_hostile_lines(tmp_path, native_module, seed):  # noqa: F811
    """Random bytes full of separators, line ends, NULs and bad UTF-8: the same records,
    or the same typed error with the same line number."""
    r = random.Random(seed)
    alphabet = [b"a", b"b", b":", b"\t", b"\r", b"\n", b"\n", b"\x00", b"\xff", b"\xc3", b"NUL", b":\t"]
    data = b"".join(r.choice(alphabet) for _ in range(r.randrange(2000, 20000)))
    parser = r.choice([LineParser(), LineParser(parse_key=True, key_separator=b":"),
                       LineParser(parse_key=True, key_separator=b":\t", null_marker=b"NUL",
                                  ignore_error=r.random() < 0.5),
                       LineParser(null_marker=b"a"), LineParser(parse_key=True, ignore_error=True)])
    _run_both(tmp_path, native_module, {"t": 3}, _loop(data, parser), batch_size=r.choice((100, 1000)),
              max_request_size=r.choice((120, 300, 100_000)))


@pytest.mark.parametrize("bad", [None, b"\xff\xfe:v\tk\tv", b"h1:v1,h2\tk\tv", b"no delimiter"])
def test_header_lines_and_static_headers(tmp_path, native_module, bad):  # noqa: F811
    """Lines with headers (parsed by the reference parser, sent through each path's batches),
    a header key that is not UTF-8, a pair without its separator, a missing delimiter."""
    lines = [b"h%d:v,x:\xc3\xa9\tk%d\tvalue %d" % (i % 3, i % 11, i) for i in range(3000)]
    if bad is not None:
        lines[2222] = bad
    parser = LineParser(parse_key=True, parse_headers=True, null_marker=b"N")
    _run_both(tmp_path, native_module, {"t": 4}, _loop(b"\n".join(lines), parser, headers=[("s", b"1")]),
              batch_size=800)


def test_json_lines(tmp_path, native_module):  # noqa: F811
    lines = [json.dumps({"key": f"k{i % 9}", "value": f"v{i}", "headers": [{"key": "h", "value": str(i)}],
                         "timestamp": 1_700_000_000_000 + (i * 7) % 1000,
                         "partition": i % 3 if i % 4 else None}).encode() for i in range(3000)]
    lines[1500] = b'{"value": {"base64": "AAEC/w=="}, "key": null}'
    lines[2900] = b'{"value": 5}'
    _run_both(tmp_path, native_module, {"t": 3}, _loop(b"\n".join(lines), None), batch_size=600)


def _items(seed: int, count: int) -> list:
    r = random.Random(seed)
    out = []
    for i in range(count):
        kind = r.randrange(8)
        value = None if r.random() < 0.05 else bytes(r.randrange(256) for _ in range(r.randrange(60)))
        key = bytes(r.randrange(256) for _ in range(r.randrange(1, 9)))
        if kind == 0:
            out.append(value)
        elif kind == 1:
            out.append((key, value))
        elif kind == 2:
            out.append((None, value))
        elif kind == 3:
            out.append((key, value, [("h", b"1"), ("ü", None), (b"raw\xff", b"x" * r.randrange(5))]))
        elif kind == 4:
            out.append((key, value, ()))
        elif kind == 5:
            out.append(bytearray(value or b""))
        elif kind == 6:
            out.append((memoryview(key), value))  # the reference path's record, in the middle
        else:
            out.append((key, value, (("\udcff-surrogate", b"s"),)))
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_send_many(tmp_path, native_module, codec):  # noqa: F811
    items = _items(7, 6000)
    _run_both(tmp_path, native_module, {"t": 7}, lambda p: p.send_many("t", items), batch_size=1000,
              compression_type=codec, max_request_size=50_000)


@pytest.mark.parametrize("idempotent", [True, False])
def test_send_many_send_and_send_values_mixed(tmp_path, native_module, idempotent):  # noqa: F811
    items = _items(8, 3000)

    def work(p):
        futures = []
        for i in range(0, len(items), 500):
            p.send_many("t", iter(items[i:i + 250]))
            p.send_values("t", [b"v%d" % j for j in range(100)])
            futures += [p.send("t", b"s%d" % j, key=b"k" if j % 2 else None, headers=[("a", b"b")])
                        for j in range(30)]
            p.send_many("u", items[i + 250:i + 500], partition=1)
            if i % 1000 == 0:
                p.flush()
        p.flush()
        return type("R", (), {"line_number": [f.get() for f in futures]})()
    _run_both(tmp_path, native_module, {"t": 5, "u": 2}, work, batch_size=900, enable_idempotence=idempotent)


def test_sequences_that_wrap(tmp_path, native_module):  # noqa: F811
    """An idempotent producer whose sequences pass INT32_MAX within a request: both paths
    wrap them to 0 as Kafka's incrementSequence does, batch by batch."""
    from plog.engine.storage.file_names import TopicPartition

    def work(p):
        p._sequences[TopicPartition("t", 0)] = (1 << 31) - 40
        p.send_values("t", [b"v%d" % j for j in range(3000)], partition=0)
        p.flush()

    _run_both(tmp_path, native_module, {"t": 1}, work, batch_size=300)


def test_bad_records(tmp_path, native_module):  # noqa: F811
    """Records the reference refuses when it encodes them: the same error at the same point."""
    for n, bad in enumerate([(b"k", "a str value"), (b"k", b"v", [("h", "a str header value")]), ("a str key", b"v"),
                             (b"k", b"v", [(1, b"x")])]):
        _run_both(tmp_path / str(n), native_module, {"t": 2},
                  lambda p, bad=bad: p.send_many("t", [b"a", (b"k", b"b"), bad, b"c"]))
    _run_both(tmp_path / "tuple", native_module, {"t": 2}, lambda p: p.send_many("t", [b"a", (1, 2, 3, 4)]))
    _run_both(tmp_path / "values", native_module, {"t": 2}, lambda p: p.send_values("t", [b"a", None]))
    _run_both(tmp_path / "big", native_module, {"t": 2},
              lambda p: p.send_many("t", [b"a", b"x" * 5000]), max_request_size=2000)


def test_murmur2_twin(native_module):  # noqa: F811
    from plog.engine.clients.partitioner import murmur2

    r = random.Random(3)
    for n in range(300):
        data = bytes(r.randrange(256) for _ in range(n % 37))
        assert native_module.murmur2(data) == murmur2(data)


@pytest.mark.parametrize("partition", [None, 2])
def test_open_batches_and_builder_slots_agree(tmp_path, native_module, partition):  # noqa: F811
    """After a fill that opened and closed batches in its slots (full ones, and ones closed
    before a record that did not fit), the producer's open batches are exactly the builders
    in the slots: a send after it goes into the same batch, none is lost."""
    from plog.engine.storage.file_names import TopicPartition

    dd = DataDir.init(tmp_path / "d", brokers=1)
    dd.create_topic("t", partitions=4)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(producer_module, "NATIVE", native_module)
        p = Producer(dd, linger_ms=NEVER, batch_size=700)
        parser = LineParser(parse_key=True, key_separator=b":")
        ProduceLoop(p, "t", parser=parser, partition=partition).run(io.BytesIO(_lines(5, 3000, keys=True, sep=b":")))
        slots = p._slots["t"]
        assert {tp.partition: b.builder for tp, b in p._open.items()} == \
            {i: s for i, s in enumerate(slots) if s is not None}
        p.send("t", b"after", key=b"k")
        p.close()
    assert p.records_sent == 3001
    assert sum(st[2] for st in p.stats.values()) == 3001 and all(tp.topic == "t" for tp in p.stats)
    assert isinstance(next(iter(p.stats)), TopicPartition)
