"""Topic names, partition directory names and segment file names against Kafka's rules."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from conftest import corpus_files

from plog.engine.storage import file_names as t
from plog.engine.errors import EngineError, InvalidTopicError
from plog.engine.storage.file_names import TopicPartition
from plog.formats import checkpoints

UID = uuid.UUID("0123456789abcdef0123456789abcdef")


# -- TopicPartition -----------------------------------------------------------------------


def test_topic_partition_prints_like_kafka_and_is_a_tuple():
    tp = TopicPartition("orders", 3)
    assert str(tp) == "orders-3"
    assert tp == ("orders", 3) == checkpoints.TopicPartition("orders", 3)
    assert hash(tp) == hash(checkpoints.TopicPartition("orders", 3))
    assert isinstance(tp, checkpoints.TopicPartition)
    assert {checkpoints.TopicPartition("orders", 3): 1}[tp] == 1


# -- topic names --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["valid", "TOPIC", "nAmEs", "ar6", "VaL1d", "_0-9_.", "...",
                                  "a" * 249, "__consumer_offsets", "__cluster_metadata"])
def test_legal_topic_names(name):
    t.validate_topic_name(name)
    assert t.is_valid_topic_name(name)


@pytest.mark.parametrize("name, message", [
    ("", "Topic name is illegal, it can't be empty"),
    (".", 'Topic name cannot be "." or ".."'),
    ("..", 'Topic name cannot be "." or ".."'),
    ("a" * 250, "Topic name is illegal, it can't be longer than 249 characters, topic name: " + "a" * 250),
    # length is checked before characters, so a long illegal name gets the length message
    ("é" * 250, "Topic name is illegal, it can't be longer than 249 characters, topic name: " + "é" * 250),
    ("a b", "Topic name \"a b\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"),
    ("ümlaut", "Topic name \"ümlaut\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"),
    ("a/b", "Topic name \"a/b\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"),
    ("a\n", "Topic name \"a\n\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"),
])
def test_illegal_topic_names_with_kafka_messages(name, message):
    with pytest.raises(InvalidTopicError) as e:
        t.validate_topic_name(name)
    assert str(e.value) == message
    assert not t.is_valid_topic_name(name)


def test_topic_length_counts_utf16_units():
    # 125 astral chars are 250 UTF-16 units: Java reports the length, not the characters.
    with pytest.raises(InvalidTopicError, match="longer than 249"):
        t.validate_topic_name("\U0001F600" * 125)


def test_collisions():
    assert t.has_collision("a.b", "a_b")
    assert t.has_collision("a.b", "a.b")
    assert not t.has_collision("a.b", "a-b")
    assert not t.has_collision("a.b", "ab")
    assert t.unify_collision_chars("a.b_c.") == "a_b_c_"
    assert t.has_collision_chars("a_b") and t.has_collision_chars("a.b")
    assert not t.has_collision_chars("a-b")


def test_internal_topics():
    for name in ("__consumer_offsets", "__transaction_state", "__share_group_state"):
        assert t.is_internal(name)
    assert not t.is_internal("__cluster_metadata")
    assert not t.is_internal("orders")
    assert t.CLUSTER_METADATA_TOPIC == "__cluster_metadata"
    assert str(t.CLUSTER_METADATA_TOPIC_PARTITION) == "__cluster_metadata-0"


# -- partition directories ----------------------------------------------------------------


def _corpus_partition_dirs() -> list[Path]:
    dirs = {p.parent for p in corpus_files(lambda n: n.endswith(".log") or n in (
        "leader-epoch-checkpoint", "partition.metadata"))}
    for meta in corpus_files(lambda n: n == "meta.properties"):
        dirs.update(d for d in meta.parent.iterdir() if d.is_dir())
    return sorted(dirs)


def test_every_corpus_partition_dir_parses_as_current(corpus):
    dirs = _corpus_partition_dirs()
    assert len(dirs) > 50
    names = set()
    for d in dirs:
        tp, kind = t.parse_partition_dir_name(d)
        assert kind == "current", d
        assert t.partition_dir_name(tp) == d.name
        assert isinstance(tp, TopicPartition)
        names.add(d.name)
    assert "__cluster_metadata-0" in names
    assert t.parse_partition_dir_name("__cluster_metadata-0") == (("__cluster_metadata", 0), "current")


@pytest.mark.parametrize("name, expected", [
    ("orders-0", (("orders", 0), "current")),
    ("my-topic-12", (("my-topic", 12), "current")),
    ("a.b_c-7", (("a.b_c", 7), "current")),
    ("t-+3", (("t", 3), "current")),  # Integer.parseInt takes a '+' sign
    (f"orders-2.{UID.hex}-delete", (("orders", 2), "delete")),
    (f"my-topic-2.{UID.hex}-future", (("my-topic", 2), "future")),
    (f"a.b-5.{UID.hex}-stray", (("a.b", 5), "stray")),
    ("x-1.y-delete", (("x", 1), "delete")),  # the unique id need not be a uuid
    ("my-topic-1.a-b-delete", (("my-topic", 1), "delete")),  # '-' inside the id
])
def test_parse_partition_dir_names(name, expected):
    assert t.parse_partition_dir_name(name) == expected


@pytest.mark.parametrize("name", [
    "", "orders", "orders-", "-0", "orders-x", "orders-1.5", "orders-2147483648",
    "orders-0-delete",          # no ".<id>" before the suffix
    "orders-0.-delete",         # empty unique id
    "orders.abc-delete",        # no '-' before the '.'
    "orders -0.abc-delete",     # whitespace is not \S
    "-delete", "a-future", "orders-0.abc-Delete",
    "a.b-1.c.d-delete",         # cut at the last '.' leaves partition "1.c"
    "x-1.y.z-delete",           # likewise: partition "1.y"
])
def test_unparsable_partition_dir_names(name, tmp_path):
    with pytest.raises(InvalidTopicError) as e:
        t.parse_partition_dir_name(tmp_path / name if name else name)
    message = str(e.value)
    assert f"'{name}' is not in the form of topic-partition or topic-partition.uniqueId-delete " \
           "(if marked for deletion)." in message
    assert message.startswith("Found directory ")
    assert "\n" not in message


def test_parse_error_names_the_canonical_path(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(InvalidTopicError) as e:
        t.parse_partition_dir_name(tmp_path / "link" / "junk")
    assert str(e.value).startswith(f"Found directory {real / 'junk'}, 'junk' is not")


def test_delete_future_stray_names_round_trip():
    tp = TopicPartition("orders", 4)
    assert t.partition_dir_name(tp) == "orders-4"
    assert t.delete_dir_name(tp, UID) == f"orders-4.{UID.hex}-delete"
    assert t.future_dir_name(tp, UID) == f"orders-4.{UID.hex}-future"
    assert t.stray_dir_name(tp, UID.hex) == f"orders-4.{UID.hex}-stray"
    for make, kind in ((t.delete_dir_name, "delete"), (t.future_dir_name, "future"),
                       (t.stray_dir_name, "stray")):
        assert t.parse_partition_dir_name(make(tp)) == (tp, kind)
    with pytest.raises(ValueError):
        t.delete_dir_name(tp, "not-a-uuid")


def test_random_unique_ids_are_32_lowercase_hex():
    a, b = (t.delete_dir_name(("t", 0)) for _ in range(2))
    assert a != b
    uid = a[len("t-0."):-len("-delete")]
    assert len(uid) == 32 and uid == uid.lower() and int(uid, 16) >= 0


def test_long_topic_delete_and_stray_names_are_capped_at_255(tmp_path):
    topic = "t" * 249
    tp = TopicPartition(topic, 17)
    assert t.parse_partition_dir_name(t.partition_dir_name(tp)) == (tp, "current")
    # the capped name is one the file system takes
    (tmp_path / t.delete_dir_name(tp)).mkdir()
    suffix_len = len(f"-17.{UID.hex}-delete")
    for make, kind, suffix in ((t.delete_dir_name, "delete", "-delete"),
                               (t.stray_dir_name, "stray", "-stray")):
        name = make(tp, UID)
        full_suffix = f"-17.{UID.hex}{suffix}"
        assert len(name) == 255
        assert name == topic[: 255 - len(full_suffix)] + full_suffix
        # parsing gives the truncated topic, as in Kafka
        assert t.parse_partition_dir_name(name) == ((topic[: 255 - len(full_suffix)], 17), kind)
    # a short topic is not truncated
    assert t.delete_dir_name(("short", 17), UID).startswith("short-17.")
    # future names are not capped (Kafka does not cap them)
    assert len(t.future_dir_name(tp, UID)) == 249 + suffix_len


# -- segment file names -------------------------------------------------------------------


def test_filename_prefix_is_20_digits():
    assert t.filename_prefix_from_offset(0) == "00000000000000000000"
    assert t.filename_prefix_from_offset(368769) == "00000000000000368769"
    assert t.filename_prefix_from_offset(2**63 - 1) == "9223372036854775807".rjust(20, "0")
    assert t.filename_prefix_from_offset(-5) == "-00000000000000000005"
    with pytest.raises(ValueError):
        t.filename_prefix_from_offset(2**63)


def test_segment_file_names(tmp_path):
    d = tmp_path
    assert t.log_file_name(d, 5) == d / "00000000000000000005.log"
    assert t.log_file_name(d, 5, t.SWAP_FILE_SUFFIX) == d / "00000000000000000005.log.swap"
    assert t.offset_index_file_name(d, 5) == d / "00000000000000000005.index"
    assert t.offset_index_file_name(d, 5, ".cleaned") == d / "00000000000000000005.index.cleaned"
    assert t.time_index_file_name(d, 5) == d / "00000000000000000005.timeindex"
    assert t.txn_index_file_name(d, 5) == d / "00000000000000000005.txnindex"
    assert t.producer_snapshot_file_name(d, 81908) == d / "00000000000000081908.snapshot"
    for make in (t.log_file_name, t.offset_index_file_name, t.time_index_file_name,
                 t.txn_index_file_name, t.producer_snapshot_file_name):
        for offset in (0, 1, 81908, 2**63 - 1):
            assert t.offset_from_file_name(make(d, offset)) == offset
            assert t.offset_from_file_name(make(d, offset).name) == offset


@pytest.mark.parametrize("name", ["leader-epoch-checkpoint", "partition.metadata", ".log",
                                  "abc.log", "00000000000000007364-0000000001.checkpoint",
                                  "99999999999999999999.log", "noext"])
def test_offset_from_bad_file_names(name):
    with pytest.raises(t.InvalidFileNameError) as e:
        t.offset_from_file_name(name)
    assert isinstance(e.value, ValueError) and isinstance(e.value, EngineError)
    assert name in str(e.value)



def test_offset_from_file_name_takes_java_long_forms():
    assert t.offset_from_file_name("+12.log") == 12
    assert t.offset_from_file_name("-00000000000000000005.log") == -5
    assert t.offset_from_file_name("00000000000000000000.log.deleted") == 0


@pytest.mark.parametrize("name, kind", [
    ("00000000000000000000.log", "log"),
    ("00000000000000000000.index", "index"),
    ("00000000000000000000.timeindex", "timeindex"),
    ("00000000000000000000.txnindex", "txnindex"),
    ("00000000000000000000.snapshot", "snapshot"),
    ("00000000000000007364-0000000001.checkpoint", "checkpoint"),
    ("00000000000000000000.log.deleted", "deleted"),
    ("00000000000000000000.index.cleaned", "cleaned"),
    ("00000000000000000000.log.swap", "swap"),
    ("00000000000000000000.checkpoint.deleted", "deleted"),
    ("leader-epoch-checkpoint", "other"),
    ("partition.metadata", "other"),
    ("quorum-state", "other"),
    ("recovery-point-offset-checkpoint.tmp", "other"),
])
def test_classify_file_name(name, kind):
    assert t.classify_file_name(name) == kind
    assert t.classify_file_name(Path("/x") / name) == kind
    assert kind in t.FILE_KINDS
    assert t.is_log_file(name) == (kind == "log")
    assert t.is_index_file(name) == (kind in ("index", "timeindex", "txnindex"))


def test_strip_temporary_suffix():
    assert t.strip_temporary_suffix("00000000000000000000.log.swap") == "00000000000000000000.log"
    assert t.strip_temporary_suffix("x.index.deleted") == "x.index"
    assert t.strip_temporary_suffix("x.log") == "x.log"


def test_every_corpus_segment_file_classifies_and_parses(corpus):
    files = corpus_files(lambda n: n[:1].isdigit())
    assert files
    kinds = set()
    for f in files:
        kind = t.classify_file_name(f.name)
        kinds.add(kind)
        if kind == "checkpoint":
            continue  # KRaft snapshot names (<offset>-<epoch>) are not segment names
        assert kind != "other", f
        offset = t.offset_from_file_name(f.name)
        assert t.filename_prefix_from_offset(offset) + os.path.splitext(f.name)[1] == f.name
    assert {"log", "index", "timeindex", "snapshot"} <= kinds
