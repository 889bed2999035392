"""What ``plog dump`` reads for its PATH arguments (``engine/inspect/dump.py``
``expand_dump_paths``): files as given, directories walked in name order, quoted globs
expanded, and one clear error for a directory or pattern with nothing to dump."""

from __future__ import annotations

import pytest

from plog.engine.errors import NotAKafkaPathError
from plog.engine.inspect.dump import expand_dump_paths


@pytest.fixture
def tree(tmp_path):
    for name in ("t-0/00000000000000000000.log", "t-0/00000000000000000000.index", "t-0/notes.txt",
                 "t-1/00000000000000000000.log", "recovery-point-offset-checkpoint", "meta.properties",
                 "z.txt"):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    return tmp_path


def test_a_directory_gives_its_dumpable_files_in_name_order(tree):
    assert expand_dump_paths([str(tree)]) == [str(tree / n) for n in (
        "meta.properties", "recovery-point-offset-checkpoint",  # the directory's own files first
        "t-0/00000000000000000000.index", "t-0/00000000000000000000.log", "t-1/00000000000000000000.log")]


def test_files_globs_and_missing_paths(tree):
    log0 = str(tree / "t-0/00000000000000000000.log")
    missing = str(tree / "nope.log")
    # Files and missing paths stay as given, in order (the dump reports a missing one in turn).
    assert expand_dump_paths([missing, log0]) == [missing, log0]
    # A quoted glob the shell did not expand: its matches, sorted; a matching directory is walked.
    assert expand_dump_paths([str(tree / "t-*/*.log")]) == [log0, str(tree / "t-1/00000000000000000000.log")]
    assert expand_dump_paths([str(tree / "t-[1]")]) == [str(tree / "t-1/00000000000000000000.log")]


def test_nothing_to_dump_is_one_error(tree):
    (tree / "empty").mkdir()
    with pytest.raises(NotAKafkaPathError, match=r"empty: no Kafka log, index, snapshot or checkpoint files"):
        expand_dump_paths([str(tree / "empty")])
    with pytest.raises(NotAKafkaPathError, match=r"\*\.zz: no file matches this pattern$"):
        expand_dump_paths([str(tree / "*.zz")])
