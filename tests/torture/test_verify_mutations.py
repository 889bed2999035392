"""``plog verify`` never crashes: thousands of random mutations of a log directory's files
(bit flips, byte overwrites, truncations, appended garbage, zero-filled tails, inserted and
deleted bytes) across ``.log``/``.index``/``.timeindex``/``.txnindex``/``.snapshot``, the
checkpoints and the other text files give findings, never an exception; through the CLI they
give exit 0 or 3 and no traceback.

Two log directories are mutated: one written by plog's ``LogManager`` (an idempotent and a
transactional producer, so snapshots and a transaction index exist; small segments, so
there are several with their indexes), and a copy of a real Kafka log directory from the
corpus. Most iterations call the engine in process (fast); a sample goes through the Typer
app, and a few through a real ``python -m plog.cli`` process with ``--jobs 2``. The seed is
printed in the test header line of each test (``PLOG_VERIFY_SEED`` replays one).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from conftest import CORPUS
from plog.cli.main import app
from plog.engine.inspect.verify import VerifyStats, verify_paths

SEED = int(os.environ.get("PLOG_VERIFY_SEED", random.SystemRandom().randrange(1 << 32)))
ITERATIONS = int(os.environ.get("PLOG_VERIFY_ITERATIONS", "2000"))
CORPUS_LOG_DIR = CORPUS / "yuanliubei__kafka-source-code/kafka-logs"


def build_log_dir(root: Path) -> Path:
    from plog.engine.storage.log_manager import LogManager
    from plog.formats.record_batch import encode_batch

    config = {"segment.bytes": "6000", "index.interval.bytes": "500", "plog.fsync.on.produce": "false"}
    with LogManager([root], cluster_id="verify-torture") as lm:
        log = lm.get_or_create_log(("events", 0), config=config, topic_id=uuid.UUID(int=3))
        for i in range(24):
            records = [(j, 1_700_000_000_000 + 7 * i + j, b"key-%d" % j, b"value" * (5 + i % 7)) for j in range(3)]
            log.append_as_leader(encode_batch(records, producer_id=77, producer_epoch=0, base_sequence=3 * i))
        for i in range(3):  # an aborted transaction: a txn index entry, an open-then-closed txn in snapshots
            log.append_as_leader(encode_batch([(0, 1_700_000_001_000 + i, b"t", b"x" * 40)], producer_id=88,
                                              producer_epoch=0, base_sequence=i, is_transactional=True))
        log.append_end_txn_marker(88, 0, commit=False, coordinator_epoch=1)
        for i in range(6):
            log.append_as_leader(encode_batch([(0, 1_700_000_002_000 + i, None, b"tail" * 30)]))
    os.remove(root / ".lock")
    return root


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> list[Path]:
    base = tmp_path_factory.mktemp("verify-torture")
    built = build_log_dir(base / "built")
    return [built, Path(shutil.copytree(CORPUS_LOG_DIR, base / "corpus"))]


def mutate(data: bytes, rnd: random.Random) -> bytes:
    buf = bytearray(data)
    kind = rnd.choice(["flip", "flip", "flip", "overwrite", "truncate", "append", "zero-tail", "insert", "delete"])
    if not buf and kind not in ("append", "insert"):
        kind = "append"
    if kind == "flip":
        for _ in range(rnd.randint(1, 4)):
            i = rnd.randrange(len(buf))
            buf[i] ^= 1 << rnd.randrange(8)
    elif kind == "overwrite":
        i = rnd.randrange(len(buf))
        k = min(rnd.randint(1, 80), len(buf) - i)
        buf[i:i + k] = rnd.randbytes(k) if rnd.random() < 0.7 else b"\xff" * k
    elif kind == "truncate":
        del buf[rnd.randrange(len(buf) + 1):]
    elif kind == "append":
        buf += rnd.choice([rnd.randbytes(rnd.randint(1, 300)), bytes(rnd.randint(1, 3000)),
                           # a header claiming a huge batch
                           b"\x00" * 8 + b"\x7f\xff\xff\xf0" + b"\x00\x00\x00\x00\x02" + rnd.randbytes(50)])
    elif kind == "zero-tail":
        i = rnd.randrange(len(buf))
        buf[i:] = bytes(len(buf) - i + rnd.choice([0, 64, 4096]))
    elif kind == "insert":
        i = rnd.randrange(len(buf) + 1)
        buf[i:i] = rnd.randbytes(rnd.randint(1, 40))
    else:
        i = rnd.randrange(len(buf))
        del buf[i:i + rnd.randint(1, 120)]
    return bytes(buf)


def files_of(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name != ".lock")


def check_findings(findings, stats: VerifyStats) -> None:
    assert stats.errors + stats.warnings >= len([f for f in findings if f.position is not None])
    for f in findings:
        assert f.severity in ("error", "warning") and f.check and f.message
        if f.position is not None and os.path.isfile(f.path):
            assert 0 <= f.position <= os.path.getsize(f.path), f


def test_random_mutations_never_crash(sources, tmp_path):
    print(f"seed {SEED}")
    rnd = random.Random(SEED)
    work = [Path(shutil.copytree(src, tmp_path / src.name)) for src in sources]
    originals = {p: p.read_bytes() for root in work for p in files_of(root)}
    runner = CliRunner()
    outcomes = {0: 0, 3: 0}
    for it in range(ITERATIONS):
        root = work[it % len(work)]
        victims = rnd.sample(files_of(root), rnd.choice([1, 1, 1, 2, 3]))
        for p in victims:
            p.write_bytes(mutate(originals[p], rnd))
        try:
            if it % 40 == 0:
                result = runner.invoke(app, ["verify", "--jobs", "1", str(root)])
                assert result.exit_code in (0, 3), (it, victims, result.stdout, result.exception)
                assert "Traceback" not in result.stderr
                outcomes[result.exit_code] += 1
            else:
                stats = VerifyStats()
                findings = list(verify_paths([str(root)], stats=stats))
                check_findings(findings, stats)
                outcomes[3 if stats.errors else 0] += 1
        except BaseException:
            print(f"seed {SEED} iteration {it}: mutated {[str(v) for v in victims]}")
            raise
        finally:
            for p in victims:
                p.write_bytes(originals[p])
    assert outcomes[3] > ITERATIONS // 2  # most mutations are found
    print(outcomes)


def test_mutated_copies_through_a_real_process(sources, tmp_path):
    rnd = random.Random(SEED + 1)
    for k in range(3):
        root = Path(shutil.copytree(sources[0], tmp_path / f"copy{k}"))
        for p in rnd.sample(files_of(root), 4):
            p.write_bytes(mutate(p.read_bytes(), rnd))
        r = subprocess.run([sys.executable, "-m", "plog.cli", "verify", "--jobs", "2", str(root), str(sources[1])],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode in (0, 3) and "Traceback" not in r.stderr, (SEED, r.stderr)
        assert r.stderr.startswith("plog verify: checked ")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_log_segment_bytes_verify_without_crashing(sources, tmp_path_factory, data):
    """Hypothesis: arbitrary edits of the active segment's .log (the indexes kept), shrunk
    to a minimal failing example if one crashes."""
    segment = sorted((sources[0] / "events-0").glob("*.log"))[-1]
    original = segment.read_bytes()
    buf = bytearray(original)
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(buf)))
        buf[at:at + data.draw(st.integers(0, 64))] = data.draw(st.binary(max_size=64))
    root = tmp_path_factory.mktemp("hyp") / "events-0"
    shutil.copytree(sources[0] / "events-0", root)
    (root / segment.name).write_bytes(bytes(buf))
    stats = VerifyStats()
    findings = list(verify_paths([str(root)], stats=stats))
    check_findings(findings, stats)
    assert (stats.errors == 0) == (not [f for f in findings if f.severity == "error"])
