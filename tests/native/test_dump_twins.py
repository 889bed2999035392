"""``plog dump``'s record lines on both paths: the native renderer (``render_dump_records``,
native/src/dump_text.rs) and the reference loop of engine/inspect/dump_render.py give
byte-identical text for every corpus segment and for generated segments holding what the
renderer must get right (binary keys, malformed UTF-8 by the JDK's rules, headers with null
values, null keys and values, every codec, control and transactional batches).

Each dump runs in this process through plog's real entry point, twice: with the native
module bound (formats/native.py, whatever ``PLOG_NATIVE`` says), and with ``native.active()``
saying False, which selects the reference renderer. Only the renderer differs between the
two runs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from native_twins import native_module  # noqa: E402,F401

from cli_run import plog  # noqa: E402
from conftest import CORPUS, corpus_files, distinct_contents  # noqa: E402
from plog.formats import java, native  # noqa: E402
from plog.formats.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD  # noqa: E402
from plog.formats.control import ControlRecordType, encode_control_key, encode_end_txn_marker  # noqa: E402
from plog.formats.record_batch import LOG_APPEND_TIME, encode_batch  # noqa: E402

LOG_FILES = distinct_contents(corpus_files(lambda name: name.endswith(".log")))

TS = 1_700_000_000_000

# Byte strings Java decodes differently from Python's "replace" handler, or that are
# valid but far from ASCII: each becomes a key, a value and a header key below.
NASTY = [
    b"plain", b"", b"\x00\x01\xff\xfe", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xed\xbf\xbf\xed\xa0\x80",
    b"\xf0\x80\x80\xaf", b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80", b"\xe2\x82", b"\xe2\x82\xac\xe2",
    b"\xf0\x9f\x98", b"\xf0\x9f\x98\x80", b"\xf0\x9f", b"\xf1", b"\xe0\xa0", b"\xc3", b"a\xc3(b", b"\xe1\x80\xc0",
    b"\xf0\x90\x80\xc0", b"\xf0\x90\xc0", b"\xf4\x8f\xbf\xbf", b"\x80\x80\xbf", "h\u00e9llo \u20ac \U0001f600".encode(),
    b"\xef\xbf\xbd", b"new\nline\ttab\r", bytes(range(256)),
]


def _data_batches(codec: int) -> list[bytes]:
    out, offset = [], 0
    for n, nasty in enumerate(NASTY):
        headers = ((java.utf8_decode(b"h") if n % 3 else nasty.decode("utf-8", "surrogateescape"), nasty),
                   ("null", None), ("", b""))
        records = [
            (offset, TS + n, nasty, nasty, headers[: n % 4]),
            (offset + 1, TS - n, None, nasty, ()),
            (offset + 2, TS, nasty, None, (("k", None),)),
            (offset + 3, TS + 1, None, None, ()),
        ]
        transactional = n % 5 == 1
        out.append(encode_batch(
            records, base_offset=offset, compression_codec=codec,
            producer_id=7 if n % 2 else -1, producer_epoch=1 if n % 2 else -1,
            base_sequence=(2**31 - 2) if n % 4 == 1 else (n if n % 2 else -1), is_transactional=transactional,
            timestamp_type=LOG_APPEND_TIME if n % 7 == 3 else 0, log_append_time=TS + 9 if n % 7 == 3 else None))
        offset += 4
        if n % 6 == 2:
            # A compacted batch (offsets missing inside it) and a gap before the next batch:
            # the dump's continuity report must come out the same from the native pass.
            kept = [(offset + d, TS + d, b"k%d" % d, nasty, ()) for d in (0, 2, 3, 7)]
            out.append(encode_batch(kept, base_offset=offset, compression_codec=codec))
            offset += 11
        if transactional:
            marker = (offset, TS, encode_control_key(ControlRecordType.COMMIT), encode_end_txn_marker(3), ())
            out.append(encode_batch([marker], base_offset=offset, producer_id=7, producer_epoch=1,
                                    is_transactional=True, is_control=True))
            offset += 1
    return out


def _generated(tmp_path_factory, codec: int) -> Path:
    path = tmp_path_factory.mktemp(f"codec{codec}") / "00000000000000000000.log"
    path.write_bytes(b"".join(_data_batches(codec)))
    return path


def _dump_both(capsys, monkeypatch, module, *args) -> tuple:
    """(native run, reference run) of ``plog dump ARGS``: (exit code, stdout, stderr) each."""
    assert native.module is module and native.active()
    native_run = plog(capsys, "dump", *args)
    # The units bound at import (walk, decode) keep their path; the renderer asks active().
    monkeypatch.setattr(native, "active", lambda: False)
    reference_run = plog(capsys, "dump", *args)
    monkeypatch.undo()
    return native_run, reference_run


MODES = [("--print-data-log",), ("--deep-iteration",), ("--print-data-log", "--skip-record-metadata"),
         ("--print-data-log", "--kafka-version", "3"), ("--print-data-log", "--format", "jsonl")]


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
@pytest.mark.parametrize("mode", MODES, ids=" ".join)
def test_generated_segment(native_module, capsys, monkeypatch, tmp_path_factory, codec, mode):
    path = _generated(tmp_path_factory, codec)
    native_run, reference_run = _dump_both(capsys, monkeypatch, native_module, *mode, str(path))
    assert native_run == reference_run
    line = '"type":"record"' if "jsonl" in mode else "| offset: "
    assert native_run[0] == 0 and native_run[1].count(line) >= 4 * len(NASTY) * (mode[-1] != "--skip-record-metadata")
    if "jsonl" in mode:
        assert '{"type":"non-consecutive-offsets","file":' in native_run[1] and '"previous":13,"next":15}' in native_run[1]
    elif "--skip-record-metadata" not in mode:
        assert "Non-consecutive offsets" in native_run[2] and "  13 is followed by 15" in native_run[2]


def test_the_native_renderer_runs(native_module, capsys, monkeypatch, tmp_path):
    """The generated segments go through the native renderer, not its fallback: ``None``
    (the fallback) only for a header key that is not valid UTF-8."""
    from plog.formats.batches import BatchIterator

    buf = b"".join(_data_batches(NONE))
    rendered = fallbacks = 0
    for batch in BatchIterator(memoryview(buf)):
        records = batch.records()
        text = native_module.render_dump_records(records, [-1] * len(records), "CreateTime", True)
        escaped = any(0xDC80 <= ord(c) <= 0xDCFF for r in records for k, _ in r.headers for c in k)
        if text is None:
            fallbacks += 1
            assert escaped
        else:
            rendered += 1
    assert rendered > fallbacks > 0


def test_the_batch_pass_runs_and_falls_back(native_module):
    """``render_dump_batch`` renders every generated data batch whose header keys are UTF-8
    with the same lines, offsets and gaps as decoding plus ``render_dump_records``, and
    gives None (the reference path) for the rest and for records that do not decode."""
    from plog.formats.batches import BatchIterator
    from plog.formats.record_batch import RECORDS_OFFSET

    rendered = 0
    for batch in BatchIterator(memoryview(b"".join(_data_batches(NONE)))):
        if batch.is_control:
            continue
        records = batch.records()
        lap = batch.max_timestamp if batch.timestamp_type else None
        args = (batch.records_count, batch.base_offset, batch.base_timestamp, lap, batch.base_sequence, "CreateTime")
        got = native_module.render_dump_batch(bytes(batch.buffer[RECORDS_OFFSET:]), *args, True)
        expected = native_module.render_dump_records(records, _seqs(batch, records), "CreateTime", True)
        if expected is None:
            assert got is None
            continue
        rendered += 1
        offsets = [r.offset for r in records]
        gaps = [(a, b) for a, b in zip(offsets, offsets[1:]) if b != a + 1]
        assert got == (expected, offsets[0], offsets[-1], gaps)
        # A records region cut short, or with a byte too many, is the reference's to report.
        region = bytes(batch.buffer[RECORDS_OFFSET:])
        assert native_module.render_dump_batch(region[:-1], *args, True) is None
        assert native_module.render_dump_batch(region + b"\x00", *args, True) is None
    assert rendered > 20


def test_the_jsonl_batch_pass_runs(native_module):
    """``render_dump_jsonl_batch`` writes what ``JsonRenderer.records`` writes for every
    generated data batch whose header keys are UTF-8 (None, the reference path, for the rest)."""
    from plog.engine.inspect.dump_options import DumpOptions
    from plog.engine.inspect.dump_render import JsonRenderer
    from plog.formats.batches import BatchIterator
    from plog.formats.record_batch import RECORDS_OFFSET

    lines: list[str] = []
    renderer = JsonRenderer(DumpOptions(), lines.append, lines.append)
    prefix = b'{"type":"record","file":"/d/0.log",'
    rendered = 0
    for codec in (NONE, GZIP):
        for batch in BatchIterator(memoryview(b"".join(_data_batches(codec)))):
            if batch.is_control:
                continue
            records = batch.records()
            lap = batch.max_timestamp if batch.timestamp_type else None
            tt = "LogAppendTime" if batch.timestamp_type else "CreateTime"
            got = native_module.render_dump_jsonl_batch(
                batch.records_payload() if codec else bytes(batch.buffer[RECORDS_OFFSET:]), batch.records_count,
                batch.base_offset, batch.base_timestamp, lap, batch.base_sequence, tt, prefix)
            lines.clear()
            renderer.records("/d/0.log", batch, records, None, _seqs(batch, records))
            if any(0xDC80 <= ord(c) <= 0xDCFF for r in records for k, _ in r.headers for c in k):
                assert got is None
                continue
            rendered += 1
            offsets = [r.offset for r in records]
            gaps = [(a, b) for a, b in zip(offsets, offsets[1:]) if b != a + 1]
            assert got == ("\n".join(lines), offsets[0], offsets[-1], gaps)
    assert rendered > 40


def _seqs(batch, records):
    from plog.engine.inspect.dump import _sequences

    return _sequences(batch, [r.offset for r in records])


def test_jdk_decoding_of_every_short_sequence(native_module):
    """Every 1-, 2- and 3-byte string over bytes that matter to UTF-8 decodes as formats/java.py does."""
    alphabet = [0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xED,
                0xEF, 0xF0, 0xF1, 0xF4, 0xF5, 0xF7, 0xF8, 0xFF]
    samples = [bytes([a]) for a in alphabet]
    samples += [bytes([a, b]) for a in alphabet for b in alphabet]
    samples += [bytes([a, b, c]) + tail for a in alphabet[9:] for b in alphabet[3:9] + alphabet[:2]
                for c in alphabet for tail in (b"", b"\x80", b"z", b"\x80\x80")]
    for raw in samples:
        line = native_module.render_dump_records([(0, 0, raw, None, ())], [-1], "CreateTime", True)
        assert line == f"| offset: 0 CreateTime: 0 keySize: {len(raw)} valueSize: -1 sequence: -1 headerKeys: [] " \
                       f"key: {java.utf8_decode(raw)}", raw.hex()


@pytest.mark.parametrize("path", LOG_FILES, ids=lambda p: str(p.relative_to(CORPUS)))
def test_corpus_segment_print_data_log(native_module, capsys, monkeypatch, path):
    native_run, reference_run = _dump_both(capsys, monkeypatch, native_module, "--print-data-log", str(path))
    assert native_run == reference_run


@pytest.mark.parametrize("mode", MODES[1:], ids=" ".join)
def test_corpus_segments_other_modes(native_module, capsys, monkeypatch, mode):
    for path in map(str, LOG_FILES):
        native_run, reference_run = _dump_both(capsys, monkeypatch, native_module, *mode, path)
        assert native_run == reference_run, path


def test_the_corpus_has_segments(corpus):
    assert len(LOG_FILES) > 20
