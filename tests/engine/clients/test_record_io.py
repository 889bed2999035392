"""Producer input and consumer output (``engine/clients/record_io.py``).

* ``LineParser`` against Kafka's own ``LineMessageReaderTest`` cases (apache/kafka,
  tools/src/test/java/org/apache/kafka/tools/LineMessageReaderTest.java), with its exact
  error texts.
* JSON lines: ``parse_jsonl(format_jsonl(r))`` round-trips arbitrary bytes; the output
  equals ``json.dumps`` of ``record_to_json``; ``plog dump --format jsonl`` output of real
  corpus segments is accepted and gives the records ``plog.formats`` decodes.
* kcat-style templates, and kafka-console-consumer's ``DefaultMessageFormatter`` output for
  its ``--property`` settings.
"""

from __future__ import annotations

import json
import os
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import CORPUS
from plog.formats.binary_json import encode_bytes
from plog.engine.inspect.dump import DumpOptions, DumpRun
from plog.engine.errors import InputRecordError, PropertyError, TemplateError
from plog.engine.storage.file_records import FileBatches
from plog.engine.clients.console_io import (
    DEFAULT_TEMPLATE,
    LINE_READER_PROPERTIES,
    MESSAGE_FORMATTER_PROPERTIES,
    ConsoleFormat,
    LineParser,
    compile_console_format,
    compile_template,
    properties_to_settings,
    template_parts,
)
from plog.engine.clients.record_io import (
    ConsumerRecord,
    ProducerRecord,
    format_jsonl,
    parse_jsonl,
    record_to_json,
)


def kafka_props(**kw) -> dict:
    """Kafka's ``defaultTestProps``: parse.key and parse.headers on."""
    return {"parse_key": True, "parse_headers": True, **kw}


def run_lines(parser: LineParser, text: bytes) -> list[ProducerRecord]:
    return [parser.parse(line, n) for n, line in enumerate(text.split(b"\n"), 1)]


def R(key, value, headers=()) -> tuple:
    enc = (lambda s: None if s is None else s.encode())
    return enc(key), enc(value), [(k, enc(v)) for k, v in headers]


def as_tuple(rec: ProducerRecord) -> tuple:
    return rec.key, rec.value, rec.headers


# -- LineMessageReader -------------------------------------------------------------------


def test_line_reader():
    p = LineParser(**kafka_props(parse_headers=False))
    assert [as_tuple(r) for r in run_lines(p, b"key0\tvalue0\nkey1\tvalue1")] == [R("key0", "value0"),
                                                                                  R("key1", "value1")]


def test_line_reader_header():
    p = LineParser(**kafka_props())
    rec = p.parse(b"headerKey0:headerValue0,headerKey1:headerValue1\tkey0\tvalue0\n", 1)
    assert as_tuple(rec) == R("key0", "value0", [("headerKey0", "headerValue0"), ("headerKey1", "headerValue1")])
    assert rec.partition is None and rec.timestamp is None


def test_minimal_valid_input_with_header_key_and_value():
    assert as_tuple(LineParser(**kafka_props()).parse(b":\t\t", 1)) == R("", "", [("", "")])


def test_key_missing_value():
    assert as_tuple(LineParser(**kafka_props(parse_headers=False)).parse(b"key\t", 1)) == R("key", "")


def test_demarcations_longer_than_one():
    p = LineParser(**kafka_props(key_separator=b"\t\t", headers_delimiter=b"\t\t", headers_separator=b"---",
                                 headers_key_separator=b"::::"))
    rec = p.parse(b"headerKey0.0::::headerValue0.0---headerKey1.0::::\t\tkey\t\tvalue", 1)
    assert as_tuple(rec) == R("key", "value", [("headerKey0.0", "headerValue0.0"), ("headerKey1.0", "")])


def test_line_reader_header_no_key():
    rec = LineParser(**kafka_props(parse_key=False)).parse(b"headerKey:headerValue\tvalue\n", 1)
    assert as_tuple(rec) == R(None, "value", [("headerKey", "headerValue")])


def test_line_reader_only_value():
    for parser in (LineParser(), LineParser(**kafka_props(parse_key=False, parse_headers=False))):
        assert as_tuple(parser.parse(b"value\n", 1)) == R(None, "value")
        assert as_tuple(parser.parse(b"a\tb:c,d", 1)) == R(None, "a\tb:c,d")


def test_custom_delimiters_and_varying_header_counts():
    p = LineParser(**kafka_props(key_separator=b"#", headers_delimiter=b"!", headers_separator=b"&",
                                 headers_key_separator=b":"))
    text = b"headerKey0.0:headerValue0.0&headerKey0.1:headerValue0.1!key0#value0\nheaderKey1.0:headerValue1.0!key1#value1"
    assert [as_tuple(r) for r in run_lines(p, text)] == [
        R("key0", "value0", [("headerKey0.0", "headerValue0.0"), ("headerKey0.1", "headerValue0.1")]),
        R("key1", "value1", [("headerKey1.0", "headerValue1.0")]),
    ]


def test_missing_key_separator():
    p = LineParser(**kafka_props())
    p.parse(b"headerKey0.0:headerValue0.0,headerKey0.1:headerValue0.1\tkey0\tvalue0", 1)
    with pytest.raises(InputRecordError) as e:
        p.parse(b"headerKey1.0:headerValue1.0\tkey1[MISSING-DELIMITER]value1", 2)
    assert e.value.line_number == 2
    assert str(e.value) == ("line 2: No key separator found on line number 2: "
                            "'headerKey1.0:headerValue1.0\tkey1[MISSING-DELIMITER]value1'")


def test_missing_header_key_separator():
    with pytest.raises(InputRecordError) as e:
        LineParser(**kafka_props()).parse(b"key[MISSING-DELIMITER]val\tkey0\tvalue0\n", 1)
    assert str(e.value) == "line 1: No header key separator found in pair 'key[MISSING-DELIMITER]val' on line number 1"


def test_missing_headers_delimiter():
    with pytest.raises(InputRecordError) as e:
        LineParser(**kafka_props()).parse(b"just a value", 4)
    assert str(e.value) == "line 4: No headers delimiter found on line number 4: 'just a value'"


@pytest.mark.parametrize("kw,message", [
    (dict(headers_delimiter=b"\t", headers_separator=b"\t", headers_key_separator=b"\t"),
     "headers.delimiter and headers.separator may not be equal"),
    (dict(headers_delimiter=b"\t", headers_separator=b",", headers_key_separator=b"\t"),
     "headers.delimiter and headers.key.separator may not be equal"),
    (dict(headers_delimiter=b"\t", headers_separator=b",", headers_key_separator=b","),
     "headers.separator and headers.key.separator may not be equal"),
    (dict(headers_delimiter=b"-", headers_separator=b":", headers_key_separator=b"/", null_marker=b"-"),
     "null.marker and headers.delimiter may not be equal"),
    (dict(headers_delimiter=b"-", headers_separator=b":", headers_key_separator=b"/", null_marker=b":"),
     "null.marker and headers.separator may not be equal"),
    (dict(headers_delimiter=b"-", headers_separator=b":", headers_key_separator=b"/", null_marker=b"/"),
     "null.marker and headers.key.separator may not be equal"),
    (dict(null_marker=b"\t", headers_delimiter=b"|"), "null.marker and key.separator may not be equal"),
    (dict(key_separator=b""), "key.separator may not be empty"),
    (dict(headers_separator=b""), "headers.separator may not be empty"),
])
def test_configurations_kafka_rejects(kw, message):
    with pytest.raises(ValueError) as e:
        LineParser(**kafka_props(**kw))
    assert str(e.value) == message


def test_ignore_error_in_input():
    p = LineParser(**kafka_props(ignore_error=True))
    text = (b"headerKey0.0:headerValue0.0\tkey0\tvalue0\n"
            b"headerKey1.0:headerValue1.0,headerKey1.1:headerValue1.1[MISSING-HEADER-DELIMITER]key1\tvalue1\n"
            b"headerKey2.0:headerValue2.0\tkey2[MISSING-KEY-DELIMITER]value2\n"
            b"headerKey3.0:headerValue3.0[MISSING-HEADER-DELIMITER]key3[MISSING-KEY-DELIMITER]value3")
    assert [as_tuple(r) for r in run_lines(p, text)] == [
        R("key0", "value0", [("headerKey0.0", "headerValue0.0")]),
        R(None, "value1", [("headerKey1.0", "headerValue1.0"),
                           ("headerKey1.1", "headerValue1.1[MISSING-HEADER-DELIMITER]key1")]),
        R(None, "key2[MISSING-KEY-DELIMITER]value2", [("headerKey2.0", "headerValue2.0")]),
        R(None, "headerKey3.0:headerValue3.0[MISSING-HEADER-DELIMITER]key3[MISSING-KEY-DELIMITER]value3"),
    ]


def test_malformed_header_ignore_error():
    rec = LineParser(**kafka_props(ignore_error=True)).parse(b"key-val\tkey0\tvalue0\n", 1)
    assert as_tuple(rec) == R("key0", "value0", [("key-val", None)])


NULL_INPUT = b"key\t\nkey\t<NULL>\nkey\t<NULL>value\n<NULL>\tvalue\n<NULL>\t<NULL>"


def test_null_marker():
    p = LineParser(**kafka_props(parse_headers=False, null_marker=b"<NULL>"))
    assert [as_tuple(r) for r in run_lines(p, NULL_INPUT)] == [
        R("key", ""), R("key", None), R("key", "<NULL>value"), R(None, "value"), R(None, None)]
    p = LineParser(**kafka_props(parse_headers=False))
    assert [as_tuple(r) for r in run_lines(p, NULL_INPUT)] == [
        R("key", ""), R("key", "<NULL>"), R("key", "<NULL>value"), R("<NULL>", "value"), R("<NULL>", "<NULL>")]


NULL_HEADERS_INPUT = (b"h0:v0,h1:v1\t<NULL>\tvalue\n"
                      b"<NULL>\tkey\t<NULL>\n"
                      b"h0:,h1:v1\t<NULL>\t<NULL>\n"
                      b"h0:<NULL>,h1:v1\tkey\t<NULL>\n"
                      b"h0:<NULL>,h1:<NULL>value\tkey\t<NULL>")


def test_null_marker_with_headers():
    h1 = ("h1", "v1")
    p = LineParser(**kafka_props(null_marker=b"<NULL>"))
    assert [as_tuple(r) for r in run_lines(p, NULL_HEADERS_INPUT)] == [
        R(None, "value", [("h0", "v0"), h1]),
        R("key", None),
        R(None, None, [("h0", ""), h1]),
        R("key", None, [("h0", None), h1]),
        R("key", None, [("h0", None), ("h1", "<NULL>value")]),
    ]
    # Without the marker, line 2 is not valid any more.
    p = LineParser(**kafka_props())
    lines = NULL_HEADERS_INPUT.split(b"\n")
    assert as_tuple(p.parse(lines[0], 1)) == R("<NULL>", "value", [("h0", "v0"), h1])
    with pytest.raises(InputRecordError) as e:
        p.parse(lines[1], 2)
    assert str(e.value) == "line 2: No header key separator found in pair '<NULL>' on line number 2"
    assert as_tuple(p.parse(lines[2], 3)) == R("<NULL>", "<NULL>", [("h0", ""), h1])
    assert as_tuple(p.parse(lines[3], 4)) == R("key", "<NULL>", [("h0", "<NULL>"), h1])
    assert as_tuple(p.parse(lines[4], 5)) == R("key", "<NULL>", [("h0", "<NULL>"), ("h1", "<NULL>value")])


def test_null_marker_header_key_throws():
    line = b"<NULL>:v0,h1:v1\tkey\tvalue\n"
    for ignore in (False, True):  # Kafka throws here even with ignore.error
        with pytest.raises(InputRecordError) as e:
            LineParser(**kafka_props(null_marker=b"<NULL>", ignore_error=ignore)).parse(line, 1)
        assert str(e.value) == "line 1: Header keys should not be equal to the null marker '<NULL>' as they can't be null"
    assert as_tuple(LineParser(**kafka_props()).parse(line, 1)) == R("key", "value", [("<NULL>", "v0"), ("h1", "v1")])


def test_value_only_with_null_marker_and_kcat_z():
    p = LineParser(null_marker=b"")  # kcat -Z: an empty value is a tombstone
    assert p.parse(b"\n", 1).value is None
    assert p.parse(b"x\r\n", 1).value == b"x"
    p = LineParser(null_marker=b"NULL")
    assert p.parse(b"NULL", 1).value is None and p.parse(b"NULLx", 1).value == b"NULLx"


def test_header_list_split_like_java():
    p = LineParser(parse_headers=True)
    # Java's Pattern.split drops trailing empty strings: "a:1,," is one header, ",,," none.
    assert p.parse(b"a:1,,\tv", 1).headers == [("a", b"1")]
    assert p.parse(b",,,\tv", 1).headers == []
    # ...but keeps leading and inner ones, which then lack the key separator.
    with pytest.raises(InputRecordError, match="pair '' on line number 1"):
        p.parse(b",a:1\tv", 1)
    with pytest.raises(InputRecordError, match="pair '' on line number 1"):
        p.parse(b"\tv", 1)  # an empty header section is one empty pair, as in Kafka
    assert LineParser(parse_headers=True, ignore_error=True).parse(b"\tv", 1).headers == [("", None)]
    # The first header key separator splits; the value may contain more.
    assert p.parse(b"a:b:c\tv", 1).headers == [("a", b"b:c")]


def test_crlf_and_binary_bytes():
    p = LineParser(**kafka_props(parse_headers=False))
    assert as_tuple(p.parse(b"k\tv\r\n", 1)) == R("k", "v")
    assert as_tuple(p.parse(b"k\tv\r", 1)) == R("k", "v")
    assert as_tuple(p.parse(b"k\tv\rw", 1)) == R("k", "v\rw")  # only a trailing CR goes
    rec = p.parse(b"\xff\xfe\t\x00\xed\xa0\x80", 1)
    assert (rec.key, rec.value) == (b"\xff\xfe", b"\x00\xed\xa0\x80")
    rec = LineParser(parse_headers=True).parse(b"\xff:\xfe\tv", 1)
    assert rec.headers == [("\udcff", b"\xfe")]  # header keys: surrogateescape, like plog.formats


def test_error_message_is_one_line_and_bounded():
    p = LineParser(parse_key=True)
    with pytest.raises(InputRecordError) as e:
        p.parse(b"a\rb" + b"x" * 10_000, 9)
    message = str(e.value)
    assert "\n" not in message and "\r" not in message and len(message) < 400


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40), st.booleans(), st.booleans(), st.booleans(),
       st.sampled_from([None, b"", b"<N>", b"N"]))
def test_line_parser_only_raises_input_record_errors(line, key, headers, ignore, marker):
    p = LineParser(parse_key=key, parse_headers=headers, ignore_error=ignore, null_marker=marker)
    try:
        rec = p.parse(line, 3)
    except InputRecordError as e:
        assert e.line_number == 3 and "\n" not in str(e)
        return
    assert rec.value is None or isinstance(rec.value, bytes)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=20).filter(lambda b: b"\t" not in b and b"\n" not in b and b"\r" not in b),
       st.binary(max_size=20).filter(lambda b: b"\n" not in b and not b.endswith(b"\r")))
def test_key_and_value_bytes_pass_through(key, value):
    rec = LineParser(parse_key=True).parse(key + b"\t" + value + b"\n", 1)
    assert (rec.key, rec.value) == (key, value)


# -- JSON lines --------------------------------------------------------------------------

# Bytes that stress the binary-safe convention: invalid UTF-8, UTF-8-encoded surrogates
# (which Python's decoder rejects), overlong forms, noncharacters, JSON's special characters.
SPECIAL = [b"\xed\xa0\x80", b"\xed\xb2\x80", b"\xed\xbf\xbf", b"\xf4\x90\x80\x80", b"\xc0\x80", b"\xff",
           "\u2028\u2029".encode(), "\ufffe\uffff".encode(), "\U0010ffff".encode(), b"\x00", b'"', b"\\",
           b"\n", b"\x7f", b"{\"base64\":\"AA==\"}", "é".encode(), b"\xc3"]
some_bytes = st.one_of(
    st.binary(max_size=30),
    st.text(max_size=20).map(lambda s: s.encode("utf-8", "surrogatepass")),
    st.lists(st.one_of(st.sampled_from(SPECIAL), st.binary(max_size=3)), max_size=6).map(b"".join),
)
maybe_bytes = st.one_of(st.none(), some_bytes)
header_key = some_bytes.map(lambda b: b.decode("utf-8", "surrogateescape"))
consumer_records = st.builds(
    ConsumerRecord,
    topic=st.from_regex(r"[a-zA-Z0-9._-]{1,20}", fullmatch=True),
    partition=st.integers(0, 2**31 - 1),
    offset=st.integers(0, 2**63 - 1),
    timestamp=st.integers(0, 2**63 - 1),
    timestamp_type=st.sampled_from(["CreateTime", "LogAppendTime"]),
    key=maybe_bytes,
    value=maybe_bytes,
    headers=st.lists(st.tuples(header_key, maybe_bytes), max_size=4).map(tuple),
    leader_epoch=st.one_of(st.none(), st.integers(0, 100)),
)


@settings(max_examples=500, deadline=None)
@given(consumer_records)
def test_jsonl_round_trip(rec):
    line = format_jsonl(rec)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    back = parse_jsonl(line, 1)
    assert back == ProducerRecord(rec.value, rec.key, list(rec.headers), rec.partition, rec.timestamp)
    # The fast path writes exactly what json.dumps writes for record_to_json.
    obj = record_to_json(rec)
    assert line == (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    assert list(json.loads(line)) == ["topic", "partition", "offset", "timestamp", "timestamp_type", "key",
                                      "value", "headers"]


def test_jsonl_shape():
    rec = ConsumerRecord("orders", 3, 42, 1_700_000_000_000, "CreateTime", b"k", b"\xff\x00",
                         (("h", b"v"), ("n", None), ("\udcff", b"x")))
    assert json.loads(format_jsonl(rec)) == {
        "topic": "orders", "partition": 3, "offset": 42, "timestamp": 1_700_000_000_000,
        "timestamp_type": "CreateTime", "key": "k", "value": {"base64": "/wA="},
        "headers": [{"key": "h", "value": "v"}, {"key": "n", "value": None},
                    {"key": {"base64": "/w=="}, "value": "x"}],
    }
    tomb = ConsumerRecord("t", 0, 0, 5, "LogAppendTime", None, None, ())
    assert format_jsonl(tomb) == (b'{"topic":"t","partition":0,"offset":0,"timestamp":5,'
                                  b'"timestamp_type":"LogAppendTime","key":null,"value":null,"headers":[]}\n')
    assert format_jsonl(ConsumerRecord("t", 0, 0, 5, "CreateTime", None, "é\u2028".encode(), ())) \
        .endswith('"value":"é\u2028","headers":[]}\n'.encode())  # ensure_ascii=False


def test_v0_timestamp_reads_as_none():
    rec = ConsumerRecord("t", 0, 0, -1, "NoTimestampType", None, b"v", ())
    assert parse_jsonl(format_jsonl(rec), 1).timestamp is None


@pytest.mark.parametrize("line,expected", [
    (b'{"value":"v"}', ProducerRecord(b"v")),
    (b'{"value":null}\r\n', ProducerRecord(None)),
    (b'  {"value":"v","key":"k","partition":2,"timestamp":7}  ', ProducerRecord(b"v", b"k", [], 2, 7)),
    (b'{"value":"v","partition":null,"timestamp":null,"headers":null,"key":null}', ProducerRecord(b"v")),
    (b'{"value":"v","timestamp":-1}', ProducerRecord(b"v")),
    (b'{"value":{"base64":"AP8="},"headers":[{"key":"a","value":{"base64":""}}]}',
     ProducerRecord(b"\x00\xff", None, [("a", b"")])),
    (b'{"topic":"other","offset":99,"timestamp_type":"LogAppendTime","value":"v","extra":[1]}', ProducerRecord(b"v")),
    # what older plog versions wrote: the same fields in camelCase
    (b'{"topic":"other","offset":99,"timestampType":"LogAppendTime","value":"v","extra":[1]}', ProducerRecord(b"v")),
    (b'{"value":"\\ud800"}', ProducerRecord(b"\xed\xa0\x80")),  # a lone surrogate escape: surrogatepass
    # headers as an object: names once each, values in any binary-safe form, in order
    (b'{"value":"v","headers":{"b":"1","a":{"base64":"/w=="},"n":null}}',
     ProducerRecord(b"v", None, [("b", b"1"), ("a", b"\xff"), ("n", None)])),
    (b'{"value":"v","headers":{}}', ProducerRecord(b"v")),
    # plog dump --format jsonl
    (b'{"type":"record","file":"x.log","offset":5,"timestamp_type":"CreateTime","timestamp":9,"key_size":-1,'
     b'"value_size":1,"sequence":-1,"header_keys":["h"],"headers":[{"key":"h","value":null}],"key":null,"value":"v"}',
     ProducerRecord(b"v", None, [("h", None)], None, 9)),
    (b'{"type":"record","file":"x.log","offset":5,"timestamp":-1,"is_valid":true,"crc":1,"key":"k","value":"v"}',
     ProducerRecord(b"v", b"k")),  # a legacy v0 message: no headers, no timestamp
    # ... and as older plog versions wrote it (camelCase)
    (b'{"type":"record","file":"x.log","offset":5,"timestampType":"CreateTime","timestamp":9,"keySize":-1,'
     b'"valueSize":1,"sequence":-1,"headerKeys":["h"],"headers":[{"key":"h","value":null}],"key":null,"value":"v"}',
     ProducerRecord(b"v", None, [("h", None)], None, 9)),
    (b'{"type":"record","file":"x.log","offset":5,"timestamp":-1,"isValid":true,"crc":1,"key":"k","value":"v"}',
     ProducerRecord(b"v", b"k")),
    (b'{"type":"record","partition":4,"value":"v"}', ProducerRecord(b"v")),  # dump objects have no partition
    (b'{"type":"record","file":"x.log","offset":5,"timestamp":9,"key":{"base64":"AAA="},"value":{"base64":"AAA="},'
     b'"control":{"type":"COMMIT","version":0,"coordinatorEpoch":0}}', None),
    (b'{"type":"batch","file":"x.log","base_offset":0}', None),
    (b'{"type":"file","file":"x.log","kind":"log","base_offset":0}', None),
    (b'{"type":"batch","file":"x.log","baseOffset":0}', None),
    (b'{"type":"file","file":"x.log","kind":"log","baseOffset":0}', None),
    (b'{"type":"index-entry","file":"x.index","offset":1,"position":2}', None),
    (b"", None),
    (b"  \r\n", None),
])
def test_parse_jsonl(line, expected):
    assert parse_jsonl(line, 1) == expected


@pytest.mark.parametrize("line,fragment", [
    (b"{", "invalid JSON at column 2"),
    (b"value", "invalid JSON at column 1"),
    (b'{"value":"v"} x', "invalid JSON"),
    (b'{"value":"\xff"}', "not UTF-8"),
    (b"\xef\xbb\xbf{}", "invalid JSON"),  # a BOM
    (b"[" * 100_000 + b"]" * 100_000, "invalid JSON"),
    (b'{"value":' + b"9" * 5000 + b"}", "invalid JSON"),
    (b'[{"value":"v"}]', "expected a JSON object, got list"),
    (b'"v"', "expected a JSON object, got str"),
    (b"null", "expected a JSON object, got null"),
    (b'{"key":"k"}', 'missing "value" (use null for a tombstone)'),
    (b'{"type":"record","key":"k"}', 'missing "value"'),
    (b'{"value":5}', '"value": expected null, a string or {"base64": "..."}'),
    (b'{"value":{"base64":"!!"}}', '"value": invalid base64'),
    (b'{"value":{"base64":"AA==","x":1}}', '"value": expected'),
    (b'{"value":"v","key":[]}', '"key": expected'),
    (b'{"value":"v","timestamp":-2}', '"timestamp" must be an integer >= 0 (or -1 for none), got -2'),
    (b'{"value":"v","timestamp":1.5}', '"timestamp" must be'),
    (b'{"value":"v","timestamp":"5"}', '"timestamp" must be'),
    (b'{"value":"v","timestamp":true}', '"timestamp" must be'),
    (b'{"value":"v","timestamp":9223372036854775808}', '"timestamp" must be'),
    (b'{"value":"v","partition":-1}', '"partition" must be an integer >= 0, got -1'),
    (b'{"value":"v","partition":2147483648}', '"partition" must be'),
    (b'{"value":"v","partition":false}', '"partition" must be'),
    (b'{"value":"v","headers":"a:b"}', '"headers" must be a list of {"key": ..., "value": ...} or an object'),
    (b'{"value":"v","headers":{"a":"b","a":"c"}}', '"headers": "a" is given twice; repeated header names need '
                                                    'the list form'),
    (b'{"value":"v","headers":{"a":1}}', '"headers"."a": expected null, a string or {"base64": "..."}'),
    (b'{"value":"v","headers":{"a":{"base64":"!"}}}', '"headers"."a": invalid base64'),
    (b'{"value":"v","headers":["a","b"]}', '"headers"[0] must be an object'),
    (b'{"value":"v","headers":[{"key":"a"}]}', '"headers"[0] must be an object'),
    (b'{"value":"v","headers":[{"key":null,"value":"b"}]}', '"headers"[0]: a header key cannot be null'),
    (b'{"value":"v","headers":[{"key":"a","value":1}]}', '"headers"[0]: expected'),
])
def test_parse_jsonl_errors(line, fragment):
    with pytest.raises(InputRecordError) as e:
        parse_jsonl(line, 12)
    assert e.value.line_number == 12
    message = str(e.value)
    assert message.startswith("line 12: ") and fragment in message and "\n" not in message


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=60),
                 st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                              lambda c: st.lists(c, max_size=3) | st.dictionaries(
                                  st.sampled_from(["value", "key", "headers", "timestamp", "partition", "type",
                                                   "base64", "control"]), c, max_size=4),
                              max_leaves=10).map(lambda o: json.dumps(o).encode())))
def test_parse_jsonl_only_raises_input_record_errors(line):
    try:
        rec = parse_jsonl(line, 1)
    except InputRecordError as e:
        assert "\n" not in str(e)
        return
    assert rec is None or isinstance(rec, ProducerRecord)


# -- plog dump --format jsonl of real segments -------------------------------------------

DUMP_SEGMENTS = [
    # v2 records with headers (IntelliJ's Kafka plugin)
    "BiggerBrain__kafka/data/lsx1-0",
    # a transactional record and its COMMIT marker (a control batch)
    "ItumelengMogase__Real-Time-Data-Pipeline-for-Patient-Admissions/kafka-data/_confluent-ksql-default__command_topic-0",
    # binary keys and values (Kafka Streams changelog), with index, time index and snapshot
    "rjmfernandes__flink-on-prem/data/_confluent-controlcenter-7-6-0-1-KSTREAM-OUTERTHIS-0000000105-store-changelog-0",
]


@pytest.mark.parametrize("partition_dir", DUMP_SEGMENTS)
def test_dump_jsonl_is_producer_input(partition_dir):
    directory = CORPUS / partition_dir
    if not directory.is_dir():
        pytest.fail(f"corpus partition {partition_dir} missing from {CORPUS}")
    # Every file of the partition directory, so that non-record objects are skipped too.
    rel = os.path.relpath(directory, os.getcwd())
    out: list[str] = []
    run = DumpRun(DumpOptions(print_data_log=True, format="jsonl"), out.append, lambda line: None)
    for name in sorted(os.listdir(directory)):
        run.dump(os.path.join(rel, name))
    run.finish()
    lines = [line for chunk in out for line in chunk.split("\n")]
    parsed = [parse_jsonl(line.encode(), n) for n, line in enumerate(lines, 1)]
    got = [r for r in parsed if r is not None]

    expected = []
    for seg in sorted(directory.glob("*.log")):
        for batch in FileBatches(seg):
            if batch.is_control:
                continue
            for r in batch.records():
                expected.append(ProducerRecord(r.value, r.key, list(r.headers), None,
                                               None if r.timestamp == -1 else r.timestamp))
    assert expected and got == expected
    kinds = {json.loads(line).get("type") for line in lines}
    assert "record" in kinds and len(kinds) > 1  # other objects were there, and skipped


def test_dump_control_records_are_skipped():
    directory = CORPUS / DUMP_SEGMENTS[1]
    if not directory.is_dir():
        pytest.fail(f"corpus partition missing from {CORPUS}")
    out: list[str] = []
    run = DumpRun(DumpOptions(print_data_log=True, format="jsonl"), out.append, lambda line: None)
    run.dump(str(directory / "00000000000000000000.log"))
    records = [json.loads(line) for line in out if json.loads(line)["type"] == "record"]
    assert any("control" in r for r in records)
    assert [parse_jsonl(json.dumps(r).encode(), 1) is None for r in records] == ["control" in r for r in records]


# -- templates ---------------------------------------------------------------------------

REC = ConsumerRecord("orders", 3, 42, 1_700_000_000_123, "CreateTime", b"k1", b"hello",
                     (("a", b"1"), ("b", None), ("c", b"")))
NULLS = ConsumerRecord("orders", 0, 7, -1, "NoTimestampType", None, None, ())
EMPTY = ConsumerRecord("orders", 0, 8, 5, "CreateTime", b"", b"", ())


@pytest.mark.parametrize("fmt,rec,expected", [
    ("%v\n", REC, b"hello\n"),
    ("%s", REC, b"hello"),  # kcat's name for the value
    ("%t %p %o", REC, b"orders 3 42"),
    ("%k=%v", REC, b"k1=hello"),
    ("%K %S", REC, b"2 5"),
    ("%T", REC, b"1700000000123"),
    ("%h", REC, b"a=1,b=NULL,c="),  # kcat: a null header value prints as NULL
    ("%h", NULLS, b""),
    ("[%k][%v] %K %S %T", NULLS, b"[][] -1 -1 -1"),  # null prints as nothing; lengths tell
    ("[%k][%v] %K %S", EMPTY, b"[][] 0 0"),
    ("%R", REC, struct.pack(">i", 5)),
    ("%R", NULLS, b"\xff\xff\xff\xff"),
    ("100%% %v", REC, b"100% hello"),
    ("%%v", REC, b"%v"),
    ("", REC, b""),
    ("plain", REC, b"plain"),
    ("é %v", REC, "é hello".encode()),
    (r"%k\t%v\r\n", REC, b"k1\thello\r\n"),
    (r"a\\b", REC, b"a\\b"),
    (r"\0", REC, b"\x00"),
    (r"\x41\x7e\xff", REC, b"A~\xff"),
    (r"\x41A", REC, b"\x1a"),  # kcat's strtoul: every hex digit, the low byte kept
    (r"\012|\65|\0x42", REC, b"\n|A|B"),  # strtoul base 0: octal, decimal, hex
    (r"\q\%v", REC, b"q\\hello"),  # other escapes: the character; a backslash before % stays
    ("end\\", REC, b"end\\"),
])
def test_templates(fmt, rec, expected):
    assert compile_template(fmt)(rec) == expected


def test_default_template():
    assert DEFAULT_TEMPLATE == "%v\n"
    f = compile_template(DEFAULT_TEMPLATE)
    assert f(REC) == b"hello\n" and f(NULLS) == b"\n"


def test_template_compiles_to_merged_parts():
    parts = template_parts(r"%t:%p\t%%%o\n")
    assert [p if isinstance(p, bytes) else p.__name__ for p in parts] == ["_topic", b":", "_partition", b"\t%",
                                                                        "_offset", b"\n"]


@pytest.mark.parametrize("fmt,fragment", [
    ("%x", "unknown template token '%x'"),
    ("%v %e", "unknown template token '%e'"),
    ("%", "ends with a lone '%'"),
    ("%v %", "ends with a lone '%'"),
    (r"\xg", "bad escape"),
])
def test_template_errors(fmt, fragment):
    with pytest.raises(TemplateError) as e:
        compile_template(fmt)
    message = str(e.value)
    assert fragment in message and "\n" not in message and isinstance(e.value, ValueError)
    if "%" in fragment:
        assert "%t topic" in message  # lists the tokens


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=20))
def test_random_templates_compile_or_raise_the_typed_error(fmt):
    try:
        f = compile_template(fmt)
    except TemplateError:
        return
    assert isinstance(f(REC), bytes) and isinstance(f(NULLS), bytes)


def test_record_to_json_is_binary_safe_json():
    obj = record_to_json(REC)
    assert obj["key"] == encode_bytes(REC.key) and obj["headers"][1] == {"key": "b", "value": None}


# -- kafka-console-consumer's DefaultMessageFormatter (--property) -----------------------------


@pytest.mark.parametrize("settings,rec,expected", [
    ({}, REC, b"hello\n"),
    ({}, NULLS, b"null\n"),
    ({"print_key": True}, REC, b"k1\thello\n"),
    ({"print_key": True}, NULLS, b"null\tnull\n"),
    ({"print_key": True, "key_separator": b" => ", "null_literal": b""}, NULLS, b" => \n"),
    ({"print_timestamp": True, "print_partition": True, "print_offset": True, "print_headers": True,
      "print_key": True}, REC, b"CreateTime:1700000000123\tPartition:3\tOffset:42\ta:1,b:null,c:\tk1\thello\n"),
    ({"print_timestamp": True, "print_headers": True, "headers_separator": b"|"}, NULLS,
     b"NO_TIMESTAMP\tNO_HEADERS\tnull\n"),
    ({"print_headers": True, "headers_separator": b"|", "print_value": False}, REC, b"a:1|b:null|c:\n"),
    ({"print_offset": True, "print_value": False, "line_separator": b"\r\n"}, REC, b"Offset:42\r\n"),
    ({"print_value": False}, REC, b""),  # nothing chosen: nothing written, not even a line separator
    ({"print_key": True, "print_value": False}, EMPTY, b"\n"),
])
def test_console_format(settings, rec, expected):
    """Kafka's DefaultMessageFormatter.writeTo: columns in its order, key.separator between
    them, line.separator after the last, null.literal for nulls, NO_TIMESTAMP/NO_HEADERS."""
    assert compile_console_format(ConsoleFormat(**settings))(rec) == expected


def test_properties_to_settings():
    assert properties_to_settings({"print.key": b" TRUE ", "key.separator": b":", "print.value": b"false"},
                                  MESSAGE_FORMATTER_PROPERTIES, "the formatter") == \
        {"print_key": True, "key_separator": b":", "print_value": False}
    assert properties_to_settings({"parse.key": b"true", "ignore.error": b"false", "null.marker": b"-"},
                                  LINE_READER_PROPERTIES, "the reader") == \
        {"parse_key": True, "ignore_error": False, "null_marker": b"-"}
    assert set(LINE_READER_PROPERTIES.values()) <= set(LineParser.__init__.__code__.co_varnames)
    assert set(MESSAGE_FORMATTER_PROPERTIES.values()) == set(ConsoleFormat.__dataclass_fields__)
    with pytest.raises(PropertyError, match=r"unknown property 'print.key' for the reader; supported: parse.key, "):
        properties_to_settings({"print.key": b"true"}, LINE_READER_PROPERTIES, "the reader")
    with pytest.raises(PropertyError, match=r"^property print.key must be true or false, not 'on'$"):
        properties_to_settings({"print.key": b"on"}, MESSAGE_FORMATTER_PROPERTIES, "the formatter")
