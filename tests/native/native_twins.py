"""What the differential tests and the fuzz campaign compare: everything a batch walk and
a records decode show, on the reference path and on the native one.

An *outcome* is plain data (tuples, bytes, ints, strings): the batches a walk yields with
every header field and their bytes, ``valid_end``, the trailing bytes, and the error it
stopped at as ``(class name, reason, position)``; the records (or heads) a decode returns,
or its error. Two paths agree when their outcomes are equal. Only plog's typed errors
(:class:`FormatError`) are outcomes: anything else raised propagates and fails the test.

Used by test files in this folder (``sys.path`` gets the folder first, as tests/cli does;
they import the :func:`native_module` fixture from here) and by ``fuzz.py``, the long
campaign.
"""

from __future__ import annotations

import importlib
import os
import random
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from plog.engine.inspect.dump_options import DumpOptions
from plog.engine.inspect.dump_render import JsonRenderer
from plog.formats import default_record, native
from plog.formats.batches import BatchIterator
from plog.formats.errors import FormatError
from plog.formats.native import typed_error
from plog.formats.record_batch import RECORDS_OFFSET, TIMESTAMP_TYPE_MASK, RecordBatch

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS) not in sys.path:  # conftest's CORPUS lives in tests/
    sys.path.insert(0, str(TESTS))


def load_native():
    """``plog._native``, or None with the reason it does not import."""
    try:
        return importlib.import_module("plog._native"), ""
    except ImportError as e:
        return None, str(e)


@pytest.fixture(scope="module")
def native_module():
    """``plog._native``, bound into formats/native.py for the test module.

    The twins are compared whatever ``PLOG_NATIVE`` says (it chooses the path plog runs on,
    not what these tests compare), so the module is loaded here and bound where the formats
    modules' native functions look for it. Without a build the tests skip, saying why, unless
    ``PLOG_REQUIRE_NATIVE`` is set (CI): then a missing build is a failure."""
    module, why = load_native()
    if module is None:
        if os.environ.get("PLOG_REQUIRE_NATIVE", "") not in ("", "0"):
            pytest.fail(f"PLOG_REQUIRE_NATIVE is set but the native module does not import: {why}")
        pytest.skip(f"the native module plog._native is not built ({why}); `pip install -e .` builds it when "
                    "cargo is on PATH (PLOG_REQUIRE_NATIVE=1 makes this a failure)")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(native, "module", module)
        mp.setattr(native, "NativeFormatError", module.NativeFormatError)
        yield module


#: The attributes of a RecordBatch an outcome records (every header field and the position).
V2_FIELDS = tuple(s for s in RecordBatch.__slots__ if s != "buffer")
LEGACY_FIELDS = ("position", "offset", "message_size", "crc", "magic", "attributes", "timestamp", "key", "value")

#: Keeps the fuzz cheap: a hostile batch may claim up to this much decompressed data.
MAX_DECOMPRESSED = 4 * 1024 * 1024


def error_facts(e: FormatError) -> tuple:
    return (type(e).__name__, e.reason, e.position)


def batch_facts(batch) -> tuple:
    if isinstance(batch, RecordBatch):
        return ("v2", bytes(batch.buffer), *(getattr(batch, f) for f in V2_FIELDS))
    return ("legacy", bytes(batch.buffer), *(getattr(batch, f) for f in LEGACY_FIELDS))


def walk_outcome(iterate, buf, **kwargs) -> tuple[tuple, list]:
    """``(outcome, batches)`` of walking ``buf`` with ``iterate`` (``BatchIterator._iter_reference``
    or ``BatchIterator._iter_native``); the batches are returned for the decode comparisons."""
    it = BatchIterator(buf, **kwargs)
    batches, error = [], None
    try:
        for batch in iterate(it):
            batches.append(batch)
    except FormatError as e:
        error = error_facts(e)
    return (tuple(map(batch_facts, batches)), it.valid_end, it.trailing, error), batches


def outcome(fn, *args):
    """``("ok", result)`` or the typed error's facts."""
    try:
        return "ok", fn(*args)
    except FormatError as e:
        return error_facts(e)


def v2_decode_args(batch: RecordBatch):
    """``(payload, count, base_offset, base_timestamp, log_append_time)`` as
    ``RecordBatch.records`` hands them to decode_records, or None when the payload does not
    decompress (the same Python code on both paths: nothing to compare)."""
    try:
        payload = batch.records_payload(MAX_DECOMPRESSED)
    except FormatError:
        return None
    log_append_time = batch.max_timestamp if batch.attributes & TIMESTAMP_TYPE_MASK else None
    return payload, batch.records_count, batch.base_offset, batch.base_timestamp, log_append_time


def decode_outcomes(args) -> tuple[tuple, tuple]:
    """The reference's and the native twin's outcomes of decode_records and record_heads."""
    payload, count, base_offset, base_ts, lat = args
    ref = (outcome(default_record.reference_decode_records, payload, count, base_offset, base_ts, lat),
           outcome(default_record.reference_record_heads, payload, count, base_offset, base_ts))
    nat = (outcome(default_record._native_decode_records, payload, count, base_offset, base_ts, lat),
           outcome(default_record._native_record_heads, payload, count, base_offset, base_ts))
    return ref, nat


def dump_batch_matches(module, args, base_sequence: int) -> None:
    """``render_dump_batch`` over a decode's arguments gives None (the dump then takes the
    reference path) or exactly the reference's lines, offsets and gaps; never a record
    the reference's decode refuses."""
    payload, count, base_offset, base_ts, lat = args
    if not 0 < count < 1 << 63:
        return  # the dump never hands these to the batch pass
    got = module.render_dump_batch(payload, count, base_offset, base_ts, lat, base_sequence, "CreateTime", True)
    if got is None:
        return
    records = default_record.reference_decode_records(payload, count, base_offset, base_ts, lat)
    offsets = [r[0] for r in records]
    sequences = [-1 if base_sequence < 0 else (s - (1 << 31) if (s := base_sequence + o - base_offset) > (1 << 31) - 1
                                               else s) for o in offsets]
    assert got[0] == module.render_dump_records(records, sequences, "CreateTime", True)
    assert got[1:] == (offsets[0], offsets[-1], [(a, b) for a, b in zip(offsets, offsets[1:]) if b != a + 1])
    # The --format jsonl twin takes and declines the same batches.
    prefix = b'{"type":"record","file":"f",'
    as_json = module.render_dump_jsonl_batch(payload, count, base_offset, base_ts, lat, base_sequence, "CreateTime",
                                             prefix)
    assert as_json is not None and as_json[1:] == got[1:]
    lines: list[str] = []
    JsonRenderer(DumpOptions(), lines.append, lines.append).records(
        "f", SimpleNamespace(timestamp_type=0, is_control=False),
        [SimpleNamespace(offset=r[0], timestamp=r[1], key=r[2], value=r[3], headers=r[4]) for r in records],
        None, sequences)
    assert as_json[0] == "\n".join(lines)


def native_walk(module, buf, *, limit: int = 7, **kwargs):
    """The native unit on its own (``walk_entries`` with checksums), walked to its end a few
    entries a call: ``(entries, trailing, fault)``."""
    entries, pos = [], kwargs.pop("start", 0)
    end = kwargs.pop("end", None)
    while pos is not None:
        headers, crc_ok, next_pos, trailing, fault = module.walk_entries(buf, pos, end, verify_crc=True, limit=limit,
                                                                         **kwargs)
        assert len(crc_ok) == len(headers)
        for header, ok in zip(headers, crc_ok):
            entries.append((pos, pos + 12 + header[1], header, bool(ok)))
            pos += 12 + header[1]
        pos = next_pos
    return entries, trailing, fault


def unit_matches_reference(module, buf, ref_outcome, ref_batches, **kwargs) -> None:
    """Assert that ``walk_entries`` (checksums on) reports what the reference walk showed:
    the same entries, header fields, checksum validity, trailing bytes and error."""
    base = kwargs.get("base_position", 0)
    entries, trailing, fault = native_walk(module, buf, **kwargs)
    assert len(entries) == len(ref_batches)
    for (start, stop, header, crc_ok), batch in zip(entries, ref_batches):
        assert (base + start, stop - start) == (batch.position, batch.size_in_bytes)
        if isinstance(batch, RecordBatch):
            assert header == tuple(getattr(batch, f) for f in V2_FIELDS[1:])
        else:
            assert header == (batch.offset, batch.message_size, batch.crc, batch.magic, batch.attributes,
                              batch.timestamp)
        assert crc_ok == batch.is_valid()
    _, _, ref_trailing, ref_error = ref_outcome
    assert trailing == (tuple(ref_trailing) if ref_trailing else None)
    assert (None if fault is None else _fault_facts(fault)) == ref_error


def _fault_facts(fault) -> tuple:
    return error_facts(typed_error(fault))


def compare_segment(module, buf, **kwargs) -> int:
    """Walk ``buf`` on both paths, compare; decode every v2 batch's records on both, compare.
    Returns how many outcomes were errors (a fuzz campaign's reach)."""
    ref, ref_batches = walk_outcome(BatchIterator._iter_reference, buf, **kwargs)
    nat, _ = walk_outcome(BatchIterator._iter_native, buf, **kwargs)
    assert nat == ref
    int64 = range(-(1 << 63), 1 << 63)
    if all(v is None or v in int64 for v in kwargs.values()) and kwargs.get("base_position", 0) + len(buf) in int64:
        unit_matches_reference(module, buf, ref, ref_batches, **kwargs)  # the unit takes int64s
    errors = ref[3] is not None
    for batch in ref_batches:
        if isinstance(batch, RecordBatch) and (args := v2_decode_args(batch)) is not None:
            ref_dec, nat_dec = decode_outcomes(args)
            assert nat_dec == ref_dec, (batch.position, args[1])
            errors += ref_dec[0][0] != "ok"
            dump_batch_matches(module, args, batch.base_sequence)
    return errors


# -- mutations ------------------------------------------------------------------------


def mutate(rnd: random.Random, data: bytes, hot: list[int] = ()) -> bytes:
    """1-4 random edits of ``data``: a byte set or bit-flipped (often in a batch or record
    header, listed in ``hot``), bytes inserted, removed, or the tail cut."""
    b = bytearray(data)
    for _ in range(rnd.randint(1, 4)):
        kind = rnd.randrange(6)
        if not b:
            b.append(rnd.getrandbits(8))
        elif kind <= 1:
            at = rnd.choice(hot) + rnd.randrange(64) if hot and rnd.random() < 0.85 else rnd.randrange(len(b))
            at = min(at, len(b) - 1)
            b[at] = rnd.getrandbits(8) if kind == 0 else b[at] ^ (1 << rnd.randrange(8))
        elif kind == 2:
            b[rnd.randrange(len(b) + 1):rnd.randrange(len(b) + 1)] = rnd.randbytes(rnd.randrange(1, 9))
        elif kind == 3:
            at = rnd.randrange(len(b))
            del b[at:at + rnd.randrange(1, 9)]
        elif kind == 4:
            del b[rnd.randrange(len(b)):]
        else:  # a length field: a v2 batchLength or a legacy size, or a varint in the records
            at = min((rnd.choice(hot) if hot else 0) + rnd.choice([8, 9, 10, 11, 57, 58, 59, 60, 61, 62]), len(b) - 1)
            b[at] = rnd.choice([0x00, 0x01, 0x7F, 0x80, 0xFF, rnd.getrandbits(8)])
    return bytes(b)


def mutate_region(rnd: random.Random, payload: bytes, count: int) -> tuple[bytes, int]:
    """A mutated records region (and sometimes a count off by one), as
    tests/formats/test_record_decoding.py mutates them, plus varint-shaped bytes."""
    b = bytearray(payload)
    for _ in range(rnd.randint(1, 3)):
        kind = rnd.randrange(5)
        if kind == 0 and b:
            b[rnd.randrange(len(b))] = rnd.getrandbits(8)
        elif kind == 1 and b:
            del b[rnd.randrange(len(b)):]
        elif kind == 2:
            b.insert(rnd.randrange(len(b) + 1), rnd.getrandbits(8))
        elif kind == 3 and b:
            at = rnd.randrange(len(b))
            b[at:at + 2] = rnd.choice([b"\x80\x80", b"\xff\xff\xff\xff\x0f", b"\x81\x01", b"\x01", b"\xfe\xff\xff\xff\x1f"])
        else:
            count += rnd.choice([-1, 1, 1000])
    return bytes(b), count


def batch_starts(buf) -> list[int]:
    """Positions of the whole entries of ``buf`` (the reference walk), for aimed mutations."""
    out = []
    try:
        for batch in BatchIterator._iter_reference(BatchIterator(buf)):
            out.append(batch.position)
            if isinstance(batch, RecordBatch):
                out.append(batch.position + RECORDS_OFFSET)  # its first record
    except FormatError:
        pass
    return out


# -- the hostile campaign -------------------------------------------------------------------


def record_files(corpus: Path) -> list[Path]:
    """Every file of the corpus that holds record batches (the set tests/corpus checks
    against the corpus README), vectors included."""
    if not corpus.is_dir():
        return []
    return sorted(p for p in corpus.rglob("*") if p.is_file() and (
        p.suffix in (".log", ".records") or (p.suffix == ".checkpoint" and "-" in p.stem)
        or p.name == "bootstrap.checkpoint"))


class Campaign:
    """Random mutations of real segments through both paths: each one walks (and decodes
    every v2 batch's records) to exactly the reference's outcome, typed errors included.

    A mutation edits a window of a corpus file that starts at an entry (up to 32 KiB), aimed
    at entry and record headers more often than at payload bytes; every tenth is a records
    region mutated directly (a CRC check no longer stands between it and the decoder)."""

    WINDOWS = (200, 2000, 32768)

    def __init__(self, module, files: list[Path], seed: int):
        self.module = module
        self.rnd = random.Random(seed)
        self.files = files
        self._cache: dict[Path, tuple[bytes, list[int]]] = {}
        self.mutations = self.errors = 0
        self.last: bytes | tuple = b""

    def _file(self, path: Path) -> tuple[bytes, list[int]]:
        if path not in self._cache:
            data = path.read_bytes()
            self._cache[path] = (data, batch_starts(data))
        return self._cache[path]

    def step(self) -> None:
        """One mutation, compared. ``last`` holds its input (``(bytes, count)`` for a records
        region, bytes for a segment window) so a failure can be written out."""
        rnd = self.rnd
        data, starts = self._file(rnd.choice(self.files))
        start = rnd.choice(starts) if starts else 0
        window = data[start:start + rnd.choice(self.WINDOWS)]
        self.mutations += 1
        if rnd.random() < 0.1:
            batch = RecordBatch(memoryview(window)) if len(window) >= 61 and window[16] == 2 else None
            if batch is not None and (args := v2_decode_args(batch)) is not None:
                payload, count = mutate_region(rnd, args[0], args[1])
                self.last = (payload, count, *args[2:])
                ref, nat = decode_outcomes(self.last)
                assert nat == ref
                self.errors += ref[0][0] != "ok"
                dump_batch_matches(self.module, self.last, batch.base_sequence)
                return
        hot = [p - start for p in starts if start <= p < start + len(window)]
        self.last = mutate(rnd, window, hot)
        self.errors += bool(compare_segment(self.module, self.last, base_position=rnd.choice([0, start])))
