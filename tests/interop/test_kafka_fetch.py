"""The jar cache of the interop suite (``kafka_fetch``), with a fake ``mvn``: no network,
no Java. A complete download is reused; an interrupted or failed one never is."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import kafka_fetch
import pytest
from kafka_versions import KAFKA_VERSIONS, VERSIONS, dump_log_segments_class, small_segment_config

FAKE_MVN = """#!{python}
import os, sys
args = sys.argv[1:]
out = next(a.split("=", 1)[1] for a in args if a.startswith("-DoutputDirectory="))
version = next(a.split("=", 1)[1] for a in args if a.startswith("-Dkafka.version="))
with open(os.environ["FAKE_MVN_LOG"], "a") as f:
    f.write(version + "\\n")
if os.environ.get("FAKE_MVN_FAIL"):
    open(os.path.join(out, "half-written.jar"), "w").close()
    print("[ERROR] Failed to execute goal: could not resolve kafka_2.13:" + version)
    sys.exit(1)
for name in ("kafka_2.13", "kafka-clients", "kafka-storage", "kafka-tools", "kafka-server"):
    open(os.path.join(out, f"{{name}}-{{version}}.jar"), "w").close()
"""


@pytest.fixture
def fake_mvn(tmp_path, monkeypatch):
    mvn = tmp_path / "mvn"
    mvn.write_text(FAKE_MVN.format(python=sys.executable))
    mvn.chmod(mvn.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "mvn.log"
    log.touch()
    monkeypatch.setenv("FAKE_MVN_LOG", str(log))
    monkeypatch.setenv("PLOG_KAFKA_CACHE", str(tmp_path / "cache"))
    return mvn, log


def test_versions_in_one_place():
    assert KAFKA_VERSIONS == {"4": "4.3.1", "3": "3.9.2"}
    assert VERSIONS == ["4.3.1", "3.9.2"]
    assert dump_log_segments_class("4.3.1") == "org.apache.kafka.tools.DumpLogSegments"
    assert dump_log_segments_class("3.9.2") == "kafka.tools.DumpLogSegments"
    assert small_segment_config("4.3.1") == "internal.segment.bytes"
    assert small_segment_config("3.9.2") == "segment.bytes"


def test_default_cache_is_outside_the_tracked_tree(monkeypatch):
    monkeypatch.delenv("PLOG_KAFKA_CACHE", raising=False)
    assert kafka_fetch.cache_dir("4.3.1") == kafka_fetch.REPO / ".kafka-cache" / "4.3.1"
    gitignore = (kafka_fetch.REPO / ".gitignore").read_text().split()
    assert ".kafka-cache/" in gitignore


def test_fetch_then_reuse(fake_mvn):
    mvn, log = fake_mvn
    path = kafka_fetch.fetch("9.8.7", mvn=str(mvn))
    assert path == kafka_fetch.cache_dir("9.8.7") and (path / kafka_fetch.MARKER).is_file()
    assert (path / "kafka_2.13-9.8.7.jar").is_file()
    assert oct(path.stat().st_mode & 0o777) == "0o755"
    assert kafka_fetch.fetch("9.8.7", mvn=str(mvn)) == path
    assert log.read_text().split() == ["9.8.7"]  # the second call did not run mvn
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".partial")] == []


def test_incomplete_folder_is_fetched_again(fake_mvn):
    mvn, log = fake_mvn
    target = kafka_fetch.cache_dir("9.8.7")
    target.mkdir(parents=True)
    (target / "kafka_2.13-9.8.7.jar").touch()  # an interrupted copy: no marker
    kafka_fetch.fetch("9.8.7", mvn=str(mvn))
    assert log.read_text().split() == ["9.8.7"]
    assert kafka_fetch.is_complete("9.8.7")


def test_failed_download_leaves_nothing(fake_mvn, monkeypatch):
    mvn, _log = fake_mvn
    monkeypatch.setenv("FAKE_MVN_FAIL", "1")
    with pytest.raises(kafka_fetch.FetchError, match=r"failed \(exit 1\): \[ERROR\] Failed to execute goal"):
        kafka_fetch.fetch("9.8.7", mvn=str(mvn))
    root = kafka_fetch.cache_root()
    assert sorted(os.listdir(root)) == [".fetch.lock"]


def test_missing_mvn_is_a_one_line_error(fake_mvn, monkeypatch):
    monkeypatch.setenv("PATH", str(Path(fake_mvn[0]).parent / "nowhere"))
    with pytest.raises(kafka_fetch.FetchError, match=r"`mvn` is not on PATH") as e:
        kafka_fetch.fetch("9.8.7")
    assert "\n" not in str(e.value)
