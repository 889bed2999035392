"""The jobs of ``test_dump_vs_kafka.py``: which files of a Kafka log directory go to
Kafka's DumpLogSegments and to ``plog dump`` with which options, and how the two outputs
are compared.

A *job* is one option combination (:func:`combos_for`, kafka-format.md §19.1) over the files
of one source directory that the combination applies to, for one Kafka version. Kafka runs
a job in as few JVMs as possible (one ``--files a,b,c`` run; large sources are cut into
chunks of at most :data:`CHUNK_LOG_BYTES` of logs or :data:`CHUNK_ARG_CHARS` of path text,
so that no output is held in memory whole). When Kafka's tool dies on a file (a decoder
on too short a key, an index entry pointing past the log...), everything up to and including
that file is one *part* and the files after it are run again as the next part, so that one
damaged file does not hide the rest. plog runs exactly the same parts (same path strings,
same options plus ``--kafka-version``), in process.

Comparison (:func:`compare_part`): stdout byte for byte (the fixture hands Kafka's output
over UTF-8 decoded with ``surrogateescape`` and with newlines as printed, so it is encoded
back the same way); stderr likewise when Kafka exited 0 (log4j/SLF4J noise lines dropped).
Exit status: where Kafka exits 0, plog exits 0, or 3 with ``--verify-index-only`` exactly
when Kafka reported mismatches (on stderr, with status 0); where Kafka's tool dies (a Java
exception, status 1), plog fails too (status 1, not 0 or 3), after the same stdout.
"""

from __future__ import annotations

import contextlib
import io
import os
import zlib
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from kafka_versions import major

#: Suffix (from the last ``.``) -> file class, as DumpLogSegments dispatches (§19.2).
SUFFIX_CLASS = {
    ".log": "log",
    ".checkpoint": "log",  # KRaft snapshot
    ".index": "index",
    ".timeindex": "index",
    ".snapshot": "snapshot",
    ".txnindex": "txnindex",
}

#: A job's files are cut into runs of at most this many bytes of .log/.checkpoint files ...
CHUNK_LOG_BYTES = 12 << 20
#: ... and at most this many characters of ``--files`` (Linux limits one argument to 128 KiB).
CHUNK_ARG_CHARS = 60_000

#: The --max-bytes value: cuts the first batch of most segments (a batch is ~100 B-16 KiB).
MAX_BYTES = "1000"
#: The --max-bytes cap of the corpus's record-level runs other than --print-data-log
#: (4.5 of its 62 MB of logs: a third of its 101 logs are smaller, the others give a few
#: hundred records each).
CORPUS_MAX_BYTES = "65536"
#: Kafka 4.x's time index check reads every batch header from the indexed position to the
#: end of the segment for each entry (quadratic: 5 s for the corpus's largest segment):
#: with --verify-index-only, which checks exactly what a plain dump does without printing
#: the entries, the corpus's time indexes of segments larger than this are left out.
CORPUS_VERIFY_TIME_INDEX_MAX_LOG = 1 << 20
#: The --max-message-size value per source: a little smaller than the largest batch an
#: offset index points at in a few of the source's segments, so that Kafka's tool dies
#: on those (NoSuchElementException) and plog must too, while the others pass. (The real
#: brokers' batches here are < 8 KiB; the corpus has 24 segments of 16 KiB producer
#: batches, and only one batch of exactly 16384 bytes.)
MAX_MESSAGE_SIZE = {"written": "3000", "crashed": "3000", "corpus": "16383"}


def decoder_class(version: str, kind: str) -> str:
    """Kafka's own decoder class of ``kind`` (String, Integer, Long) for ``version``: the
    tools-api classes are the only ones 4.x ships; 3.9 ships both, and its default (and the
    name 3.x users pass) is the Scala ``kafka.serializer`` one."""
    if major(version) >= 4:
        return f"org.apache.kafka.tools.api.{kind}Decoder"
    return f"kafka.serializer.{kind}Decoder"


# -- the files of a source ------------------------------------------------------------------


@dataclass
class SourceFiles:
    """The files of one source, by what DumpLogSegments does with them (paths as str)."""

    logs: list[str] = field(default_factory=list)  # .log and KRaft .checkpoint
    indexes: list[str] = field(default_factory=list)  # .index and .timeindex
    others: list[str] = field(default_factory=list)  # .snapshot and .txnindex
    unknown: list[str] = field(default_factory=list)  # ignored by Kafka and by plog

    def all_dumpable(self) -> list[str]:
        return sorted(self.logs + self.indexes + self.others)


def collect(root: Path, *, skip_top: tuple[str, ...] = ()) -> SourceFiles:
    """Every file under ``root`` (a sorted walk), but for the entries of ``root`` itself
    named in ``skip_top``.

    ``unknown`` gets the files neither tool dumps (``.lock``, ``quorum-state``...), but not
    the text checkpoint files (``leader-epoch-checkpoint``, ``partition.metadata``...):
    Kafka ignores those too, while ``plog dump`` prints their entries, a documented
    extension (``plog dump --help``: "Beyond Kafka: ... the text checkpoint files").
    """
    from plog.engine.inspect.dump import TEXT_CHECKPOINT_FILES

    out = SourceFiles()
    root = Path(root)
    for dirpath, dirs, files in os.walk(root):
        if Path(dirpath) == root:
            dirs[:] = [d for d in dirs if d not in skip_top]
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(dirpath, name)
            if Path(dirpath) == root and name in skip_top:
                continue
            dot = name.rfind(".")
            cls = SUFFIX_CLASS.get(name[dot:]) if dot >= 0 else None
            if cls == "log":
                out.logs.append(path)
            elif cls == "index":
                out.indexes.append(path)
            elif cls in ("snapshot", "txnindex"):
                out.others.append(path)
            elif name not in TEXT_CHECKPOINT_FILES:
                out.unknown.append(path)
    return out


def _in_partition_of(path: str, prefix: str) -> bool:
    return os.path.basename(os.path.dirname(path)).startswith(prefix)


def _metadata_files(files: SourceFiles) -> list[str]:
    """``__cluster_metadata-0`` segments and snapshots, and the KRaft bootstrap snapshots."""
    return [f for f in files.logs
            if _in_partition_of(f, "__cluster_metadata-") or os.path.basename(f) == "bootstrap.checkpoint"]


def _unknown_last_crash(files: SourceFiles) -> list[str]:
    # A name without a dot (quorum-state) makes Kafka 3.x's tool throw: keep those last,
    # so the names with a suffix are all dumped before.
    return sorted(files.unknown, key=lambda f: ("." not in os.path.basename(f), f))


# -- the option combinations ------------------------------------------------------------------


@dataclass(frozen=True)
class Combo:
    name: str  # the test id part
    options: Callable[[str], tuple[str, ...]]  # version -> DumpLogSegments options
    select: Callable[[SourceFiles], list[str]]


def _fixed(*opts: str) -> Callable[[str], tuple[str, ...]]:
    return lambda version: opts


def _logs(files: SourceFiles) -> list[str]:
    return files.logs


def _indexes(files: SourceFiles) -> list[str]:
    return files.indexes


def _verify_indexes_of_corpus(files: SourceFiles) -> list[str]:
    def small_segment(f: str) -> bool:
        log = f[: -len(".timeindex")] + ".log"
        return not os.path.exists(log) or os.path.getsize(log) <= CORPUS_VERIFY_TIME_INDEX_MAX_LOG

    return [f for f in files.indexes if f.endswith(".index") or small_segment(f)]


def _offset_indexes(files: SourceFiles) -> list[str]:
    return [f for f in files.indexes if f.endswith(".index")]  # the only ones it applies to


def _decoders(key: str, value: str) -> Callable[[str], tuple[str, ...]]:
    return lambda v: ("--key-decoder-class", decoder_class(v, key), "--value-decoder-class", decoder_class(v, value))


def combos_for(source: str) -> list[Combo]:
    """The option combinations run on ``source`` ("written", "crashed" or "corpus")."""
    # The corpus has 62 MB of logs, printed as ~240 MB per record-level run, which Kafka's
    # tool writes to its pipe ~128 bytes at a time: only the richest of those runs
    # (--print-data-log) reads every corpus log whole, the other record-level ones read the
    # first CORPUS_MAX_BYTES of each (every file still, with --max-bytes).
    capped = ("--max-bytes", CORPUS_MAX_BYTES) if source == "corpus" else ()
    suffix = f"-max-bytes-{CORPUS_MAX_BYTES}" if capped else ""
    combos = [
        # logs, indexes, producer snapshots, transaction indexes: no option
        Combo("no-options", _fixed(), SourceFiles.all_dumpable),
        Combo("print-data-log", _fixed("--print-data-log"), _logs),
        Combo("deep-iteration" + suffix, _fixed("--deep-iteration", *capped), _logs),
        Combo("print-data-log-skip-record-metadata" + suffix,
              _fixed("--print-data-log", "--skip-record-metadata", *capped), _logs),
        Combo("deep-iteration-skip-record-metadata" + suffix,
              _fixed("--deep-iteration", "--skip-record-metadata", *capped), _logs),
        Combo(f"max-bytes-{MAX_BYTES}", _fixed("--max-bytes", MAX_BYTES), _logs),
        Combo(f"max-bytes-{MAX_BYTES}-print-data-log", _fixed("--max-bytes", MAX_BYTES, "--print-data-log"), _logs),
    ]
    # Kafka's own decoder classes. Integer/Long ones throw on a shorter key/value and the
    # tool dies mid-line: plog must stop at the same place. The scenario data has keys of
    # 4+ bytes and values of 8+ (only a KRaft NoOpRecord value is shorter); the corpus has
    # many short keys and values under 8 bytes, but only two files with a value under 4.
    if source == "corpus":
        combos.append(Combo("string-key-integer-value-decoder-classes" + suffix,
                            lambda v: (*_decoders("String", "Integer")(v), *capped), _logs))
    else:
        combos.append(Combo("string-decoder-classes", _decoders("String", "String"), _logs))
        combos.append(Combo("integer-key-long-value-decoder-classes", _decoders("Integer", "Long"), _logs))
    combos += [
        Combo("offsets-decoder", _fixed("--offsets-decoder"),
              lambda f: [p for p in f.logs if _in_partition_of(p, "__consumer_offsets-")]),
        Combo("transaction-log-decoder", _fixed("--transaction-log-decoder"),
              lambda f: [p for p in f.logs if _in_partition_of(p, "__transaction_state-")]),
        Combo("cluster-metadata-decoder", _fixed("--cluster-metadata-decoder"), _metadata_files),
        Combo("verify-index-only", _fixed("--verify-index-only"),
              _verify_indexes_of_corpus if source == "corpus" else _indexes),
        Combo("index-sanity-check", _fixed("--index-sanity-check"), _indexes),
        Combo(f"max-message-size-{MAX_MESSAGE_SIZE[source]}",
              _fixed("--max-message-size", MAX_MESSAGE_SIZE[source]), _offset_indexes),
        Combo("unknown-files", _fixed(), _unknown_last_crash),
    ]
    return combos


def chunks(files: list[str], options: tuple[str, ...] = ()) -> list[list[str]]:
    """``files`` cut (in order) into runs of bounded log bytes read (``--max-bytes`` of
    each at most) and argument length."""
    max_bytes = int(options[options.index("--max-bytes") + 1]) if "--max-bytes" in options else 1 << 31
    out: list[list[str]] = []
    cur: list[str] = []
    log_bytes = chars = 0
    for f in files:
        size = min(os.path.getsize(f), max_bytes) if f.endswith((".log", ".checkpoint")) else 0
        if cur and (log_bytes + size > CHUNK_LOG_BYTES or chars + len(f) + 1 > CHUNK_ARG_CHARS):
            out.append(cur)
            cur, log_bytes, chars = [], 0, 0
        cur.append(f)
        log_bytes += size
        chars += len(f) + 1
    if cur:
        out.append(cur)
    return out


# -- running the two tools ---------------------------------------------------------------------

#: stderr lines that are the JVM's or the logging framework's, not the tool's.
NOISE_PREFIXES = ("log4j:", "SLF4J:", "SLF4J(")


def drop_noise(text: str) -> str:
    return "".join(line for line in text.splitlines(True) if not line.startswith(NOISE_PREFIXES))


@dataclass
class Part:
    """One Kafka run over ``files`` (outputs kept compressed: some are hundreds of MB)."""

    files: list[str]
    stdout_z: bytes
    stderr: str
    returncode: int

    @property
    def stdout(self) -> bytes:
        return zlib.decompress(self.stdout_z)


def last_dumped(stdout: bytes | str) -> str | None:
    """The file of the last ``Dumping <file>`` line (the file a run died on)."""
    if isinstance(stdout, str):
        stdout = stdout.encode("utf-8", "surrogateescape")
    at = stdout.rfind(b"Dumping ")
    while at > 0 and stdout[at - 1:at] != b"\n":
        at = stdout.rfind(b"Dumping ", 0, at)
    if at < 0:
        return None
    end = stdout.find(b"\n", at)
    return stdout[at + 8: end if end >= 0 else len(stdout)].decode("utf-8", "replace")


def _listing(dirs) -> set[str]:
    out = set()
    for d in dirs:
        try:
            out.update(os.path.join(d, name) for name in os.listdir(d))
        except FileNotFoundError:
            pass
    return out


def dump_leaving_no_trace(dump: Callable[..., tuple[str, str, int]], version: str, files: list[str],
                          options: tuple[str, ...]) -> tuple[str, str, int]:
    """Kafka's tool is not read-only: for a time index whose offset index is missing it
    creates that (empty) file before it fails. Files it creates in the directories of
    ``files`` are removed afterwards, so that plog, and the next runs, see what it saw."""
    dirs = {os.path.dirname(os.path.abspath(f)) for f in files}
    before = _listing(dirs)
    try:
        return dump(version, files, *options)
    finally:
        for created in sorted(_listing(dirs) - before):
            with contextlib.suppress(FileNotFoundError):  # a concurrent run's, already removed
                os.remove(created)


def run_kafka_parts(dump: Callable[..., tuple[str, str, int]], version: str, files: list[str],
                    options: tuple[str, ...], *, resume: bool = True) -> list[Part]:
    """Kafka's DumpLogSegments over ``files``, chunk after chunk (:func:`run_kafka_chunk`)."""
    return [part for chunk in chunks(files, options)
            for part in run_kafka_chunk(dump, version, chunk, options, resume=resume)]


def run_kafka_chunk(dump: Callable[..., tuple[str, str, int]], version: str, chunk: list[str],
                    options: tuple[str, ...], *, resume: bool = True) -> list[Part]:
    """Kafka's DumpLogSegments over the files of one chunk in one run; after a run that
    dies on a file, the files after it are run again (``resume``)."""
    parts: list[Part] = []
    todo = list(chunk)
    while todo:
        stdout, stderr, code = dump_leaving_no_trace(dump, version, todo, options)
        out_b = stdout.encode("utf-8", "surrogateescape")
        died_on = last_dumped(out_b) if code != 0 else None
        cut = len(todo)
        if code != 0 and resume and died_on in todo:
            cut = todo.index(died_on) + 1
        parts.append(Part(todo[:cut], zlib.compress(out_b, 1), stderr, code))
        todo = todo[cut:]
    return parts


def run_plog(version: str, files: list[str], options: tuple[str, ...]) -> tuple[bytes, str, int]:
    """``plog dump --kafka-version <major> <options> --files <files>`` in process:
    (stdout as UTF-8 bytes, stderr, exit status)."""
    from plog.cli.main import main

    out_buf = io.BytesIO()
    out = io.TextIOWrapper(out_buf, encoding="utf-8", errors="backslashreplace", newline="\n")
    err = io.StringIO()
    code = 0
    saved = os.environ.get("PLOG_NO_PROGRESS")
    os.environ["PLOG_NO_PROGRESS"] = "1"
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                main(["dump", "--kafka-version", str(major(version)), *options, "--files", ",".join(files)])
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        if saved is None:
            os.environ.pop("PLOG_NO_PROGRESS", None)
        else:
            os.environ["PLOG_NO_PROGRESS"] = saved
    out.flush()
    return out_buf.getvalue(), err.getvalue(), code


# -- comparing --------------------------------------------------------------------------------


def _first_diff_line(a: bytes, b: bytes) -> tuple[int, bytes | None, bytes | None, int]:
    """(1-based line number, Kafka's line, plog's line, byte offset of that line) of the
    first difference; a missing line is None."""
    n = min(len(a), len(b))
    i = 0
    step = 1 << 16
    while i < n and a[i:i + step] == b[i:i + step]:
        i += step
    while i < n and a[i] == b[i]:
        i += 1
    start = a.rfind(b"\n", 0, i) + 1
    line_no = a.count(b"\n", 0, start) + 1

    def line(s: bytes) -> bytes | None:
        if start >= len(s):
            return None
        end = s.find(b"\n", start)
        return s[start: end if end >= 0 else len(s)] + (b"" if end >= 0 else b"<no newline at end>")

    return line_no, line(a), line(b), start


def _show(line: bytes | None, limit: int = 400) -> str:
    if line is None:
        return "<missing>"
    text = line.decode("utf-8", "backslashreplace")
    return repr(text if len(text) <= limit else text[:limit] + f"...<{len(text) - limit} more chars>")


def compare_part(version: str, options: tuple[str, ...], part: Part, plog: tuple[bytes, str, int]) -> list[str]:
    """The differences between Kafka's run ``part`` and plog's run on the same files, each
    naming the version, options, file and first differing line; [] when equal."""
    plog_out, plog_err, plog_code = plog
    kafka_out = part.stdout
    kafka_err = drop_noise(part.stderr)
    head = (f"Kafka {version}, options {' '.join(options) or '(none)'}, "
            f"{len(part.files)} file(s) {part.files[0]} .. {part.files[-1]}")
    problems = []
    if kafka_out != plog_out:
        line_no, k, p, start = _first_diff_line(kafka_out, plog_out)
        file = last_dumped(kafka_out[:start]) or "(before the first file)"
        problems.append(f"{head}: stdout differs at line {line_no}, file {file}\n"
                        f"    kafka: {_show(k)}\n    plog:  {_show(p)}")
    if part.returncode == 0:
        if kafka_err != plog_err:
            line_no, k, p, _ = _first_diff_line(kafka_err.encode("utf-8", "surrogateescape"),
                                                plog_err.encode("utf-8", "surrogateescape"))
            problems.append(f"{head}: stderr differs at line {line_no}\n"
                            f"    kafka: {_show(k)}\n    plog:  {_show(p)}")
        # --verify-index-only jobs dump index files only: their stderr is the mismatch reports.
        expected = 3 if "--verify-index-only" in options and kafka_err.strip() else 0
        if plog_code != expected:
            problems.append(f"{head}: Kafka exited 0{' with mismatch reports' if expected else ''}, plog exited "
                            f"{plog_code}, not {expected} (plog stderr: "
                            f"{_show(plog_err.encode('utf-8', 'surrogateescape')[-400:])})")
    elif plog_code in (0, 3):
        died = last_dumped(kafka_out) or "(before the first file)"
        tail = [ln for ln in kafka_err.splitlines() if ln.strip()][:2]
        problems.append(f"{head}: Kafka failed (exit {part.returncode}) on file {died}: "
                        f"{' | '.join(tail)}; plog exited {plog_code}")
    return problems
