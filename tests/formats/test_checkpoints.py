"""Checkpoint-style text files (plog.formats.checkpoints).

Kafka's reader rules and messages for offset and leader-epoch checkpoints and
partition.metadata, Java Properties load/store for meta.properties (every corpus file is
reproduced byte for byte), the clean-shutdown marker, and round trips.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plog.formats import checkpoints as cp
from plog.formats.errors import CheckpointError

from conftest import corpus_files  # noqa: E402
# The corpus is part of the project contract: a missing one fails (the `corpus` fixture).
needs_corpus = pytest.mark.usefixtures("corpus")


def is_offset_checkpoint(name: str) -> bool:
    # KRaft "*.checkpoint" files are record-batch snapshots, not text; quorum-state is JSON.
    return "checkpoint" in name and not name.endswith(".checkpoint") and name != cp.LEADER_EPOCH_CHECKPOINT


def raises(text_or_callable, message: str):
    with pytest.raises(CheckpointError) as e:
        text_or_callable()
    assert str(e.value) == message
    return e.value


# -- offset checkpoints ------------------------------------------------------------------


def test_offset_checkpoint_format_is_sorted_with_trailing_newline():
    text = cp.format_offset_checkpoint({("t", 10): 5, ("t", 2): 7, ("a", 0): 3})
    assert text == "0\n3\na 0 3\nt 2 7\nt 10 5\n"
    assert cp.format_offset_checkpoint({}) == "0\n0\n"
    assert cp.parse_offset_checkpoint(text) == {("a", 0): 3, ("t", 2): 7, ("t", 10): 5}
    key = next(iter(cp.parse_offset_checkpoint(text)))
    assert key.topic == "a" and key.partition == 0


def test_offset_checkpoint_reader_rules():
    assert cp.parse_offset_checkpoint("") == {}
    assert cp.parse_offset_checkpoint("0\n") == {}  # no count line: empty, as Kafka
    assert cp.parse_offset_checkpoint("0\n0\n") == {}
    assert cp.parse_offset_checkpoint("0\r\n1\r\nt\t0  -5 \r\n") == {("t", 0): -5}
    assert cp.parse_offset_checkpoint("0\n1\nt 0 9223372036854775807") == {("t", 0): 2**63 - 1}
    # The same partition twice: the later line wins (HashMap.put), the count counts lines.
    assert cp.parse_offset_checkpoint("0\n2\nt 0 1\nt 0 2\n") == {("t", 0): 2}
    assert cp.parse_offset_checkpoint(b"0\n1\nt 0 +1\n") == {("t", 0): 1}


def test_offset_checkpoint_errors_use_kafka_messages():
    raises(lambda: cp.parse_offset_checkpoint("1\n0\n", "/d/recovery-point-offset-checkpoint"),
           "Unrecognised version:1, expected version: 0 in checkpoint file at: /d/recovery-point-offset-checkpoint")
    raises(lambda: cp.parse_offset_checkpoint("zero\n", "f"), "Malformed line in checkpoint file [f]: zero")
    raises(lambda: cp.parse_offset_checkpoint("0\nx\n", "f"), "Malformed line in checkpoint file [f]: x")
    raises(lambda: cp.parse_offset_checkpoint("0 \n0\n", "f"), "Malformed line in checkpoint file [f]: 0 ")
    raises(lambda: cp.parse_offset_checkpoint("0\n1\nt 0\n", "f"), "Malformed line in checkpoint file [f]: t 0")
    raises(lambda: cp.parse_offset_checkpoint("0\n1\nt 0 1 2\n", "f"), "Malformed line in checkpoint file [f]: t 0 1 2")
    # A leading blank makes an empty first part (String.split keeps it): 4 parts.
    raises(lambda: cp.parse_offset_checkpoint("0\n1\n t 0 1\n", "f"), "Malformed line in checkpoint file [f]:  t 0 1")
    raises(lambda: cp.parse_offset_checkpoint("0\n1\nt x 1\n", "f"), "Malformed line in checkpoint file [f]: t x 1")
    raises(lambda: cp.parse_offset_checkpoint("0\n1\nt 0 9223372036854775808\n", "f"),
           "Malformed line in checkpoint file [f]: t 0 9223372036854775808")
    raises(lambda: cp.parse_offset_checkpoint("0\n1\n\n", "f"), "Malformed line in checkpoint file [f]: ")
    raises(lambda: cp.parse_offset_checkpoint("0\n2\nt 0 1\n", "f"),
           "Expected [2] entries in checkpoint file [f], but found only [1]")
    raises(lambda: cp.parse_offset_checkpoint("0\n-1\n", "f"),
           "Expected [-1] entries in checkpoint file [f], but found only [0]")
    raises(lambda: cp.parse_offset_checkpoint(b"0\n1\n\xff 0 1\n", "f"),
           "Checkpoint file [f] is not valid UTF-8 (byte 4)")


def test_offset_checkpoint_format_rejects_unwritable_entries():
    for bad in ({("a b", 0): 1}, {("", 0): 1}, {("t", 2**31): 1}, {("t", 0): 2**63}):
        with pytest.raises(ValueError):
            cp.format_offset_checkpoint(bad)


topics = st.from_regex(r"[a-zA-Z0-9._-]{1,249}", fullmatch=True)
offset_maps = st.dictionaries(
    st.tuples(topics, st.integers(0, 2**31 - 1)), st.integers(-(2**63), 2**63 - 1), max_size=20
)


@settings(max_examples=150, deadline=None)
@given(offset_maps)
def test_offset_checkpoint_round_trip(offsets):
    text = cp.format_offset_checkpoint(offsets)
    assert cp.parse_offset_checkpoint(text) == offsets
    assert cp.format_offset_checkpoint(cp.parse_offset_checkpoint(text)) == text


# -- leader-epoch checkpoints ------------------------------------------------------------


def test_leader_epoch_checkpoint():
    text = "0\n3\n10 0\n12 2390\n14 3138\n"
    entries = cp.parse_leader_epoch_checkpoint(text)
    assert entries == [(10, 0), (12, 2390), (14, 3138)]
    assert entries[1].epoch == 12 and entries[1].start_offset == 2390
    assert cp.format_leader_epoch_checkpoint(entries) == text
    assert cp.parse_leader_epoch_checkpoint("") == []
    raises(lambda: cp.parse_leader_epoch_checkpoint("0\n1\n1 2 3\n", "p/leader-epoch-checkpoint"),
           "Malformed line in checkpoint file [p/leader-epoch-checkpoint]: 1 2 3")
    raises(lambda: cp.parse_leader_epoch_checkpoint("0\n1\n2147483648 0\n", "e"),
           "Malformed line in checkpoint file [e]: 2147483648 0")
    raises(lambda: cp.parse_leader_epoch_checkpoint("0\n3\n1 0\n", "e"),
           "Expected [3] entries in checkpoint file [e], but found only [1]")
    with pytest.raises(ValueError):
        cp.format_leader_epoch_checkpoint([(2**31, 0)])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1)), max_size=30))
def test_leader_epoch_checkpoint_round_trip(entries):
    text = cp.format_leader_epoch_checkpoint(entries)
    assert cp.parse_leader_epoch_checkpoint(text) == entries


# -- partition.metadata and UUIDs --------------------------------------------------------


def test_partition_metadata():
    text = "version: 0\ntopic_id: h21Hd1FxRjC-20k1lF5oYA"
    meta = cp.parse_partition_metadata(text)
    assert meta.version == 0 and cp.uuid_to_base64url(meta.topic_id) == "h21Hd1FxRjC-20k1lF5oYA"
    assert cp.format_partition_metadata(meta.topic_id) == text
    assert cp.format_partition_metadata("h21Hd1FxRjC-20k1lF5oYA") == text
    # Lines split once on ':\s+'; a trailing newline and a later version are accepted.
    assert cp.parse_partition_metadata("version:  3\ntopic_id:\th21Hd1FxRjC-20k1lF5oYA\n").version == 3


def test_partition_metadata_errors_use_kafka_messages():
    good_id = "h21Hd1FxRjC-20k1lF5oYA"
    raises(lambda: cp.parse_partition_metadata("", "pm"), "Malformed line in partition metadata file [pm]: null")
    raises(lambda: cp.parse_partition_metadata("version: 0", "pm"), "Malformed line in partition metadata file [pm]: null")
    raises(lambda: cp.parse_partition_metadata("version:0\n", "pm"), "Malformed line in partition metadata file [pm]: version:0")
    raises(lambda: cp.parse_partition_metadata("vers: 0\n", "pm"), "Malformed line in partition metadata file [pm]: vers: 0")
    raises(lambda: cp.parse_partition_metadata("version: x\n", "pm"), "Malformed line in partition metadata file [pm]: version: x")
    raises(lambda: cp.parse_partition_metadata(f"version: -1\ntopic_id: {good_id}", "pm"),
           "Unrecognized version of partition metadata file (pm): -1")
    raises(lambda: cp.parse_partition_metadata("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", "pm"),
           "Invalid topic ID in partition metadata file (pm)")
    raises(lambda: cp.parse_partition_metadata("version: 0\ntopic_id: h21Hd1FxRjC+20k1lF5oYA", "pm"),
           "Malformed line in partition metadata file [pm]: topic_id: h21Hd1FxRjC+20k1lF5oYA")
    raises(lambda: cp.parse_partition_metadata("version: 0\ntopic: x", "pm"),
           "Malformed line in partition metadata file [pm]: topic: x")


def test_base64url_uuid_rules():
    u = uuid.UUID("3101e1b4-685c-f63d-6770-b336a6f975eb")
    assert cp.uuid_to_base64url(u) == "MQHhtGhc9j1ncLM2pvl16w"
    assert cp.uuid_to_base64url(u.bytes) == "MQHhtGhc9j1ncLM2pvl16w"
    assert cp.base64url_to_uuid("MQHhtGhc9j1ncLM2pvl16w") == u
    assert cp.base64url_to_uuid("MQHhtGhc9j1ncLM2pvl16w==") == u  # Java accepts padding
    raises(lambda: cp.base64url_to_uuid("MQHhtGhc9j1ncLM2pvl16w="), "Input byte array has wrong 4-byte ending unit")
    raises(lambda: cp.base64url_to_uuid("MQHhtGhc9j1ncLM2pvl1/w"), "Illegal base64 character 2f")
    raises(lambda: cp.base64url_to_uuid("MQHhtGhc9j1ncLM2pvl1éw"), "Illegal base64 character -17")
    raises(lambda: cp.base64url_to_uuid("abc"),
           "Input string `abc` decoded as 2 bytes, which is not equal to the expected 16 bytes of a base64-encoded UUID")
    raises(lambda: cp.base64url_to_uuid("A" * 25),
           "Input string with prefix `AAAAAAAAAAAAAAAAAAAAAAAA` is too long to be decoded as a base64 UUID")
    raises(lambda: cp.base64url_to_uuid("AAAAA"), "Last unit does not have enough valid bits")
    with pytest.raises(ValueError):
        cp.uuid_to_base64url(b"short")


@given(st.binary(min_size=16, max_size=16))
def test_uuid_round_trip(raw):
    text = cp.uuid_to_base64url(raw)
    assert len(text) == 22 and cp.base64url_to_uuid(text).bytes == raw


# -- Java properties ---------------------------------------------------------------------


def test_properties_load_rules():
    text = (
        "# comment\n"
        "  ! another comment \\\n"
        "a=1\n"
        "b : 2\n"
        "c\t3\n"
        "\f d  =  spaced value  \n"
        "e\n"
        "f=\n"
        "g=multi\\\n"
        "    line\\\n"
        "\t  # not a comment\n"
        "h\\ key\\=x\\:y=\\t\\n\\u0041\\\\\\#\n"
        "i=trailing backslash dropped at EOF\\"
    )
    assert cp.parse_properties(text) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "spaced value  ",
        "e": "",
        "f": "",
        "g": "multiline# not a comment",
        "h key=x:y": "\t\nA\\#",
        "i": "trailing backslash dropped at EOF",
    }
    assert cp.parse_properties("k=v\r\nk2=v2\rk3=\\\r\n  v3") == {"k": "v", "k2": "v2", "k3": "v3"}
    assert cp.parse_properties("dup=1\ndup=2") == {"dup": "2"}
    assert cp.parse_properties("k=\\uD83D\\uDE00") == {"k": "\U0001F600"}
    # bytes are ISO-8859-1, as Properties.load(InputStream): UTF-8 'é' reads as two chars.
    assert cp.parse_properties("k=é".encode("utf-8")) == {"k": "Ã©"}
    raises(lambda: cp.parse_properties("k=\\u12"), "Malformed \\uxxxx encoding.")
    raises(lambda: cp.parse_properties("k=\\u12G4"), "Malformed \\uxxxx encoding.")


def test_properties_store_escapes():
    text = cp.format_properties(
        {" key:=#!": " lead\tand\nnl \\ = : # ! é", "k2": "v"}, "Thu Jan 01 00:00:00 UTC 1970", order="given"
    )
    assert text == (
        "#\n#Thu Jan 01 00:00:00 UTC 1970\n"
        "\\ key\\:\\=\\#\\!=\\ lead\\tand\\nnl \\\\ \\= \\: \\# \\! é\n"
        "k2=v\n"
    )
    escaped = cp.format_properties({"k": "é\x01\U0001F600"}, "D", escape_unicode=True)
    assert escaped == "#\n#D\nk=\\u00E9\\u0001\\uD83D\\uDE00\n"
    with pytest.raises(ValueError):
        cp.format_properties({}, "two\nlines")
    with pytest.raises(ValueError):
        cp.format_properties({}, "D", order="random")


def test_properties_orders():
    keys = {"version": "1", "cluster.id": "c", "node.id": "1", "directory.id": "d"}
    date = "D"
    body = lambda order: cp.format_properties(keys, date, order).splitlines()[2:]  # noqa: E731
    assert [line.split("=")[0] for line in body("sorted")] == ["cluster.id", "directory.id", "node.id", "version"]
    assert [line.split("=")[0] for line in body("concurrent-hash-map")] == ["node.id", "directory.id", "version", "cluster.id"]
    assert [line.split("=")[0] for line in body("hashtable")] == ["cluster.id", "version", "directory.id", "node.id"]
    assert [line.split("=")[0] for line in body("given")] == list(keys)
    # String.compareTo order is UTF-16 code-unit order: U+FF5E sorts after an astral char.
    assert cp.format_properties({"\uff5e": "", "\U0001F600": ""}, date).splitlines()[2:] == ["\U0001F600=", "\uff5e="]


def test_java_date_string():
    assert cp.java_date_string(0) == "Thu Jan 01 00:00:00 UTC 1970"
    assert cp.java_date_string(1795225642) == "Sat Nov 21 01:47:22 UTC 2026"


prop_text = st.text(max_size=12)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(prop_text, prop_text, max_size=8),
    st.sampled_from(cp.PROPERTIES_ORDERS),
    st.booleans(),
)
def test_properties_round_trip(props, order, escape_unicode):
    text = cp.format_properties(props, "Sat Nov 21 01:47:22 UTC 2026", order, escape_unicode)
    assert cp.parse_properties(text) == props
    if escape_unicode:  # the OutputStream form is pure ASCII and loads from bytes too
        assert cp.parse_properties(text.encode("ascii")) == props
    if order == "sorted":  # hash-table orders keep insertion order within a bucket; sorted does not
        reordered = dict(reversed(list(props.items())))
        assert cp.format_properties(reordered, "D", order) == cp.format_properties(props, "D", order)


# -- meta.properties ---------------------------------------------------------------------


def test_meta_properties_versions():
    v1 = cp.parse_meta_properties(
        "#\n#Wed Dec 10 19:14:32 GMT 2025\ncluster.id=universe-labs-cluster\n"
        "directory.id=MQHhtGhc9j1ncLM2pvl16w\nnode.id=1\nversion=1\n"
    )
    assert v1 == cp.MetaProperties(1, "universe-labs-cluster", 1, uuid.UUID("3101e1b4-685c-f63d-6770-b336a6f975eb"))
    assert v1.id_property == "node.id"
    assert list(v1.to_properties()) == ["version", "cluster.id", "node.id", "directory.id"]
    v0 = cp.parse_meta_properties("version=0\nbroker.id=3\n")
    assert v0 == cp.MetaProperties(0, None, 3) and v0.broker_id == 3
    assert v0.to_properties() == {"version": "0", "broker.id": "3"}
    assert cp.parse_meta_properties("broker.id=3\n").version == 0  # version defaults to 0
    assert cp.parse_meta_properties("version= 1 \nnode.id=2\ncluster.id=c").version == 1  # trimmed
    text = cp.format_meta_properties(v1, "Wed Dec 10 19:14:32 GMT 2025")
    assert cp.parse_meta_properties(text) == v1


def test_meta_properties_validation_messages():
    raises(lambda: cp.parse_meta_properties("version=0\n"), "Failed to find broker.id")
    raises(lambda: cp.parse_meta_properties("version=1\ncluster.id=c\n"), "Failed to find node.id")
    raises(lambda: cp.parse_meta_properties("version=1\nnode.id=1\n"), "cluster.id was not found.")
    raises(lambda: cp.parse_meta_properties("version=x\n"), "Invalid meta.properties version string 'x'")
    raises(lambda: cp.parse_meta_properties("version=7\n"), "Unknown meta.properties version number 7")
    raises(lambda: cp.parse_meta_properties("version=1\ncluster.id=c\nnode.id=one\n"),
           "Unable to read node.id as a base-10 number.")
    raises(lambda: cp.parse_meta_properties("version=0\nbroker.id=1 \n"),
           "Unable to read broker.id as a base-10 number.")
    raises(lambda: cp.parse_meta_properties("version=1\ncluster.id=c\nnode.id=1\ndirectory.id=xyz\n"),
           "Unable to read directory.id as a Uuid: Input string `xyz` decoded as 2 bytes, which is not "
           "equal to the expected 16 bytes of a base64-encoded UUID")
    raises(lambda: cp.MetaProperties(1, None, 1), "cluster.id was not found.")
    raises(lambda: cp.MetaProperties(0), "Failed to find broker.id")


# -- .kafka_cleanshutdown ----------------------------------------------------------------


def test_clean_shutdown():
    assert cp.parse_clean_shutdown("") is None
    assert cp.parse_clean_shutdown(b"") is None
    assert cp.parse_clean_shutdown('{"version":0,"brokerEpoch":7118}') == 7118
    assert cp.parse_clean_shutdown('{"brokerEpoch":-1,"version":0,"extra":[1]}') == -1
    assert cp.parse_clean_shutdown('{"version":0,"brokerEpoch":null}') is None
    assert cp.parse_clean_shutdown('{"version":0}') is None
    assert cp.format_clean_shutdown() == '{"version":0,"brokerEpoch":-1}'
    assert cp.format_clean_shutdown(42) == '{"version":0,"brokerEpoch":42}'
    for bad in ("{", "[1]", '{"brokerEpoch":"5"}', '{"brokerEpoch":1.5}', '{"brokerEpoch":NaN}',
                '{"brokerEpoch":9223372036854775808}'):
        with pytest.raises(CheckpointError, match="Malformed clean shutdown file"):
            cp.parse_clean_shutdown(bad, "dir/.kafka_cleanshutdown")
    with pytest.raises(ValueError):
        cp.format_clean_shutdown(2**63)


@given(st.integers(-(2**63), 2**63 - 1))
def test_clean_shutdown_round_trip(epoch):
    assert cp.parse_clean_shutdown(cp.format_clean_shutdown(epoch)) == epoch


# -- real files --------------------------------------------------------------------------


@needs_corpus
def test_corpus_offset_checkpoints_parse_and_round_trip():
    files = corpus_files(is_offset_checkpoint)
    assert len(files) >= 40
    for path in files:
        offsets = cp.parse_offset_checkpoint(path.read_bytes(), str(path))
        assert path.name in cp.OFFSET_CHECKPOINT_FILES
        assert cp.parse_offset_checkpoint(cp.format_offset_checkpoint(offsets)) == offsets


@needs_corpus
def test_corpus_leader_epoch_checkpoints_reproduce_exactly():
    files = corpus_files(lambda f: f == cp.LEADER_EPOCH_CHECKPOINT)
    assert files
    for path in files:
        text = path.read_text()
        entries = cp.parse_leader_epoch_checkpoint(text, str(path))
        assert [e.epoch for e in entries] == sorted({e.epoch for e in entries})
        assert cp.format_leader_epoch_checkpoint(entries) == text


@needs_corpus
def test_corpus_partition_metadata_reproduces_exactly():
    files = corpus_files(lambda f: f == cp.PARTITION_METADATA)
    assert files
    for path in files:
        text = path.read_text()
        meta = cp.parse_partition_metadata(text, str(path))
        assert cp.format_partition_metadata(meta.topic_id, meta.version) == text


@needs_corpus
def test_corpus_meta_properties_reproduce_exactly_with_a_jdk_order():
    files = corpus_files(lambda f: f == cp.META_PROPERTIES)
    assert files
    orders_seen = set()
    for path in files:
        text = path.read_text()
        meta = cp.parse_meta_properties(path.read_bytes())
        date = text.splitlines()[1][1:]
        matching = [o for o in ("sorted", "concurrent-hash-map", "hashtable")
                    if cp.format_meta_properties(meta, date, o) == text]
        assert matching, path
        orders_seen.update(matching)
    # The corpus was written by Java 8, Java 9-17 and Java 18+ brokers.
    assert orders_seen == {"sorted", "concurrent-hash-map", "hashtable"}


@needs_corpus
def test_corpus_clean_shutdown_files():
    files = corpus_files(lambda f: f == cp.CLEAN_SHUTDOWN)
    assert files
    for path in files:
        text = path.read_text()
        epoch = cp.parse_clean_shutdown(text, str(path))
        if text:
            assert cp.format_clean_shutdown(epoch) == text
        else:
            assert epoch is None
