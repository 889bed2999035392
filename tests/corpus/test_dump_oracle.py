"""``plog dump`` text for every corpus file equals an independent rendering of Kafka's
format strings (kafka-format.md §19).

The oracle here shares no code with plog: batches and records are parsed by kafka-python
(``DefaultRecordBatch``/``LegacyRecordBatch``), index and snapshot entries by ``struct``
from the layouts in kafka-format.md §8/§11, and the lines are the §19 format strings. The
interop suite (tests/interop) compares the same output with Kafka's own tool.
"""

from __future__ import annotations

import io
import re
import os
import struct
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.legacy_records import LegacyRecordBatch

from conftest import corpus_files, distinct_contents
from plog.cli.main import main
from plog.formats.java import utf8_decode as java_utf8_decode

KRAFT_JSON = "<kraft-json>"
CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
TT = {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}

LOGS = distinct_contents(corpus_files(lambda f: f.endswith(".log")))
INDEXES = corpus_files(lambda f: f.endswith(".index"))
TIME_INDEXES = corpus_files(lambda f: f.endswith(".timeindex"))
SNAPSHOTS = corpus_files(lambda f: f.endswith(".snapshot"))
LOG_OPTIONS = [
    [],
    ["--deep-iteration"],
    ["--print-data-log"],
    ["--print-data-log", "--skip-record-metadata"],
    ["--deep-iteration", "--skip-record-metadata"],
]


def plog_dump(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main(["dump", *args])
        except SystemExit as e:
            code = e.code or 0
    return code, out.getvalue(), err.getvalue()


def _java_utf8(raw: bytes) -> str:
    # The one shared piece: malformed UTF-8 is replaced by Java's rules, which
    # tests/formats/test_java_utf8.py checks against vectors printed by the JDK itself.
    return java_utf8_decode(raw)


# --------------------------------------------------------------------------- .log oracle


def _entries(data: bytes):
    """(position, magic, entry bytes) per whole entry, and the trailing byte count."""
    pos = 0
    while len(data) - pos > 17:
        offset, size = struct.unpack_from(">qi", data, pos)
        assert size >= 14, "corpus files have no impossible entry sizes"
        if pos + 12 + size > len(data):
            break
        yield pos, data[pos + 16], data[pos : pos + 12 + size]
        pos += 12 + size
    yield len(data) - pos, None, None


def expected_log(path: Path, opts: list[str], kafka_version: int) -> tuple[list[str], list[str]]:
    data = path.read_bytes()
    deep = "--deep-iteration" in opts or "--print-data-log" in opts
    print_data = "--print-data-log" in opts
    skip = "--skip-record-metadata" in opts
    out = [f"Dumping {path}", f"Log starting offset: {int(path.name.split('.')[0])}"]
    pairs: list[tuple[int, int]] = []
    last = -1
    first = True
    for pos, magic, entry in _entries(data):
        if entry is None:
            if pos:
                out.append(f"Found {pos} invalid bytes at the end of {path.name}")
            break
        if magic == 2:
            b = DefaultRecordBatch(bytearray(entry))
            count = struct.unpack_from(">i", entry, 57)[0]
            attrs = struct.unpack_from(">h", entry, 21)[0]
            tt = 1 if attrs & 0x08 else 0
            horizon = "OptionalLong.empty"
            if attrs & 0x40:  # KIP-534 delete horizon: the base timestamp
                horizon = f"OptionalLong[{b.first_timestamp}]"
            crc = struct.unpack_from(">I", entry, 17)[0]
            out.append(
                f"baseOffset: {b.base_offset} lastOffset: {b.base_offset + b.last_offset_delta} count: {count} "
                f"baseSequence: {b.base_sequence} lastSequence: {b.last_sequence} producerId: {b.producer_id} "
                f"producerEpoch: {b.producer_epoch} partitionLeaderEpoch: {b.leader_epoch} "
                f"isTransactional: {str(b.is_transactional).lower()} isControl: {str(b.is_control_batch).lower()} "
                f"deleteHorizonMs: {horizon} position: {pos} {TT[tt]}: {b.max_timestamp} size: {len(entry)} "
                f"magic: 2 compresscodec: {CODECS[attrs & 7]} crc: {crc} isvalid: {str(b.validate_crc()).lower()}"
            )
            records = list(b) if deep else []
            for r in records:
                if kafka_version == 3 and first:
                    first = False
                elif r.offset != last + 1:
                    pairs.append((last, r.offset))
                last = r.offset
                line = ""
                if not skip:
                    seq = -1 if b.base_sequence < 0 else (b.base_sequence + r.offset - b.base_offset) % (2**31)
                    line = (
                        f"| offset: {r.offset} {TT[tt]}: {r.timestamp} "
                        f"keySize: {-1 if r.key is None else len(r.key)} "
                        f"valueSize: {-1 if r.value is None else len(r.value)} sequence: {seq} "
                        f"headerKeys: [{','.join(k for k, _ in r.headers)}]"
                    )
                    if b.is_control_batch:
                        ctype = struct.unpack_from(">h", r.key, 2)[0]
                        if ctype in (0, 1):
                            epoch = struct.unpack_from(">i", r.value, 2)[0]
                            line += f" endTxnMarker: {'ABORT' if ctype == 0 else 'COMMIT'} coordinatorEpoch: {epoch}"
                        elif ctype == 2 and kafka_version == 3:
                            line += " controlType: LEADER_CHANGE(2)"
                        else:
                            # KRaft control values are printed as Kafka's generated JSON, which
                            # tests/interop compares with Kafka's tool; here: the label only.
                            label = {2: "LeaderChange:", 3: "SnapshotHeader", 4: "SnapshotFooter",
                                     5: "KRaftVersion", 6: "KRaftVoters"}[ctype]
                            line += f" {label} " + KRAFT_JSON
                if print_data and not b.is_control_batch:
                    prefix = "| " if skip else " "
                    if r.key is not None:
                        line += f"{prefix}key: {_java_utf8(bytes(r.key))}"
                        prefix = " "
                    if r.value is not None:
                        line += f"{' ' if kafka_version == 3 else prefix}payload: {_java_utf8(bytes(r.value))}"
                out.append(line)
        else:
            b = LegacyRecordBatch(bytearray(entry), magic)
            offset = struct.unpack_from(">q", entry, 0)[0]
            crc = struct.unpack_from(">I", entry, 12)[0]
            attrs = entry[17]
            tt = -1 if magic == 0 else (1 if attrs & 0x08 else 0)
            ts = -1 if magic == 0 else struct.unpack_from(">q", entry, 18)[0]
            out.append(
                f"offset: {offset} position: {pos} {TT[tt]}: {ts} size: {len(entry)} magic: {magic} "
                f"compresscodec: {CODECS[attrs & 7]} crc: {crc} isvalid: {str(b.validate_crc()).lower()}"
            )
            for r in (list(b) if deep else []):
                if kafka_version == 3 and first:
                    first = False
                elif r.offset != last + 1:
                    pairs.append((last, r.offset))
                last = r.offset
                line = ""
                if not skip:
                    line = (
                        f"| offset: {r.offset} {TT[tt]}: {r.timestamp if magic else -1} "
                        f"keySize: {-1 if r.key is None else len(r.key)} valueSize: {-1 if r.value is None else len(r.value)} "
                        f"isValid: true crc: {r.checksum}{'}' if kafka_version == 3 else ''}"
                    )
                if print_data:
                    prefix = "| " if skip else " "
                    if r.key is not None:
                        line += f"{prefix}key: {_java_utf8(bytes(r.key))}"
                        prefix = " "
                    if r.value is not None:
                        line += f"{' ' if kafka_version == 3 else prefix}payload: {_java_utf8(bytes(r.value))}"
                out.append(line)
    err: list[str] = []
    if pairs:
        err.append(f"Non-consecutive offsets in {os.path.abspath(path)}")
        ordered = list(reversed(pairs)) if kafka_version == 3 else sorted(dict(pairs).items())
        err += [f"  {a} is followed by {b}" for a, b in ordered]
    return out, err


def _log_cases():
    # Every option combination on every log up to 1 MiB; the few larger logs (up to 9 MiB)
    # get the two extremes, so the suite stays quick on two cores.
    for path in LOGS:
        for opts in LOG_OPTIONS if path.stat().st_size <= (1 << 20) else LOG_OPTIONS[:1] + LOG_OPTIONS[3:4]:
            for kafka_version in (4, 3):
                yield pytest.param(path, opts, kafka_version,
                                   id=f"{path.relative_to(path.parents[2])}-{'+'.join(opts) or 'default'}-v{kafka_version}")


@pytest.mark.parametrize("path,opts,kafka_version", list(_log_cases()))
def test_log_dump_matches_format_strings(corpus, path, opts, kafka_version):
    want_out, want_err = expected_log(path, opts, kafka_version)
    code, out, err = plog_dump(*opts, "--kafka-version", str(kafka_version), str(path))
    assert code == 0
    # Whole-text comparison: payloads may hold newlines and other line breaks.
    want_text = "".join(line + "\n" for line in want_out)
    if KRAFT_JSON in want_text:
        pattern = "".join(
            re.escape(part) if i % 2 == 0 else r"\{[^\n]*\}"
            for i, part in enumerate(re.split(f"({re.escape(KRAFT_JSON)})", want_text))
        )
        assert re.fullmatch(pattern, out, re.DOTALL)
    else:
        assert out == want_text
    assert err.split("\n")[:-1] == want_err


# --------------------------------------------------------------------------- indexes


def _first_batch_last_offset(log: bytes, position: int) -> int:
    offset, size = struct.unpack_from(">qi", log, position)
    if log[position + 16] == 2:
        return offset + struct.unpack_from(">i", log, position + 23)[0]
    return offset


@pytest.mark.parametrize("verify_only", [False, True])
@pytest.mark.parametrize("path", INDEXES, ids=lambda p: str(p.relative_to(p.parents[2])))
def test_index_dump_matches_format_strings(corpus, path, verify_only):
    base = int(path.name.split(".")[0])
    data = path.read_bytes()
    if not path.with_suffix(".log").exists():
        # Kafka opens the segment's log first and fails without it (FileNotFoundException).
        code, got_out, got_err = plog_dump(str(path))
        assert code == 1 and got_out == f"Dumping {path}\n"
        assert got_err.count("\n") == 1 and str(path.with_suffix(".log").name) in got_err
        return
    log = path.with_suffix(".log").read_bytes()
    n = len(data) // 8
    out = [f"Dumping {path}"]
    mismatches = {}
    if n == 0:
        out.append(f"{path} is empty.")
    for i in range(n):
        rel, position = struct.unpack_from(">ii", data, i * 8)
        if rel == 0 and i > 0:
            break
        last = _first_batch_last_offset(log, position)
        if last != base + rel:
            mismatches[base + rel] = last
        if not verify_only:
            out.append(f"offset: {base + rel} position: {position}")
    err = []
    if mismatches:
        err = [f"Mismatches in :{os.path.abspath(path)}"] + [
            f"  Index offset: {k}, log offset: {v}" for k, v in sorted(mismatches.items(), reverse=True)
        ]
    code, got_out, got_err = plog_dump(*(["--verify-index-only"] if verify_only else []), str(path))
    assert got_out.split("\n")[:-1] == out
    assert got_err.splitlines() == err
    assert code == (3 if mismatches and verify_only else 0)


@pytest.mark.parametrize("path", INDEXES + TIME_INDEXES, ids=lambda p: str(p.relative_to(p.parents[2])))
def test_index_sanity_check(corpus, path):
    code, out, err = plog_dump("--index-sanity-check", str(path))
    size = path.stat().st_size
    entry = 8 if path.suffix == ".index" else 12
    if not path.with_suffix(".log").exists():
        assert code == 1 and out == f"Dumping {path}\n"  # Kafka opens the log first
    elif path.suffix == ".index" and size // 8 == 0:
        assert out.splitlines() == [f"Dumping {path}", f"{path} is empty."]
    else:
        assert out.splitlines() == [f"Dumping {path}", f"{path} passed sanity check."], err
        assert code == 0 and size % entry == 0


def _batches_from(log: bytes, position: int):
    for pos, magic, entry in _entries(log[position:]):
        if entry is None:
            return
        yield magic, entry


def _index_position(index: bytes, base: int, offset: int) -> int:
    """The position of the largest index entry <= offset (0 when none), by a plain scan."""
    best = 0
    for i in range(len(index) // 8):
        rel, position = struct.unpack_from(">ii", index, i * 8)
        if base + rel <= offset and not (rel == 0 and i > 0):
            best = position
    return best


@pytest.mark.parametrize("path", TIME_INDEXES, ids=lambda p: str(p.relative_to(p.parents[2])))
def test_time_index_dump_matches_format_strings(corpus, path):
    base = int(path.name.split(".")[0])
    data = path.read_bytes()
    out = [f"Dumping {path}"]
    if not path.with_suffix(".log").exists():
        code, got_out, got_err = plog_dump(str(path))
        assert code == 1 and got_out == f"Dumping {path}\n" and got_err.count("\n") == 1
        return
    log = path.with_suffix(".log").read_bytes()
    index_path = path.with_suffix(".index")
    index = index_path.read_bytes() if index_path.exists() else b""
    mismatch, order, not_found = [], [], []
    prev = -1
    for i in range(len(data) // 12):
        ts, rel = struct.unpack_from(">qi", data, i * 12)
        offset = base + rel
        if rel == 0 and i > 0:
            break
        found = None
        for magic, entry in _batches_from(log, _index_position(index, base, offset)):
            batch = DefaultRecordBatch(bytearray(entry)) if magic == 2 else LegacyRecordBatch(bytearray(entry), magic)
            last = struct.unpack_from(">q", entry, 0)[0] + (struct.unpack_from(">i", entry, 23)[0] if magic == 2 else 0)
            if last >= offset:
                found = (last, batch)
                break
        if found is None:
            not_found.append((offset, -1))
        elif found[0] != offset:
            not_found.append((offset, found[0]))
        else:
            max_ts = max([-1] + [r.timestamp for r in found[1]])
            if max_ts != ts:
                mismatch.append((ts, max_ts))
            if prev >= ts:
                order.append((ts, prev))
        out.append(f"timestamp: {ts} offset: {offset}")
        prev = ts
    where = os.path.abspath(path)  # Java's getAbsolutePath: symlinks are kept
    err = []
    if mismatch:
        err += [f"Found timestamp mismatch in :{where}"] + [f"  Index timestamp: {a}, log timestamp: {b}" for a, b in mismatch]
    if order:
        err += [f"Found out of order timestamp in :{where}"] + [
            f"  Index timestamp: {a}, Previously indexed timestamp: {b}" for a, b in order]
    if not_found:
        # Kafka 4.x names the file (checked against 4.3.1 in tests/interop); 3.x says "in the log."
        err += [f"The following indexed offsets are not found in :{where}"] + [
            f"Indexed offset: {a}, found log offset: {b}" for a, b in not_found]
    code, got_out, got_err = plog_dump(str(path))
    assert got_out.split("\n")[:-1] == out
    assert got_err.split("\n")[:-1] == err
    assert code == 0  # a plain dump reports and exits 0, as Kafka's tool does
    assert plog_dump("--verify-index-only", str(path))[0] == (3 if err else 0)


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: str(p.relative_to(p.parents[2])))
def test_snapshot_dump_matches_format_strings(corpus, path):
    data = path.read_bytes()
    version, _crc, count = struct.unpack_from(">hIi", data, 0)
    out = [f"Dumping {path}"]
    for i in range(count):
        pid, epoch, last_seq, last_off, delta, ts, coord, txn_first = struct.unpack_from(">qhiqiqiq", data, 10 + i * 46)
        line = (
            f"producerId: {pid} producerEpoch: {epoch} coordinatorEpoch: {coord} currentTxnFirstOffset: "
            f"{'OptionalLong.empty' if txn_first < 0 else f'OptionalLong[{txn_first}]'} lastTimestamp: {ts}"
        )
        if last_off >= 0:
            first_seq = last_seq - delta if last_seq - delta >= 0 else last_seq - delta + 2**31
            line += f" firstSequence: {first_seq} lastSequence: {last_seq} lastOffset: {last_off} offsetDelta: {delta} timestamp: {ts}"
        out.append(line)
    code, got_out, got_err = plog_dump(str(path))
    assert (code, got_out.splitlines(), got_err) == (0, out, "")
    # Kafka 3.x prints a space after lastTimestamp whether or not batch metadata follows.
    code, got_out, _ = plog_dump("--kafka-version", "3", str(path))
    assert got_out.splitlines() == [out[0]] + [
        line.replace(" firstSequence", "  firstSequence".replace("  ", " ")) if "firstSequence" in line else line + " "
        for line in out[1:]
    ]


def test_corpus_has_every_file_type(corpus):
    assert LOGS and INDEXES and TIME_INDEXES and SNAPSHOTS
    assert any(os.path.getsize(p) > 0 for p in SNAPSHOTS)
