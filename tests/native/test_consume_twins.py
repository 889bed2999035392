"""``plog consume``'s output on both paths: the native renderer (``render_consume``,
native/src/consume_render.rs, a batch at a time through ``ConsumeLoop.rendered``) and the
reference loop (a ``ConsumerRecord`` per record, ``format_jsonl`` or a compiled template)
write byte-identical output, consume the same records and leave the consumer at the same
positions: for every partition of the corpus's Kafka log directories and for generated
partitions holding what the renderer must get right (binary and invalid UTF-8 keys, values
and header keys, null keys, values and header values, JSON escapes, every codec, control
and transactional batches, LogAppendTime, compaction gaps, legacy v0/v1 messages, several
segments), with ranges, counts and poll budgets that cut batches in the middle.

Most comparisons run the engine's loop in this process (the native module bound whatever
``PLOG_NATIVE`` says); a few run the CLI both ways (``native.active()`` False selects the
reference) and one pipes it into a reader that goes away.
"""

from __future__ import annotations

import io
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from native_twins import error_facts, mutate_region, native_module, record_files, v2_decode_args  # noqa: E402,F401

from cli_run import plog, plog_exe  # noqa: E402
from conftest import CORPUS, corpus_log_dirs  # noqa: E402
from plog.engine.clients.console_io import compile_template, template_batch_format  # noqa: E402
from plog.engine.clients.consumer import Consumer  # noqa: E402
from plog.engine.clients.consumer_loop import ConsumeLoop  # noqa: E402
from plog.engine.clients.record_io import (  # noqa: E402
    BatchPiece,
    ConsumerRecord,
    RenderedPoll,
    format_jsonl,
    jsonl_batch_format,
)
from plog.engine.cluster.data_dir import DataDir  # noqa: E402
from plog.engine.errors import EngineError  # noqa: E402
from plog.engine.offset_spec import parse_offset_range  # noqa: E402
from plog.engine.storage.file_names import TopicPartition  # noqa: E402
from plog.formats import default_record, native  # noqa: E402
from plog.formats.batches import BatchIterator  # noqa: E402
from plog.formats.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD  # noqa: E402
from plog.formats.control import ControlRecordType, encode_control_key, encode_end_txn_marker  # noqa: E402
from plog.formats.errors import FormatError  # noqa: E402
from plog.formats.legacy import encode_legacy_batch  # noqa: E402
from plog.formats.record_batch import LOG_APPEND_TIME, RecordBatch, encode_batch  # noqa: E402

TS = 1_700_000_000_000

#: Templates: kcat's tokens, each alone and together, escapes, a constant one.
TEMPLATES = ["%v\n", "%k\t%v\n", "%t %p %o %T %K %S [%h] %k=%s\\x1f\n", "%R%v", "%o\n", "%%literal only\\n",
             "%h|%h\n"]
FORMATS = ["jsonl", *TEMPLATES]

NASTY = [
    b"plain", b"", b"\x00\x01\xff\xfe", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82",
    b"\xf0\x9f\x98\x80", b"a\xc3(b", "h\u00e9llo \u20ac \U0001f600".encode(), b"\xef\xbf\xbd",
    b"new\nline\ttab\r\x08\x0c\x1f\x7f \"quoted\" back\\slash /", bytes(range(256)), bytes(range(128)) * 2, b'{"id":1,"k":"v"}' * 7,
]


def _v2_batches(codec: int, offset: int) -> tuple[list[bytes], int]:
    """Data batches (and commit/abort markers) over NASTY, from ``offset``; returns them and
    the next offset."""
    out = []
    for n, nasty in enumerate(NASTY):
        headers = ((nasty.decode("utf-8", "surrogateescape"), nasty), ("null", None), ("", b""), ("k", nasty))
        records = [
            (offset, TS + n, nasty, nasty, headers[: n % 5]),
            (offset + 1, TS - n, None, nasty, ()),
            (offset + 2, TS, nasty, None, (("k", None),)),
            (offset + 3, TS + 1, None, None, ()),
        ]
        if n % 4 == 2:  # a compacted batch: gaps between offsets, the last one kept
            records = [records[0], (offset + 2, *records[2][1:]), (offset + 5, *records[3][1:])]
        transactional = n % 3 == 1
        last = records[-1][0]
        out.append(encode_batch(
            records, base_offset=offset, compression_codec=codec, producer_id=7 if transactional else -1,
            producer_epoch=1 if transactional else -1, base_sequence=n if transactional else -1,
            is_transactional=transactional, partition_leader_epoch=n % 3 - 1,
            timestamp_type=LOG_APPEND_TIME if n % 5 == 3 else 0, log_append_time=TS + 9 if n % 5 == 3 else None,
            last_offset_delta=last - offset))
        offset = last + 1
        if transactional:
            kind = ControlRecordType.ABORT if n % 2 else ControlRecordType.COMMIT
            marker = (offset, TS, encode_control_key(kind), encode_end_txn_marker(3), ())
            out.append(encode_batch([marker], base_offset=offset, producer_id=7, producer_epoch=1,
                                    is_transactional=True, is_control=True))
            offset += 1
    return out, offset


def _legacy_batches(offset: int) -> tuple[list[bytes], int]:
    """v0 and v1 messages, plain and compressed wrappers, LogAppendTime included."""
    out = []
    for magic in (0, 1):
        for codec in (NONE, GZIP, SNAPPY, LZ4):
            records = [(offset + i, TS + i, NASTY[(i + codec) % len(NASTY)] if i % 2 else None,
                        NASTY[(i * 3 + magic) % len(NASTY)] if i % 3 else None) for i in range(3)]
            lat = magic == 1 and codec == GZIP
            out.append(encode_legacy_batch(records, magic=magic, compression_codec=codec,
                                           timestamp_type=LOG_APPEND_TIME if lat else 0,
                                           log_append_time=TS + 5 if lat else None))
            offset += 3
    return out, offset


def _write_partition(root: Path, name: str, segments: list[list[bytes]], first: int = 0) -> None:
    """A Kafka partition folder ``root/name``: each list of entries one segment file."""
    folder = root / name
    folder.mkdir(parents=True)
    base = first
    for entries in segments:
        (folder / f"{base:020d}.log").write_bytes(b"".join(entries))
        for entry in BatchIterator(memoryview(b"".join(entries))):
            base = (entry.last_offset if isinstance(entry, RecordBatch) else entry.offset) + 1


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    """A Kafka log directory: ``gen-0`` (legacy messages, then every codec's v2 batches, over
    three segments), ``gen-1`` (the uncompressed and zstd batches, from offset 1000) and
    ``gen-2`` (one batch)."""
    root = tmp_path_factory.mktemp("consume-twins") / "kafka-logs"
    legacy, offset = _legacy_batches(0)
    segments = [legacy]
    for codec in (NONE, GZIP, SNAPPY, LZ4, ZSTD):
        batches, offset = _v2_batches(codec, offset)
        if codec in (SNAPPY, ZSTD):
            segments.append([])
        segments[-1].extend(batches)
    _write_partition(root, "gen-0", segments)
    a, offset = _v2_batches(NONE, 1000)
    b, _ = _v2_batches(ZSTD, offset)
    _write_partition(root, "gen-1", [a + b], first=1000)
    _write_partition(root, "gen-2", [_v2_batches(NONE, 0)[0][:1]])
    # Partitions with a batch that does not decode in the middle: a records count one too
    # high (the records region runs out), a gzip stream cut short.
    good, offset = _v2_batches(NONE, 0)
    bad = bytearray(encode_batch([(offset + i, TS, b"k", b"v%d" % i) for i in range(3)], base_offset=offset))
    bad[57:61] = (4).to_bytes(4, "big")
    rest, _ = _v2_batches(NONE, offset + 3)
    _write_partition(root, "bad-0", [good + [bytes(bad)] + rest])
    bad = bytearray(encode_batch([(offset + i, TS, b"k", b"v%d" % i * 50) for i in range(3)], base_offset=offset,
                                 compression_codec=GZIP))
    _write_partition(root, "bad-1", [good + [bytes(bad[:-12] + bad[-4:])] + rest])
    return root


# -- the engine's loop, both ways ------------------------------------------------------------------


def _loop(path: Path, topic: str, rng: str, *, count=None, partitions=None, max_poll=None) -> ConsumeLoop:
    dd = DataDir.open(path)
    if max_poll is None:
        return ConsumeLoop.open(dd, topic, parse_offset_range(rng), count=count, partitions=partitions,
                                exit_at_end=True)
    consumer = Consumer(dd, auto_offset_reset="earliest", max_poll_records=max_poll)
    return ConsumeLoop(consumer, topic, parse_offset_range(rng), partitions=partitions, count=count,
                       exit_at_end=True)


def _run(loop: ConsumeLoop, chunks) -> tuple:
    """(output, records consumed, positions at the end, typed error or None) of a loop
    printing ``chunks``."""
    out = io.BytesIO()
    error = None
    try:
        for chunk in chunks:
            out.write(chunk)
    except FormatError as e:
        error = error_facts(e)
    finally:
        loop.close()
    return out.getvalue(), loop.consumed, dict(loop.consumer._positions), error


def _both(path: Path, topic: str, fmt: str, rng: str = "earliest", **kwargs) -> tuple:
    """(native, reference) results of consuming ``topic`` of ``path`` in ``fmt``."""
    assert native.active()
    batch_format = jsonl_batch_format() if fmt == "jsonl" else template_batch_format(fmt)
    assert batch_format is not None
    loop = _loop(path, topic, rng, **kwargs)
    native_run = _run(loop, loop.rendered(batch_format))
    render = format_jsonl if fmt == "jsonl" else compile_template(fmt)
    loop = _loop(path, topic, rng, **kwargs)
    reference_run = _run(loop, (render(rec) for rec in loop))
    return native_run, reference_run


def _topics(log_dir: Path) -> list[str]:
    """The topics ``log_dir`` holds a partition folder of (its metadata may name others)."""
    dd = DataDir.open(log_dir)
    return [t for t in dd.topics() if any(dd.partition_path(tp).is_dir() for tp in dd.partitions(t))]


def _partitions(log_dir: Path) -> list[tuple[str, int]]:
    dd = DataDir.open(log_dir)
    return [tp for t in _topics(log_dir) for tp in dd.readable_partitions(t)]


@pytest.mark.parametrize("log_dir", corpus_log_dirs(), ids=lambda p: str(p.relative_to(CORPUS)))
def test_corpus_partitions(native_module, log_dir):
    """Every partition of every corpus log directory, read whole in JSON lines and in two
    templates, and two ranges of it."""
    for topic, partition in _partitions(log_dir):
        for fmt, rng in (("jsonl", "earliest"), (TEMPLATES[2], "earliest"), ("%v\n", "earliest"),
                         ("jsonl", "+1:+3"), (TEMPLATES[2], "-2")):
            native_run, reference_run = _both(log_dir, topic, fmt, rng, partitions=[partition])
            assert native_run == reference_run, (topic, partition, fmt, rng)


def test_corpus_topics_whole(native_module):
    """Each corpus topic with all its partitions at once (the poll's partition order and
    budget decide the interleaving), small poll budgets included."""
    seen = 0
    for log_dir in corpus_log_dirs():
        for topic in _topics(log_dir):
            for max_poll in (None, 7):
                native_run, reference_run = _both(log_dir, topic, "jsonl", max_poll=max_poll)
                assert native_run == reference_run, (log_dir, topic, max_poll)
                seen += native_run[1]
    assert seen > 1000


@pytest.mark.parametrize("fmt", FORMATS, ids=repr)
def test_generated_partitions(native_module, generated, fmt):
    out = {}
    for max_poll in (None, 1, 5, 13):
        native_run, reference_run = _both(generated, "gen", fmt, max_poll=max_poll)
        assert native_run == reference_run, max_poll
        out[max_poll] = native_run
    assert out[None][1] > 300
    if fmt == "jsonl":
        assert len({o[0] for o in out.values()}) >= 2  # the budgets interleave the partitions differently


CUTS = [
    ("earliest", None, None), ("5:+7", None, None), ("-9", None, None), ("earliest", 1, None), ("earliest", 6, None),
    ("13:", 23, None), ("earliest", 0, None), ("latest", None, None), ("@%d" % (TS + 2), None, None),
    ("30:+40", None, 4), ("earliest", 17, 3), ("1000:1010", None, None), ("2:3", None, None),
]


@pytest.mark.parametrize("rng,count,max_poll", CUTS, ids=str)
@pytest.mark.parametrize("fmt", ["jsonl", TEMPLATES[2]], ids=repr)
def test_ranges_and_counts_cut_batches(native_module, generated, fmt, rng, count, max_poll):
    """Range starts and ends, counts and poll budgets inside batches: the same records, the
    same positions to go on from (what a group would commit)."""
    for partitions in (None, [0], [1, 2]):
        native_run, reference_run = _both(generated, "gen", fmt, rng, count=count, partitions=partitions,
                                          max_poll=max_poll)
        assert native_run == reference_run, partitions


@pytest.mark.parametrize("partition", [0, 1])
def test_a_batch_that_does_not_decode(native_module, generated, partition):
    """The polls before it print, the one that reaches it fails with the reference's error
    (same class, reason and file position) on both paths."""
    for max_poll in (None, 4, 9):
        native_run, reference_run = _both(generated, "bad", "jsonl", partitions=[partition], max_poll=max_poll)
        assert native_run == reference_run
        assert native_run[3] is not None and (native_run[1] > 0) == (max_poll is not None)


def test_the_native_renderer_runs(native_module, generated, monkeypatch):
    """The v2 batches go through ``render_consume``, not the per-record fallback (which only
    legacy batches take)."""
    calls = []
    real = native_module.render_consume
    monkeypatch.setattr(native_module, "render_consume", lambda *a: calls.append(a) or real(*a))
    native_run, reference_run = _both(generated, "gen", "jsonl", partitions=[1])
    assert native_run == reference_run and len(calls) >= 2 * len(NASTY)


def test_a_caller_that_fails_mid_chunk_gets_the_chunk_again(native_module, generated):
    """At least once: the chunks the caller was done with are consumed, the one it failed
    with is sought back whole, so the next loop's output goes on right after the former."""
    loop = _loop(generated, "gen", "earliest", partitions=[1], max_poll=5)
    chunks = loop.rendered(jsonl_batch_format())
    first = next(chunks)
    assert first.count(b"\n") == 5
    next(chunks)
    with pytest.raises(KeyboardInterrupt):
        chunks.throw(KeyboardInterrupt)
    loop.close()
    assert loop.consumed == 5
    again = _loop(generated, "gen", "%d" % loop.consumer._positions[("gen", 1)], partitions=[1])
    rest = _run(again, again.rendered(jsonl_batch_format()))[0]
    whole = _both(generated, "gen", "jsonl", partitions=[1])[1][0]
    assert whole == first + rest


def test_read_committed_is_the_reference_loop(native_module, generated):
    """read_committed filters whole transactions on the reference loop (the CLI picks it;
    ``test_cli_both_ways`` compares); the batch path refuses it."""
    consumer = Consumer(DataDir.open(generated), isolation_level="read_committed")
    with pytest.raises(EngineError, match="read_uncommitted only"):
        consumer.poll_rendered(0, jsonl_batch_format())
    consumer.close()


# -- the CLI, both ways --------------------------------------------------------------------------

CLI_CASES = [
    ("-J",), ("--format", "jsonl"), (), ("-f", "%t/%p@%o %k=%v\\n"), ("-K", ":"), ("-o", "3:+20", "-f", "jsonl"),
    ("-c", "17",), ("-p", "1", "-o", "-5"), ("--format", "json"), ("--property", "print.key=true"),
    ("--isolation-level", "read_committed", "-J"),
]


@pytest.mark.parametrize("args", CLI_CASES, ids=" ".join)
def test_cli_both_ways(native_module, generated, capsysbinary, monkeypatch, args):
    argv = ["consume", "gen", "-e", "-d", str(generated), *args]
    native_run = plog(capsysbinary, *argv)
    monkeypatch.setattr(native, "active", lambda: False)
    reference_run = plog(capsysbinary, *argv)
    monkeypatch.undo()
    assert native_run == reference_run
    assert native_run[0] == 0 and native_run[1]


def test_a_reader_that_goes_away(tmp_path):
    """`plog consume ... | head -1` on the path the environment chooses and on the reference:
    the pipe closes under plog after one line, which ends it quietly, exit 0."""
    data = tmp_path / "d"
    lines = b"".join(b"record %07d %s\n" % (i, b"x" * 90) for i in range(60_000))  # 6 MB: more than a pipe holds
    run = subprocess.run([plog_exe(), "produce", "big", "-q", "-d", str(data)], input=lines, capture_output=True)
    assert run.returncode == 0, run.stderr
    for env in ({}, {"PLOG_NATIVE": "0"}):
        for fmt in ("jsonl", "%v\n"):
            p = subprocess.Popen([plog_exe(), "consume", "big", "-e", "-q", "-f", fmt, "-d", str(data)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                 env={**_env(), **env})
            assert p.stdout.readline()
            p.stdout.close()
            err = p.stderr.read().decode()
            assert p.wait(timeout=120) == 0 and err == "", (env, fmt, err)


def _env() -> dict:
    return {k: v for k, v in os.environ.items() if k != "PLOG_NATIVE"}


# -- hostile regions ------------------------------------------------------------------------------


def _reference_render(fmt, region: bytes, count: int, base_offset: int, base_ts: int, lat) -> bytes:
    records = default_record.reference_decode_records(region, count, base_offset, base_ts, lat)
    tt = "LogAppendTime" if lat is not None else "CreateTime"
    return b"".join(fmt.record(ConsumerRecord("t", 3, r.offset, r.timestamp, tt, r.key, r.value, r.headers))
                    for r in records)


def _outcome(fn, *args):
    try:
        return "ok", fn(*args)
    except FormatError as e:
        return error_facts(e)


def _native_render(fmt, region: bytes, count: int, base_offset: int, base_ts: int, lat) -> bytes:
    output = native.module.ConsumeOutput()
    try:
        got = native.module.render_consume(fmt.compiled("t", 3), output, region, count, base_offset, base_ts, lat,
                                           0, -(1 << 100), 1 << 100, 1 << 40)
    except native.NativeFormatError as e:
        assert len(output) == 0
        raise native.typed_error(e) from None
    assert got[7] is False  # the window holds every offset
    return output.take()


#: The campaign's size: a short one here; ``PLOG_CONSUME_FUZZ=100000`` runs the long one
#: (``PLOG_FUZZ_SEED`` replays one).
MUTATIONS = int(os.environ.get("PLOG_CONSUME_FUZZ", "3000"))


def test_mutated_regions_agree_with_the_reference(native_module):
    """Random mutations of real records regions (and of their counts and bases) through the
    renderer: the reference's output exactly, or its typed error."""
    seed = int(os.environ.get("PLOG_FUZZ_SEED", random.randrange(1 << 30)))
    print(f"PLOG_FUZZ_SEED={seed}")
    rnd = random.Random(seed)
    regions = []
    for path in record_files(CORPUS)[:60]:
        try:
            for batch in BatchIterator(memoryview(path.read_bytes())):
                if isinstance(batch, RecordBatch) and (args := v2_decode_args(batch)) is not None:
                    regions.append(args)
                    if len(regions) % 50 == 0:
                        break
        except FormatError:
            continue
    regions.append((b"".join(_v2_region(i) for i in range(3)), 3, 5, TS, None))
    assert len(regions) > 20
    formats = [jsonl_batch_format(), *(template_batch_format(t) for t in TEMPLATES[:4])]
    errors = 0
    for _ in range(MUTATIONS):
        payload, count, base_offset, base_ts, lat = rnd.choice(regions)
        payload, count = mutate_region(rnd, payload, count)
        if rnd.random() < 0.1:
            base_offset = rnd.choice([0, -1, (1 << 63) - 1, -(1 << 63)])
            base_ts = rnd.choice([0, -1, (1 << 63) - 1, -(1 << 63)])
        fmt = rnd.choice(formats)
        ref = _outcome(_reference_render, fmt, payload, count, base_offset, base_ts, lat)
        nat = _outcome(_native_render, fmt, payload, count, base_offset, base_ts, lat)
        assert nat == ref, (payload.hex(), count, base_offset, base_ts, lat)
        errors += ref[0] != "ok"
    assert MUTATIONS // 10 < errors < MUTATIONS


def test_windows_agree_with_the_python_window(native_module):
    """``render_consume``'s window (skip, stop, budget, range end, count) gives what the
    per-record window of legacy batches (``RenderedPoll._take_records``) gives over the same
    records, for random windows over regions with offset gaps."""
    rnd = random.Random(7)
    formats = [jsonl_batch_format(), template_batch_format(TEMPLATES[2])]
    for batch in _v2_batches(NONE, 100)[0]:
        b = RecordBatch(memoryview(batch))
        if b.is_control:
            continue
        region, count = b.records_payload(), b.records_count
        lat = b.max_timestamp if b.timestamp_type == LOG_APPEND_TIME else None
        records = default_record.reference_decode_records(region, count, b.base_offset, b.base_timestamp, lat)
        offsets = [r.offset for r in records]
        around = list(range(offsets[0] - 1, offsets[-1] + 2))
        for _ in range(40):
            fmt = rnd.choice(formats)
            index = rnd.randrange(len(records) + 1)
            lo, hi = sorted(rnd.sample(around, 2))
            hi = rnd.choice([hi, 1 << 62])
            max_take = rnd.randint(1, len(records) + 1)
            end = rnd.choice([None, rnd.choice(around)])
            left = rnd.choice([None, 0, 1, 2, 5])
            piece = BatchPiece(b, None, records)
            piece.index = index
            want = RenderedPoll(fmt)._take_records(TopicPartition("gen", 0), piece, lo, hi, max_take, end, left)
            output = native_module.ConsumeOutput()
            got = native_module.render_consume(fmt.compiled("gen", 0), output, region, count, b.base_offset,
                                               b.base_timestamp, lat, index, lo, hi, max_take, end, left)
            assert (output.take(), *got[:-1]) == want and got[-1] is False, (index, lo, hi, max_take, end, left)


def _v2_region(i: int) -> bytes:
    batch = encode_batch([(i, TS + i, NASTY[i], NASTY[-1 - i], ((NASTY[i + 2].decode("utf-8", "surrogateescape"),
                                                                NASTY[i]),))])
    return batch[61:]
