"""Spellings users bring from kcat and Kafka's console tools (issue 21, item 12), and what
``plog produce``/``plog consume`` say on stderr (items 7, 10 and 13).

kcat: ``-t TOPIC``, ``-K<delim>`` (produce: parse keys; consume: print ``key<delim>value``),
``-J`` (JSON), ``-o s@<ms>``/``-o e@<ms>``, ``-b`` (a broker: plog has none, a one-line hint).
Console tools: ``--topic``, ``--max-messages``, ``--property`` (the producer's reader and the
consumer's ``DefaultMessageFormatter`` properties, with Kafka's meaning and output bytes),
``--bootstrap-server`` (the same hint). What plog cannot take is refused with one line naming
what it can.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cli_fixtures import child_env, plog_exe, run  # noqa: E402
from cli_run import plog  # noqa: E402

from plog.engine.cluster.data_dir import TopicPartition  # noqa: E402

T0 = 1_700_000_000_000


@pytest.fixture
def dd(tmp_path) -> str:
    d = str(tmp_path / "plog-data")
    code, _out, err = run(["topics", "create", "t", "-d", d])
    assert code == 0, err
    return d


def must(args, stdin=None) -> tuple[bytes, str]:
    code, out, err = run(args, stdin=stdin)
    assert code == 0, f"plog {' '.join(args)}: exit {code}: {err.decode(errors='replace')}"
    return out, err.decode()


def records(dd: str, topic: str = "t") -> list[tuple]:
    out, _ = must(["consume", topic, "-e", "-q", "-f", "jsonl", "-d", dd])
    return [(r["key"], r["value"], r["headers"], r["timestamp"]) for r in map(json.loads, out.splitlines())]


# -- produce -------------------------------------------------------------------------------------


@pytest.mark.parametrize("spelling", [["-K:"], ["-K", ":"], ["--property", "parse.key=true",
                                                              "--property", "key.separator=:"]],
                         ids=["kcat-attached", "kcat-separate", "console-properties"])
def test_produce_takes_kcat_and_console_key_spellings(dd, spelling):
    """``-K:`` was "No such option: -:" (exit 2); --property did not exist."""
    must(["produce", "-t", "t", *spelling, "-q", "-d", dd], stdin="a:1\nb:2:3\n")
    assert [(k, v) for k, v, _h, _t in records(dd)] == [("a", "1"), ("b", "2:3")]


def test_produce_k_alone_is_still_parse_key_with_tab(dd):
    must(["produce", "t", "-K", "-q", "-d", dd], stdin="a\t1\n")
    must(["produce", "-K", "t", "-q", "-d", dd], stdin="b\t2\n")  # a word that can be a topic is the topic
    assert [(k, v) for k, v, _h, _t in records(dd)] == [("a", "1"), ("b", "2")]


def test_console_key_separator_alone_does_not_parse_keys(dd):
    """As in kafka-console-producer: key.separator sets the separator, parse.key turns it on."""
    must(["produce", "t", "--property", "key.separator=:", "-q", "-d", dd], stdin="a:1\n")
    assert [(k, v) for k, v, _h, _t in records(dd)] == [(None, "a:1")]


def test_kcat_key_delimiter_leaves_option_values_and_the_rest_alone():
    from plog.cli.produce_run import kcat_key_delimiter

    values = {"--null-marker", "-H", "--header"}
    assert kcat_key_delimiter(["t", "-K:"], values) == ["t", "--key-separator", ":"]
    assert kcat_key_delimiter(["-K", "|", "t"], values) == ["--key-separator", "|", "t"]
    assert kcat_key_delimiter(["-K", "t"], values) == ["-K", "t"]
    assert kcat_key_delimiter(["-K", "-q", "t"], values) == ["-K", "-q", "t"]
    assert kcat_key_delimiter(["--null-marker", "-Kx", "t"], values) == ["--null-marker", "-Kx", "t"]
    assert kcat_key_delimiter(["t", "--", "-K:"], values) == ["t", "--", "-K:"]


def test_produce_topic_option_and_argument(dd, capsys):
    must(["produce", "--topic", "t", "-q", "-d", dd], stdin="x\n")
    assert [v for _k, v, _h, _t in records(dd)] == ["x"]
    assert plog(capsys, "produce", "-d", dd) == (
        2, "", "plog: error: missing the topic: give it as the TOPIC argument or with -t/--topic\n")
    assert plog(capsys, "produce", "t", "-t", "u", "-d", dd) == (
        2, "", "plog: error: two topics given: t (argument) and u (--topic); give one\n")


def test_produce_unknown_property_names_the_supported_ones(dd, capsys):
    code, out, err = plog(capsys, "produce", "t", "--property", "print.key=true", "-d", dd)
    assert (code, out) == (2, "")
    assert err == ("plog: error: unknown property 'print.key' for kafka-console-producer's reader (plog produce "
                   "--property); supported: parse.key, key.separator, parse.headers, headers.delimiter, "
                   "headers.separator, headers.key.separator, null.marker, ignore.error\n")


@pytest.mark.parametrize("command", [["produce", "t"], ["consume", "t", "-e"], ["topics", "list"]])
@pytest.mark.parametrize("option", [["--bootstrap-server", "localhost:9092"], ["--bootstrap-server=b:9092"],
                                    ["-b", "localhost:9092"]])
def test_a_broker_address_gets_a_hint_to_use_the_data_dir(dd, capsys, command, option):
    code, out, err = plog(capsys, *command, *option, "-d", dd)
    name = option[0].split("=")[0]
    assert (code, out) == (2, "")
    assert err == (f"plog: error: {name}: plog works on files, not on a broker: use --data-dir DIR (a plog data "
                   "directory or a Kafka log directory; default ./plog-data or $PLOG_DATA_DIR)\n")


# -- consume -------------------------------------------------------------------------------------


@pytest.fixture
def keyed(dd) -> str:
    """Topic t: (a, 1, CreateTime T0), (null key, 2, T0+1000, header h=x), (b, null, T0+2000)."""
    lines = [{"key": "a", "value": "1", "timestamp": T0},
             {"key": None, "value": "2", "timestamp": T0 + 1000,
              "headers": [{"key": "h", "value": "x"}, {"key": "n", "value": None}]},
             {"key": "b", "value": None, "timestamp": T0 + 2000}]
    must(["produce", "t", "-i", "jsonl", "-q", "-d", dd], stdin="".join(json.dumps(x) + "\n" for x in lines))
    return dd


def consume(dd: str, *args: str) -> bytes:
    out, _ = must(["consume", *args, "-e", "-q", "-d", dd])
    return out


def test_consume_kcat_key_delimiter(keyed):
    assert consume(keyed, "-t", "t", "-K:") == b"a:1\n:2\nb:\n"  # kcat: null prints as nothing
    assert consume(keyed, "t", "-K", "\\t") == b"a\t1\n\t2\nb\t\n"


def test_consume_j_is_jsonl(keyed):
    assert consume(keyed, "t", "-J") == consume(keyed, "t", "--format", "jsonl")
    assert json.loads(consume(keyed, "t", "-J").splitlines()[0])["value"] == "1"


def test_consume_max_messages_is_count(keyed):
    assert consume(keyed, "t", "--max-messages", "2") == b"1\n2\n"


@pytest.mark.parametrize("props,expected", [
    (["print.key=true"], b"a\t1\nnull\t2\nb\tnull\n"),
    (["print.key=true", "key.separator=:", "null.literal=-"], b"a:1\n-:2\nb:-\n"),
    (["print.timestamp=true", "print.partition=true", "print.offset=true", "print.headers=true"],
     b"CreateTime:%d\tPartition:0\tOffset:0\tNO_HEADERS\t1\n"
     b"CreateTime:%d\tPartition:0\tOffset:1\th:x,n:null\t2\n"
     b"CreateTime:%d\tPartition:0\tOffset:2\tNO_HEADERS\tnull\n" % (T0, T0 + 1000, T0 + 2000)),
    (["print.value=false", "print.offset=true", "line.separator=;"], b"Offset:0;Offset:1;Offset:2;"),
    (["print.key=TRUE", "print.value=false", "headers.separator=|"], b"a\nnull\nb\n"),
], ids=["key", "separator-null-literal", "metadata", "no-value", "key-only"])
def test_consume_console_formatter_properties(keyed, props, expected):
    """The bytes kafka-console-consumer's DefaultMessageFormatter writes for these properties."""
    args = [a for p in props for a in ("--property", p)]
    assert consume(keyed, "t", *args) == expected


def test_consume_unknown_or_bad_property_is_one_line(keyed, capsys):
    code, out, err = plog(capsys, "consume", "t", "-e", "--property", "print.colour=true", "-d", keyed)
    assert (code, out) == (2, "")
    assert err == ("plog: error: unknown property 'print.colour' for kafka-console-consumer's formatter (plog "
                   "consume --property); supported: print.timestamp, print.key, print.value, print.partition, "
                   "print.offset, print.headers, key.separator, line.separator, headers.separator, "
                   "null.literal\n")
    assert plog(capsys, "consume", "t", "-e", "--property", "print.key=yes", "-d", keyed) == (
        2, "", "plog: error: property print.key must be true or false, not 'yes'\n")
    assert plog(capsys, "consume", "t", "-e", "--property", "print.key", "-d", keyed) == (
        2, "", "plog: error: --property 'print.key': expected NAME=VALUE, e.g. print.key=true\n")
    assert plog(capsys, "consume", "t", "-e", "-J", "--property", "print.key=true", "-d", keyed) == (
        2, "", "plog: error: -J and --property each choose the output format: give one of them\n")


def test_consume_kcat_start_and_end_timestamps(keyed):
    assert consume(keyed, "t", "-o", f"s@{T0 + 1000}") == b"2\n\n"
    assert consume(keyed, "t", "-o", f"e@{T0 + 2000}") == b"1\n2\n"
    assert consume(keyed, "t", "-o", f"s@{T0 + 1}", "-o", f"e@{T0 + 2000}") == b"2\n"
    assert consume(keyed, "t", "-o", "1", "-o", f"e@{T0 + 2000}") == b"2\n"
    # Without -e: the end stops the run (kcat's e@ ends consumption there).
    code, out, _ = run(["consume", "t", "-o", f"e@{T0 + 1000}", "-q", "-d", keyed], timeout=60)
    assert (code, out) == (0, b"1\n")


def test_consume_two_starts_are_refused(keyed, capsys):
    code, _out, err = plog(capsys, "consume", "t", "-e", "-o", "1", "-o", "2", "-d", keyed)
    assert code == 2 and "--offset" in err and "given 2 times" in err


# -- JSON names (item 11) ----------------------------------------------------------------------------


def test_consume_jsonl_uses_snake_case_and_produce_reads_old_camel_case(keyed, tmp_path):
    line = json.loads(consume(keyed, "t", "-f", "jsonl").splitlines()[0])
    assert list(line) == ["topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value", "headers"]
    # What plog 0.x consume/dump wrote (camelCase) still produces the same records.
    old = ('{"topic":"t","partition":0,"offset":0,"timestamp":5,"timestampType":"CreateTime","key":"k",'
           '"value":"v","headers":[{"key":"h","value":null}]}\n'
           '{"type":"record","file":"x.log","offset":1,"timestampType":"CreateTime","timestamp":6,"keySize":-1,'
           '"valueSize":1,"sequence":-1,"headerKeys":[],"headers":[],"key":null,"value":"w"}\n'
           '{"type":"batch","file":"x.log","baseOffset":0,"isControl":false}\n')
    d = str(tmp_path / "other")
    must(["produce", "copy", "-i", "jsonl", "-q", "-d", d], stdin=old)
    assert records(d, "copy") == [("k", "v", [{"key": "h", "value": None}], 5), (None, "w", [], 6)]


def test_produce_jsonl_headers_object_form(dd, capsys):
    lines = ('{"value":"v","headers":{"a":"1","b":{"base64":"/wA="},"c":null}}\n'
             '{"value":"w","headers":{}}\n')
    must(["produce", "t", "-i", "jsonl", "-q", "-d", dd], stdin=lines)
    assert [h for _k, _v, h, _t in records(dd)] == [
        [{"key": "a", "value": "1"}, {"key": "b", "value": {"base64": "/wA="}}, {"key": "c", "value": None}], []]
    code, _out, err = run(["produce", "t", "-i", "jsonl", "-q", "-d", dd],
                          stdin='{"value":"v","headers":{"a":"1","a":"2"}}\n')
    assert code == 1
    assert err.decode() == ('plog: error: line 1: "headers": "a" is given twice; repeated header names need the '
                            'list form [{"key": ..., "value": ...}, ...]\n')


# -- what produce says on stderr (items 10, 13) ----------------------------------------------------------


def test_produce_to_a_missing_topic_and_data_dir_says_so(tmp_path):
    d = tmp_path / "fresh"
    _out, err = must(["produce", "ordres", "-d", str(d)], stdin="x\n")
    assert err.splitlines() == [
        f"plog: no data directory at {d}: created one with 1 broker (plog init makes bigger ones; "
        "--no-create refuses)",
        "plog: topic ordres did not exist: created it with 1 partition(s), replication factor 1 (--no-create refuses)",
        "produced 1 record(s) to ordres: partition 0: offsets 0..0 (1)",
    ]
    _out, err = must(["produce", "ordres", "-d", str(d)], stdin="y\n")
    assert err == "produced 1 record(s) to ordres: partition 0: offsets 1..1 (1)\n"  # nothing new: no notice
    _out, err = must(["produce", "other", "-q", "-d", str(d)], stdin="y\n")
    assert err == ""


def test_produce_summary_of_many_partitions_is_one_short_line(tmp_path):
    """40 partitions written: one line of counts, not 40 offset ranges (item 10)."""
    d = str(tmp_path / "data")
    must(["topics", "create", "wide", "-p", "40", "-d", d])
    lines = "".join(json.dumps({"value": "x", "partition": p}) + "\n" for p in range(40) for _ in range(p % 3 + 1))
    _out, err = must(["produce", "wide", "-i", "jsonl", "-d", d], stdin=lines)
    assert err == "produced 79 record(s) to wide in 40 partitions, 1 to 3 per partition (--verbose lists them)\n"
    _out, err = must(["produce", "wide", "-i", "jsonl", "-v", "-d", d],
                     stdin='{"value":"y","partition":5}\n{"value":"z","partition":7}\n')
    assert err == ("produced 2 record(s) to wide in 2 partition(s):\n"
                   "  partition 5: offsets 3..3 (1)\n"
                   "  partition 7: offsets 2..2 (1)\n")


def test_summary_lines():
    from plog.cli.produce_run import summary_lines

    stats = {TopicPartition("t", p): [10 * p, 10 * p + p, p + 1] for p in range(300)}
    assert summary_lines("t", stats) == [
        "produced 45150 record(s) to t in 300 partitions, 1 to 300 per partition (--verbose lists them)"]
    assert summary_lines("t", stats, hint=False) == ["produced 45150 record(s) to t in 300 partitions, 1 to 300 "
                                                     "per partition"]
    verbose = summary_lines("t", stats, verbose=True)
    assert verbose[0] == "produced 45150 record(s) to t in 300 partition(s):"
    assert verbose[1:3] == ["  partition 0: offsets 0..0 (1)", "  partition 1: offsets 10..11 (2)"]
    assert len(verbose) == 301
    few = {TopicPartition("t", p): [0, 1, 2] for p in (3, 1)}
    assert summary_lines("t", few) == ["produced 4 record(s) to t: partition 1: offsets 0..1 (2); "
                                       "partition 3: offsets 0..1 (2)"]
    same = {TopicPartition("t", p): [0, 1, 2] for p in range(9)}
    assert summary_lines("t", same) == ["produced 18 record(s) to t in 9 partitions, 2 per partition "
                                        "(--verbose lists them)"]
    assert summary_lines("t", {}) == ["produced 0 record(s) to t"]


# -- an interrupted produce or follow-mode consume says what it did (item 7) -----------------------------


def _start(argv: list[str], stdin) -> subprocess.Popen:
    return subprocess.Popen([plog_exe(), *argv], stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=child_env())


def _wait_for(condition, p: subprocess.Popen, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert p.poll() is None, f"plog ended before {what}: {p.stderr.read().decode(errors='replace')}"
        assert time.monotonic() < deadline, f"no {what} within {timeout}s"
        time.sleep(0.01)


SIGNALS = [(signal.SIGINT, 130, "plog: interrupted"), (signal.SIGTERM, 143, "plog: terminated")]


@pytest.mark.parametrize("sig,code,last", SIGNALS, ids=["SIGINT", "SIGTERM"])
def test_interrupted_produce_says_how_many_records_it_wrote(dd, sig, code, last):
    segment = Path(dd) / "broker-1" / "t-0" / "00000000000000000000.log"
    marker = Path(dd) / "broker-1" / ".kafka_cleanshutdown"
    read_end, write_end = os.pipe()
    p = _start(["produce", "t", "-d", dd], read_end)
    os.close(read_end)
    try:
        os.write(write_end, b"".join(b"%d\n" % i for i in range(25)))  # then the input pauses: one round
        # The round is over when the producer, waiting for more input, has given the data
        # directory back: the records are in the log and the clean-shutdown marker, deleted
        # when it took the directory, is there again.
        _wait_for(lambda: segment.stat().st_size > 0 and marker.exists(), p, "the first round written")
        p.send_signal(sig)
        _out, err = p.communicate(timeout=60)
    finally:
        os.close(write_end)
        if p.poll() is None:
            p.kill()
    assert p.returncode == code, err
    assert err.decode() == f"produced 25 record(s) to t: partition 0: offsets 0..24 (25)\n{last}\n"


@pytest.mark.parametrize("sig,code,last", SIGNALS, ids=["SIGINT", "SIGTERM"])
def test_interrupted_follow_mode_consume_says_how_many_records_it_read(keyed, sig, code, last):
    p = _start(["consume", "t", "-d", keyed], subprocess.DEVNULL)  # no -e: follows the topic
    seen = bytearray()
    os.set_blocking(p.stdout.fileno(), False)

    def printed_all() -> bool:
        chunk = p.stdout.read()
        if chunk:
            seen.extend(chunk)
        return seen.count(b"\n") == 3

    try:
        _wait_for(printed_all, p, "the 3 records on stdout")
        p.send_signal(sig)
        p.wait(timeout=60)
        err = p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
    assert bytes(seen) == b"1\n2\n\n"
    assert p.returncode == code, err
    assert err.decode() == f"consumed 3 record(s) from t\n{last}\n"
