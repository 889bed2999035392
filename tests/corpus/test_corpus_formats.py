"""Every record-holding file of the shared corpus walks to its end with valid CRCs,
and its batch counts, offsets and record counts equal the corpus README's table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import CORPUS
from plog.formats.batches import iter_batches
from plog.formats.legacy import LegacyBatch


def _table(readme: Path, prefix: str = "") -> dict[str, dict]:
    """Parse the 'Expected facts per file' rows: | file | bytes | batches | magic | ..."""
    rows = {}
    for line in readme.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 12 or not re.search(r"\.(log|checkpoint|records)$", cells[0]):
            continue
        name, nbytes, batches, magic, codecs, first, last, records, txn, ctrl, pid, end = cells
        rows[prefix + name] = dict(bytes=int(nbytes), batches=int(batches), magic=magic, codecs=codecs,
                                   first=None if first == "None" else int(first),
                                   last=None if last == "None" else int(last), records=int(records),
                                   txn=int(txn), ctrl=int(ctrl), pid=int(pid), end=end)
    return rows


def expected_rows() -> dict[str, dict]:
    if not CORPUS.is_dir():
        return {}
    rows = _table(CORPUS / "README.md")
    rows.update(_table(CORPUS / "vectors" / "README.md"))
    return rows


EXPECTED = expected_rows()


def test_table_covers_every_record_file(corpus):
    on_disk = {str(p.relative_to(corpus)) for p in corpus.rglob("*")
               if p.suffix in (".log", ".records") or (p.suffix == ".checkpoint" and "-" in p.stem
                                                       or p.name == "bootstrap.checkpoint")}
    assert on_disk, "no record files found"
    missing = sorted(on_disk - set(EXPECTED))
    assert not missing, f"files without expectations: {missing}"


def _summarise(data: bytes):
    it = iter_batches(data)
    batches = list(it)
    magics: dict[int, int] = {}
    codecs: dict[str, int] = {}
    records = txn = ctrl = pid = 0
    decoded = 0
    for b in batches:
        b.ensure_valid()
        magics[b.magic] = magics.get(b.magic, 0) + 1
        codecs[b.compression_name] = codecs.get(b.compression_name, 0) + 1
        recs = b.records()  # every record of every (compressed) batch decodes
        decoded += len(recs)
        if isinstance(b, LegacyBatch):
            records += 1
        else:
            assert len(recs) == b.records_count
            records += b.records_count
            txn += b.is_transactional
            ctrl += b.is_control
            pid += b.producer_id != -1
            if recs:
                assert recs[0].offset >= b.base_offset and recs[-1].offset <= b.last_offset
    return it, batches, magics, codecs, records, txn, ctrl, pid, decoded


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_file(corpus, name):
    exp = EXPECTED[name]
    data = (corpus / name).read_bytes()
    assert len(data) == exp["bytes"]
    it, batches, magics, codecs, records, txn, ctrl, pid, decoded = _summarise(data)
    assert len(batches) == exp["batches"]
    assert ",".join(f"{m}:{n}" for m, n in sorted(magics.items())) == exp["magic"]
    assert ",".join(f"{c}:{n}" for c, n in sorted(codecs.items())) == exp["codecs"]
    # The table's "first" comes from a header-only walk: for a legacy entry that is its
    # offset field (a wrapper's last inner offset), for v2 the baseOffset.
    first = batches[0] if batches else None
    assert (None if first is None else first.offset if isinstance(first, LegacyBatch) else first.base_offset) == exp["first"]
    assert (batches[-1].last_offset if batches else None) == exp["last"]
    assert (records, txn, ctrl, pid) == (exp["records"], exp["txn"], exp["ctrl"], exp["pid"])
    if exp["end"] == "clean":
        assert it.trailing is None and it.valid_end == len(data)
    else:
        m = re.match(r"(trailing (\d+) B at (\d+))|(truncated at (\d+) \(len (\d+), have (\d+)\))", exp["end"])
        assert m, exp["end"]
        if m.group(1):
            assert it.trailing is not None
            assert (it.trailing.length, it.trailing.position) == (int(m.group(2)), int(m.group(3)))
        else:
            # "len" is the size field, "have" what follows the 12-byte log overhead
            assert it.trailing.position == int(m.group(5)) and it.trailing.declared_size == 12 + int(m.group(6))
            assert it.trailing.length == 12 + int(m.group(7))
            assert it.trailing.length == len(data) - int(m.group(5))
