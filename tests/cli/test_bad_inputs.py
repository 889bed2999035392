"""Bad inputs for every ``plog`` command: the documented exit code and one line on stderr,
never a traceback (issue 10, Build item 5 and acceptance item 3; DESIGN.md "CLI contract").

``CASES`` is a table of bad invocations, at least one per leaf command of the command tree
(``test_every_command_has_bad_input_cases`` fails when a command is added without one):
missing files and directories, a file where a directory is expected and the reverse, values
of the wrong type, bad and out-of-range offsets, bad ``--format`` values (one per command
with a ``--format`` choice, read from the command tree), unknown topics, groups and brokers,
corrupt files (a truncated segment, a flipped byte in a batch's records (CRC) and in a batch
header, a garbage ``.index``, a bad ``cluster.json``, bad scenario YAML, bad reassignment
JSON, a binary file where text is expected). Further tests: permission denied (the child runs
as uid 65534 through ``setpriv`` when we are root), a full disk (a 512 KiB tmpfs) and stdout
on ``/dev/full``.

What every case asserts (``check``):

- the exit code: 2 usage error, 1 error, 3 the command ran and found problems;
- exit 1: stderr is exactly one line (a trailing newline aside), starting ``plog: error:``;
- exit 2: the same one line, or Click's usage block, which must then contain ``Error``;
- the line names what it is about (the file, offset, topic, group, broker, option) where the
  case says so;
- never ``Traceback``, never ``internal error`` (the error boundary's word for a bug), never
  Python's own words (``None``, ``'NoneType' object ...``, ``KeyError``, ``invalid literal``).

Usage errors (exit 2) run in this process through the real entry point (cheap); everything
else runs ``plog`` as a child process, so the real exit code and streams are observed.
Commands that change data never get a case that succeeds, so the shared data stays as built.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cli_fixtures import (  # noqa: E402
    GROUP,
    ORDERS_TOPIC,
    child_env,
    kafka_log_dir,
    plog_exe,
    populated_data_dir,
    run,
    scenario_file,
    segment_file,
)
from cli_run import plog  # noqa: E402

from plog.cli.command_tree import command_tree  # noqa: E402
from plog.formats.checkpoints import parse_offset_checkpoint  # noqa: E402

NOBODY = 65534


# -- the data every case runs on --------------------------------------------------------------------


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, str]:
    """Placeholder name -> path (or text) for the case table; built once per module."""
    root = tmp_path_factory.mktemp("bad-inputs")
    dd = populated_data_dir(root)
    kl = kafka_log_dir(root)
    seg = segment_file(kl)
    raw = seg.read_bytes()  # debug_topic-0: batches at 0 (401 bytes), 401 (241), 642 (241)
    corrupt = root / "corrupt"

    def partition(name: str, log: bytes, index: bytes | None = None) -> Path:
        folder = corrupt / f"{name}-0"
        folder.mkdir(parents=True)
        (folder / "00000000000000000000.log").write_bytes(log)
        if index is not None:
            (folder / "00000000000000000000.index").write_bytes(index)
        return folder

    crc = bytearray(raw)
    crc[100] ^= 0xFF  # inside the first batch's records: its CRC no longer matches
    header = bytearray(raw)
    header[8:12] = b"\xff\xff\xff\x7f"  # the first batch's length: -129
    trunc = partition("trunc", raw[:800])  # the third batch cut short
    crc_part = partition("crc", bytes(crc))
    header_part = partition("header", bytes(header))
    gidx = partition("gidx", raw, b"\x01" * 13)  # not a whole number of 8-byte entries, positions past the log

    bad_cluster = root / "bad-cluster"
    shutil.copytree(dd, bad_cluster)
    (bad_cluster / "cluster.json").write_text("{not json")
    shape_cluster = root / "shape-cluster"  # JSON, but not the shape of a plog cluster file
    shape_cluster.mkdir()
    (shape_cluster / "cluster.json").write_text(
        '{"version": 1, "cluster_id": "c", "brokers": [{"id": 1}], '
        '"topics": {"orders": {"topic_id": "t", "replicas": [[1], null]}}}')
    shape_group = root / "shape-group"  # a data directory whose group file is JSON of the wrong shape
    (shape_group / "groups").mkdir(parents=True)
    shutil.copyfile(dd / "cluster.json", shape_group / "cluster.json")
    (shape_group / "groups" / (GROUP.encode().hex() + ".json")).write_text('{"group_id": "%s", "members": 5}' % GROUP)

    files = root / "files"
    files.mkdir()
    (files / "notes.txt").write_text("just text\n")
    (files / "binary.bin").write_bytes(bytes(range(128, 256)) * 4)
    (files / "bad.yaml").write_text("brokers: 2\nsteps: [\n")
    (files / "unknown-key.yaml").write_text("brokers: 1\nsteps: [{note: x}]\nfoo: 1\n")
    (files / "bad.json").write_text("{bad")
    (files / "array.json").write_text("[1, 2]")
    (files / "broker9.json").write_text(
        '{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[9,1]}]}')
    (files / "nosuch-topic.json").write_text(
        '{"version":1,"partitions":[{"topic":"nosuch","partition":0,"replicas":[1,2]}]}')
    (files / "bad-plan.csv").write_text("orders,zero\n")
    (root / "empty-dir").mkdir()
    scenario = scenario_file(files)
    return {
        "dd": str(dd), "kl": str(kl), "part": str(seg.parent), "seg": str(seg),
        "meta": str(kl / "meta.properties"),
        "missing": str(root / "missing"), "missing_seg": str(root / "nowhere" / "00000000000000000000.log"),
        "empty": str(root / "empty-dir"), "new": str(root / "new-data-dir"),
        "trunc": str(trunc), "crc": str(crc_part), "header_seg": str(header_part / "00000000000000000000.log"),
        "gidx": str(gidx), "gidx_index": str(gidx / "00000000000000000000.index"),
        "bad_cluster": str(bad_cluster), "cluster_json": str(bad_cluster / "cluster.json"),
        "shape_cluster": str(shape_cluster), "shape_cluster_json": str(shape_cluster / "cluster.json"),
        "shape_group": str(shape_group),
        "notes": str(files / "notes.txt"), "binary": str(files / "binary.bin"),
        "bad_yaml": str(files / "bad.yaml"), "unknown_key": str(files / "unknown-key.yaml"),
        "bad_json": str(files / "bad.json"), "array_json": str(files / "array.json"),
        "broker9_json": str(files / "broker9.json"), "nosuch_json": str(files / "nosuch-topic.json"),
        "bad_csv": str(files / "bad-plan.csv"), "scenario": str(scenario),
        "out": str(root / "out"),
    }


# -- the table -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    line: str  # the arguments after `plog`, shell-quoted, with {placeholders} from `world`
    code: int
    names: tuple[str, ...] = ()  # what the error line must mention ({placeholders} allowed)
    stdin: str | None = None

    def argv(self, w: dict[str, str]) -> list[str]:
        return [a.format(**w) for a in shlex.split(self.line)]

    @property
    def id(self) -> str:
        return self.line.replace("{", "").replace("}", "")


def C(line: str, code: int, *names: str, stdin: str | None = None) -> Case:
    return Case(line, code, names, stdin)


D = "-d {dd}"
CASES: list[Case] = [
    # consume
    C(f"consume nosuch -e {D}", 1, "nosuch"),
    C(f"consume orders -p 9 -e {D}", 1, "Partition 9", "orders"),
    C("consume orders -e -d {missing}", 1, "{missing}"),
    C("consume orders -e -d {notes}", 1, "{notes}", "not a directory"),
    C("consume orders -e -d {bad_cluster}", 1, "{cluster_json}"),
    C(f"consume orders -o abc -e {D}", 2, "--offset", "abc"),
    C(f"consume orders -o 5:zz -e {D}", 2, "--offset", "5:zz"),
    C(f"consume orders -p x {D}", 2, "--partition"),
    C(f"consume orders -c many {D}", 2, "--count"),
    C(f"consume orders --isolation-level dirty {D}", 2, "--isolation-level"),
    # kcat's and the console consumer's spellings: refused in one line naming plog's option or what is supported
    C(f"consume orders -e --bootstrap-server localhost:9092 {D}", 2, "--bootstrap-server", "--data-dir"),
    C(f"consume -b localhost:9092 -t orders -e {D}", 2, "-b", "--data-dir"),
    C(f"consume orders -e --property print.colour=true {D}", 2, "print.colour", "print.key"),
    C(f"consume orders -e --property print.key=yes {D}", 2, "print.key", "true or false"),
    C(f"consume orders -e --property print.key {D}", 2, "--property", "NAME=VALUE"),
    C(f"consume orders -e -J -K: {D}", 2, "-J", "-K"),
    C(f"consume orders -e -o 1 -o 2 {D}", 2, "--offset"),
    C(f"consume orders -e -o s@soon {D}", 2, "--offset"),
    C(f"consume -e {D}", 2, "TOPIC", "--topic"),
    C(f"consume orders -t users -e {D}", 2, "orders", "users"),
    # a Kafka log directory holds some partitions of a topic: the others are on other brokers
    C("consume __consumer_offsets -p 3 -e -d {kl}", 1, "{kl}", "no folder for __consumer_offsets-3"),
    # decoding Confluent-framed values (issue 25): bad formats, kcat's pack formats, a missing schemas directory
    C(f"consume orders -e --value-format xml {D}", 2, "--value-format", "xml", "json-schema"),
    C(f"consume orders -e --key-format avro4 {D}", 2, "--key-format", "avro4"),
    C(f"consume orders -e -s value=<i {D}", 2, "-s value=<i", "pack formats"),
    C(f"consume orders -e -s head=avro {D}", 2, "-s head=avro", "key=FORMAT"),
    C(f"consume orders -e -s avro --value-format raw {D}", 2, "--value-format", "-s avro"),
    C(f"consume orders -e --schemas {{missing}} {D}", 2, "--schemas", "--value-format"),
    C(f"consume orders -e --value-format auto --schemas {{missing}} {D}", 1, "{missing}"),
    # dump
    C("dump {missing_seg}", 1, "{missing_seg}"),
    C("dump {empty}", 1, "{empty}"),
    C("dump {header_seg}", 1, "{header_seg}", "at byte 0"),
    C("dump {gidx_index}", 1, "{gidx_index}"),
    C("dump --format yaml {seg}", 2, "--format", "yaml"),
    C("dump --max-bytes x {seg}", 2, "--max-bytes"),
    C("dump --kafka-version 7 {seg}", 2, "--kafka-version"),
    C("dump --key-decoder nonsense {seg}", 2, "nonsense"),
    C("dump --value-decoder avro5 {seg}", 2, "avro5", "confluent"),
    C("dump --schemas {missing} {seg}", 2, "--schemas", "--value-decoder"),
    C("dump --value-decoder confluent --schemas {missing} {seg}", 1, "{missing}"),
    C("dump", 2),
    C("dump --bootstrap-server localhost:9092 {seg}", 2, "--bootstrap-server", "PATH"),
    # lookup
    C("lookup {part} -o abc", 2, "--offset", "abc"),
    C("lookup {part} -t yesterday", 2, "--timestamp"),
    C("lookup {part} -o 99999999", 1, "99999999", "{part}"),
    C("lookup {missing} -o 1", 1, "{missing}"),
    C("lookup {meta} -o 1", 1, "{meta}"),
    C("lookup {dd} -o 1", 1, "{dd}"),
    C("lookup {dd} --topic nosuch -p 0 -o 1", 1, "nosuch-0"),
    C("lookup {part}", 2, "--offset"),
    C("lookup {header_seg} -o 1", 1, "{header_seg}", "at byte 0"),  # bytes that do not decode name their file
    C("lookup {part} -t -5", 2, "--timestamp", "-1 latest"),
    C("lookup {part} -t 99999999999999999999999", 2, "--timestamp", "64-bit"),
    C("lookup {part} -o 99999999999999999999999", 1, "99999999999999999999999", "9223372036854775807"),
    C("lookup -b localhost:9092 {part} -o 1", 2, "-b", "PATH"),  # no --data-dir here: give the files
    # ls
    C("ls {missing}", 1, "{missing}"),
    C("ls {meta}", 1, "{meta}"),
    C("ls --segments --quick --format yaml {kl}", 2, "--format"),
    C("ls --topic nosuch {kl}", 1, "nosuch"),
    C("ls --bootstrap-server localhost:9092", 2, "--bootstrap-server", "--data-dir"),
    # retention
    C("retention {missing}", 1, "{missing}"),
    C("retention {meta}", 1, "{meta}"),
    C("retention {empty}", 1, "{empty}"),  # no Kafka data in it: a user error, not an internal one
    C("retention -n --topic nosuch {kl}", 1, "nosuch"),
    C("retention -n --server-properties {missing} {kl}", 1, "{missing}"),
    C("retention --retention-ms soon {kl}", 2, "--retention-ms"),
    C("retention --now someday {kl}", 2, "--now"),
    # compact
    C("compact {missing}", 1, "{missing}"),
    C("compact -n {meta}", 1, "{meta}"),
    C("compact {empty}", 1, "{empty}"),
    C("compact -n --topic nosuch {kl}", 1, "nosuch"),
    C("compact --buffer-size lots {kl}", 2, "--buffer-size"),
    C("compact --min-cleanable-dirty-ratio 7 {kl}", 2, "--min-cleanable-dirty-ratio"),
    # maintain
    C("maintain {missing}", 1, "{missing}"),
    C("maintain -d {missing}", 1, "{missing}"),
    C("maintain {empty}", 1, "{empty}"),
    C(f"maintain -n --topic nosuch {D}", 1, "nosuch"),
    C(f"maintain --buffer-size lots {D}", 2, "--buffer-size"),
    # produce (an error is one line even without -q: what went out before it is in that line)
    C(f"produce orders -p 9 -q {D}", 1, "Partition 9", stdin="a\n"),
    C(f"produce nosuch --no-create -q {D}", 1, "nosuch", stdin="a\n"),
    C(f"produce nosuch --no-create {D}", 1, "nosuch", stdin="a\n"),
    C("produce t --no-create -d {missing}", 1, "{missing}", "plog init", stdin="a\n"),
    C(f"produce orders -i jsonl {D}", 1, "line 2", "before it", stdin='{"value": "ok"}\nnot json\n'),
    C(f"produce orders -F {{missing}} -q {D}", 1, "{missing}"),
    C(f"produce orders -F {{kl}} -q {D}", 1, "{kl}"),
    C(f"produce orders -i jsonl -q {D}", 1, "line 2", stdin='{"value": "ok"}\nnot json\n'),
    C("produce orders -q -d {bad_cluster}", 1, "{cluster_json}", stdin="a\n"),
    C("produce orders -q -d {notes}", 1, "{notes}", stdin="a\n"),
    C(f"produce orders -p x {D}", 2, "--partition"),
    C(f"produce orders --acks 7 {D}", 2, "--acks"),
    C(f"produce orders -z brotli {D}", 2, "--compression"),
    C(f"produce orders --bootstrap-server localhost:9092 {D}", 2, "--bootstrap-server", "--data-dir"),
    C(f"produce orders --broker-list localhost:9092 {D}", 2, "--broker-list", "--data-dir"),
    C(f"produce orders --property parse.keys=true {D}", 2, "parse.keys", "parse.key"),
    C(f"produce orders -i jsonl --property parse.key=true {D}", 2, "--property", "jsonl"),
    C(f"produce -q {D}", 2, "TOPIC", "--topic"),
    C(f"produce orders -i jsonl -q {D}", 1, "line 1", '"a"', "list form", stdin='{"value":"v","headers":{"a":"1","a":"2"}}\n'),
    # recover
    C("recover {missing}", 1, "{missing}"),
    C("recover {meta}", 1, "{meta}"),
    C("recover {empty}", 1, "{empty}"),
    C("recover -n {notes}", 1, "{notes}"),
    C("recover -n {trunc}", 3),
    C("recover -j 0 {kl}", 2, "--jobs"),
    C("recover -j x {kl}", 2, "--jobs"),
    C("recover --bootstrap-server localhost:9092", 2, "--bootstrap-server", "PATH"),
    # scan
    C("scan {missing}", 1, "{missing}"),
    C("scan {meta}", 1, "{meta}"),
    C("scan -q -j 1 {crc}", 3),
    C("scan --mode search --value-contains x -o {kl} --output-format jsonl --overwrite -q {kl}", 1, "{kl}"),
    C("scan --mode search --value-contains x -o {missing}/out.jsonl --output-format jsonl -q {kl}", 1,
      "{missing}/out.jsonl"),
    C("scan --offset-range abc {kl}", 2, "--offset-range"),
    C("scan --mode everything {kl}", 2, "--mode"),
    C("scan -q -j 1 --topic nosuch {kl}", 1, "nosuch", "topics there"),
    C("scan --mode search --key-hex zz {kl}", 2, "--key-hex"),
    C("scan --where 'value.id == 1' {kl}", 2, "--where", "value.id == 1"),
    C("scan --where 'value.id = 1' --schemas {missing} {kl}", 1, "{missing}"),
    C("scan --mode sql {kl}", 2, "--sql"),
    C("scan -b localhost:9092", 2, "-b", "--data-dir"),
    # simulate: a bad scenario file is a usage error (documented in its --help)
    C("simulate {missing}.yaml", 2, "{missing}.yaml"),
    C("simulate {empty}", 2, "{empty}"),
    C("simulate {bad_yaml}", 2, "{bad_yaml}", "line 3"),
    C("simulate {unknown_key}", 2, "{unknown_key}", "foo"),
    C("simulate {binary}", 2, "{binary}"),
    C("simulate {scenario} --truncation sometimes", 2, "--truncation"),
    C("simulate /dev/null", 2, "/dev/null", "must be a mapping"),  # read as the pipe it may be, not "no such file"
    # init
    C(f"init {D}", 1, "{dd}"),
    C("init -d {notes}", 1, "{notes}"),
    C("init -b x -d {new}", 2, "--brokers"),
    C("init -b 0 -d {new}", 2, "--brokers"),
    C("init --broker-config nonsense -d {new}", 2, "--broker-config"),
    # verify
    C("verify {missing}", 1, "{missing}"),
    C("verify {meta}", 1, "{meta}"),
    C("verify {empty}", 1, "{empty}"),
    C("verify -q {missing} {kl}", 1, "{missing}"),  # a bad path among good ones: reported, the others run
    C("verify -q {trunc}", 3),
    C("verify -q {crc}", 3),
    C("verify -q {gidx}", 3),
    C("verify -j 0 {kl}", 2, "--jobs"),
    C("verify --bootstrap-server localhost:9092", 2, "--bootstrap-server", "--data-dir"),
    # assign
    C(f"assign generate --topics-to-move-json-file {{missing}} --broker-list 1,2 {D}", 1, "{missing}"),
    C(f"assign generate --topics-to-move-json-file {{bad_json}} --broker-list 1,2 {D}", 1, "{bad_json}"),
    C(f"assign generate --topics-to-move-json-file {{array_json}} --broker-list x {D}", 2, "--broker-list"),
    C(f"assign execute --reassignment-json-file {{bad_json}} {D}", 1, "{bad_json}"),
    C(f"assign execute --reassignment-json-file {{binary}} {D}", 1, "{binary}"),
    C(f"assign execute --reassignment-json-file {{broker9_json}} {D}", 1, "9"),
    C(f"assign execute --reassignment-json-file {{nosuch_json}} {D}", 1, "nosuch"),
    C(f"assign execute --reassignment-json-file {{broker9_json}} --timeout soon {D}", 2, "--timeout"),
    C(f"assign verify --reassignment-json-file {{array_json}} {D}", 1, "{array_json}"),
    C(f"assign verify --reassignment-json-file {{kl}} {D}", 1, "{kl}", "directory"),
    C(f"assign verify --reassignment-json-file /dev/null {D}", 1, "/dev/null", "not a valid JSON"),
    C("assign report --bootstrap-server localhost:9092", 2, "--bootstrap-server", "--data-dir"),
    C(f"assign preferred-leaders --topic nosuch {D}", 1, "nosuch"),
    C("assign preferred-leaders -d {missing}", 1, "{missing}"),
    C("assign report -d {missing}", 1, "{missing}"),
    C("assign report -d {bad_cluster}", 1, "{cluster_json}"),
    # brokers
    C("brokers list -d {missing}", 1, "{missing}"),
    C("brokers list -d {bad_cluster}", 1, "{cluster_json}"),
    C("brokers list -d {shape_cluster}", 1, "{shape_cluster_json}", "topic orders", "wrong type"),
    C("brokers list --bootstrap-server localhost:9092", 2, "--bootstrap-server", "--data-dir"),
    C(f"brokers stop 9 {D}", 1, "9"),
    C(f"brokers stop one {D}", 2, "ID"),
    C(f"brokers start 9 {D}", 1, "9"),
    C(f"brokers start one {D}", 2, "ID"),
    # groups
    C("groups list -d {missing}", 1, "{missing}"),
    C("groups list -d {shape_cluster}", 1, "{shape_cluster_json}", "topic orders", "wrong type"),
    C("groups list -b localhost:9092", 2, "-b", "--data-dir"),
    C(f"groups describe {GROUP} -d {{shape_group}}", 1, "{shape_group}", "not a plog group file", "missing"),
    C(f"groups list --state sleepy {D}", 2, "--state"),
    C(f"groups describe nosuch {D}", 1, "nosuch"),
    C(f"groups describe {D}", 2, "GROUP"),
    C(f"groups reset-offsets {GROUP} --topic nosuch --to-earliest {D}", 1, "nosuch"),
    C(f"groups reset-offsets {GROUP} --topic {ORDERS_TOPIC}:9 --to-earliest {D}", 1, f"{ORDERS_TOPIC}-9"),
    C(f"groups reset-offsets {GROUP} --from-file {{bad_csv}} {D}", 1, "{bad_csv}"),
    C(f"groups reset-offsets {GROUP} --from-file {{binary}} {D}", 1, "{binary}"),
    C(f"groups reset-offsets {GROUP} --from-file {{missing}} {D}", 1, "{missing}"),
    C(f"groups reset-offsets {GROUP} --topic {ORDERS_TOPIC} --to-offset abc {D}", 2, "--to-offset"),
    C(f"groups reset-offsets {GROUP} --topic {ORDERS_TOPIC} --to-datetime yesterday {D}", 2, "--to-datetime"),
    C(f"groups reset-offsets {GROUP} --topic {ORDERS_TOPIC} {D}", 2, "STRATEGY"),
    C(f"groups delete nosuch {D}", 1, "nosuch"),
    C("groups delete billing -d {missing}", 1, "{missing}"),
    # topics
    C(f"topics create fresh -p x {D}", 2, "--partitions"),
    C(f"topics create fresh -p 0 {D}", 1, "0"),
    # more partitions than the file system holds (5 inodes and 2 blocks each), or than Kafka's
    # 32-bit partition ids allow: refused before anything is written (exit 1, like a full disk)
    C(f"topics create fresh -p 100000000 {D}", 1, "creating 100000000 partitions of topic fresh needs",
      "on the file system of {dd}", "nothing was written"),
    C(f"topics create fresh -p 3000000000 {D}", 1, "2147483647"),
    C(f"topics create {ORDERS_TOPIC} {D}", 1, ORDERS_TOPIC),
    C(f"topics create fresh --config bogus.setting=1 {D}", 1, "bogus.setting"),
    C(f"topics create fresh --config retention.ms=abc {D}", 1, "retention.ms"),
    C(f"topics create fresh --bootstrap-server localhost:9092 {D}", 2, "--bootstrap-server", "--data-dir"),
    C(f"topics create fresh -r 9 {D}", 1, "9"),
    C(f"topics create fresh --replica-assignment 1:9 {D}", 1, "9"),
    C(f"topics create 'bad name!' {D}", 1, "bad name!"),
    C("topics create fresh -d {notes}", 1, "{notes}"),
    C("topics list -d {missing}", 1, "{missing}"),
    C("topics list -d {notes}", 1, "{notes}"),
    C("topics list -d {bad_cluster}", 1, "{cluster_json}"),
    C("topics list -d {shape_cluster}", 1, "{shape_cluster_json}", "topic orders", "wrong type"),
    C("topics list --bootstrap-server localhost:9092", 2, "--bootstrap-server", "--data-dir"),
    C(f"topics describe nosuch {D}", 1, "nosuch"),
    C(f"topics alter nosuch -p 5 {D}", 1, "nosuch"),
    C(f"topics alter {ORDERS_TOPIC} -p 1 {D}", 1, "1"),
    C(f"topics alter {ORDERS_TOPIC} -p 100000000 {D}", 1, f"adding 99999997 partitions to topic {ORDERS_TOPIC} needs",
      "nothing was written"),
    C(f"topics alter {ORDERS_TOPIC} -p 3000000000 {D}", 1, "2147483647"),
    C(f"topics alter {ORDERS_TOPIC} -p many {D}", 2, "--partitions"),
    C(f"topics delete nosuch {D}", 1, "nosuch"),
    # schemas ({kl} has no _schemas topic)
    C("schemas ls {missing}", 1, "{missing}"),
    C("schemas ls {kl}", 1, "{kl}", "no _schemas-0 partition folder"),
    C("schemas ls {meta}", 1, "{meta}"),
    C("schemas show {kl} orders-value -V two", 2, "--version", "two"),
    C("schemas show {kl}", 2, "SUBJECT", "--id"),
    C("schemas show {kl} --guid nope", 2, "--guid", "nope"),
    C("schemas export {empty} {out}", 1, "{empty}"),
    # completions
    C("completions show tcsh", 2, "tcsh"),
    C("completions install tcsh --path {out}/plog", 2, "tcsh"),
    C("completions install bash --path {kl}", 2, "{kl}"),
    C("completions install bash --path {notes}/plog", 1, "{notes} is not a directory"),
    C("completions values colours", 2, "colours"),
]

#: A valid invocation of every command whose --format is a choice, for the generated
#: "--format bogus" cases (the option is given last, so only it can be wrong).
FORMAT_BASE: dict[tuple[str, ...], str] = {
    ("dump",): "dump {seg}",
    ("lookup",): "lookup {part} -o 1",
    ("ls",): "ls {kl}",
    ("retention",): "retention -n {kl}",
    ("compact",): "compact -n {kl}",
    ("maintain",): f"maintain -n {D}",
    ("recover",): "recover -n {kl}",
    ("scan",): "scan {kl}",
    ("schemas", "ls"): "schemas ls {kl}",
    ("schemas", "show"): "schemas show {kl} orders-value",
    ("simulate",): "simulate {scenario}",
    ("verify",): "verify {kl}",
    ("assign", "generate"): f"assign generate --topics-to-move-json-file {{array_json}} --broker-list 1 {D}",
    ("assign", "execute"): f"assign execute --reassignment-json-file {{broker9_json}} {D}",
    ("assign", "verify"): f"assign verify --reassignment-json-file {{broker9_json}} {D}",
    ("assign", "preferred-leaders"): f"assign preferred-leaders {D}",
    ("assign", "report"): f"assign report {D}",
    ("brokers", "list"): f"brokers list {D}",
    ("brokers", "stop"): f"brokers stop 1 {D}",
    ("brokers", "start"): f"brokers start 1 {D}",
    ("groups", "list"): f"groups list {D}",
    ("groups", "describe"): f"groups describe {GROUP} {D}",
    ("groups", "reset-offsets"): f"groups reset-offsets {GROUP} --topic {ORDERS_TOPIC} --to-earliest {D}",
    ("topics", "list"): f"topics list {D}",
    ("topics", "describe"): f"topics describe {ORDERS_TOPIC} {D}",
}

LEAVES = command_tree().leaves()


def _format_cases() -> list[Case]:
    out = []
    for leaf in LEAVES:
        fmt = next((p for p in leaf.params if "--format" in p.opts and p.choices), None)
        if fmt is not None and leaf.path in FORMAT_BASE:
            out.append(C(f"{FORMAT_BASE[leaf.path]} --format bogus", 2, "--format", "bogus"))
    return out


ALL_CASES = CASES + _format_cases()


def _leaf_of(argv: list[str]) -> tuple[str, ...] | None:
    for leaf in sorted(LEAVES, key=lambda c: -len(c.path)):
        if tuple(argv[:len(leaf.path)]) == leaf.path:
            return leaf.path
    return None


# -- the check ---------------------------------------------------------------------------------------


#: What only Python says: a repr of None, a type's complaint, an exception class's name.
PYTHON_WORDS = re.compile(r"\bNone\b|NoneType|object (?:is not|has no)|invalid literal for|\b[A-Z][A-Za-z]+Error\b")


def check(case_code: int, names, code: int, err: str, context: str = "") -> None:
    """The contract every bad input must meet (module docstring)."""
    where = f"{context}\nexit {code}, stderr:\n{err}"
    assert "Traceback" not in err, where
    assert "internal error" not in err, where
    assert not PYTHON_WORDS.search(err), f"Python's words in a message for users: {where}"
    assert code == case_code, where
    line = err.rstrip("\n")
    if code == 1 or (code == 2 and line.startswith("plog: error:")):
        assert "\n" not in line, f"more than one line on stderr: {where}"
        assert line.startswith("plog: error: "), where
    elif code == 2:
        assert "Error" in err and "Usage:" in err, where
    for name in names:
        assert name in err, f"the error does not name {name!r}: {where}"


def test_every_command_has_bad_input_cases():
    """A new command fails here until the table has a bad input for it."""
    covered = {_leaf_of(shlex.split(c.line)) for c in ALL_CASES}
    missing = [" ".join(leaf.path) for leaf in LEAVES if leaf.path not in covered]
    assert not missing, f"no bad-input case for: {', '.join(missing)}"
    unknown = [c.line for c in ALL_CASES if _leaf_of(shlex.split(c.line)) is None]
    assert not unknown, f"cases for commands that do not exist: {unknown}"


def test_every_format_choice_is_covered():
    """Every command whose --format is a choice gets a generated "--format bogus" case."""
    with_choice = [leaf.path for leaf in LEAVES if any("--format" in p.opts and p.choices for p in leaf.params)]
    assert [p for p in with_choice if p not in FORMAT_BASE] == []


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.id)
def test_bad_input(case: Case, world, capsys):
    argv = case.argv(world)
    names = [n.format(**world) for n in case.names]
    if case.code == 2 and case.stdin is None:
        code, _out, err = plog(capsys, *argv)  # usage errors: in this process, through main()
    else:
        code, _out, raw = run(argv, stdin=case.stdin, timeout=120)
        err = raw.decode("utf-8", "replace")
    check(case.code, names, code, err, "plog " + shlex.join(argv))


def test_debug_shows_the_traceback_for_the_same_error(world):
    """--debug is the way to a traceback (DESIGN.md); without it the error stays one line."""
    argv = ["--debug", "dump", world["header_seg"]]
    code, _out, err = run(argv)
    assert code != 0 and "Traceback" in err.decode()


# -- permission denied --------------------------------------------------------------------------------


def _as_nobody_prefix() -> list[str]:
    if os.geteuid() != 0:
        return []  # not root: file modes apply to us already
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: cannot run the child as an unprivileged user")
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


class Unprivileged:
    """Runs ``plog`` as uid 65534 (when we are root; as ourselves otherwise) on data under
    ``base`` (= tmp_path). The directories above tmp_path are pytest's, mode 0700: they get
    o+x (traverse only) while the test runs and their modes back afterwards. Another pytest
    session starting meanwhile takes o+x off pytest's root again, so it is put back before
    every run, and a run refused on one of those directories is run once more."""

    def __init__(self, base: Path, prefix: list[str]):
        self.base, self.prefix = base, prefix
        self.ancestors: list[Path] = []
        self.modes: list[int] = []
        if prefix:
            p = base
            while p != p.parent and p != Path("/tmp") and p.stat().st_uid == 0:
                self.ancestors.append(p)
                self.modes.append(stat.S_IMODE(p.stat().st_mode))
                p = p.parent

    def reach(self) -> None:
        for p in self.ancestors:
            mode = stat.S_IMODE(p.stat().st_mode)
            if not mode & stat.S_IXOTH:
                p.chmod(mode | stat.S_IXOTH)

    def put_back(self) -> None:
        for path, mode in zip(self.ancestors, self.modes):
            path.chmod(mode)

    def run(self, argv: list[str], stdin: bytes | None = None) -> tuple[int, str]:
        env = child_env({"HOME": "/tmp", "PYTHONDONTWRITEBYTECODE": "1"})
        for _attempt in (1, 2):
            self.reach()
            p = subprocess.run([*self.prefix, plog_exe(), *argv], input=stdin,
                               stdin=None if stdin is not None else subprocess.DEVNULL,
                               capture_output=True, env=env, timeout=120)
            err = p.stderr.decode("utf-8", "replace")
            # Refused on a directory above base: said so, or o+x was taken off one of them
            # while the command ran (whatever it then reported).
            lost = any(not stat.S_IMODE(a.stat().st_mode) & stat.S_IXOTH for a in self.ancestors[1:])
            if not lost and not any(f"Permission denied: {a}\n" in err for a in self.ancestors[1:]):
                break
        return p.returncode, err


@pytest.fixture
def unprivileged(tmp_path):
    u = Unprivileged(tmp_path, _as_nobody_prefix())
    try:
        if u.prefix:
            u.reach()
            probe = subprocess.run([*u.prefix, plog_exe(), "--version"], capture_output=True, env=child_env())
            if probe.returncode != 0:
                pytest.skip(f"uid {NOBODY} cannot run {plog_exe()}: "
                            f"{probe.stderr.decode(errors='replace')[-300:]}")
        yield u
    finally:
        u.put_back()


def _readable_copy(src: Path, dst: Path) -> Path:
    """A copy everyone may read but only root may write."""
    shutil.copytree(src, dst)
    for root, dirs, files in os.walk(dst):
        os.chmod(root, 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    return dst


def test_permission_denied(unprivileged, world):
    base = unprivileged.base
    base.chmod(0o755)
    kl = _readable_copy(Path(world["kl"]), base / "kafka-logs")
    dd = _readable_copy(Path(world["dd"]), base / "plog-data")
    seg = segment_file(kl)
    seg.chmod(0)  # unreadable
    ro = base / "read-only"
    ro.mkdir(mode=0o555)
    ro.chmod(0o555)
    lock = str(kl / ".lock")
    cases = [
        (["dump", str(seg)], 1, [str(seg), "Permission denied"]),
        (["ls", str(kl)], 1, [str(seg), "Permission denied"]),
        (["lookup", str(seg.parent), "-o", "1"], 1, [str(seg), "Permission denied"]),
        (["verify", "-q", str(kl)], 3, []),  # an unreadable file is a finding, reported on stdout
        (["scan", "-q", "-j", "1", str(kl)], 1, [str(seg), "Permission denied"]),
        (["recover", str(kl)], 1, [lock, "Permission denied"]),
        (["retention", str(kl)], 1, [lock, "Permission denied"]),
        (["compact", str(kl)], 1, [lock, "Permission denied"]),
        (["maintain", "-d", str(dd)], 1, [str(dd), "Permission denied"]),
        (["produce", ORDERS_TOPIC, "-q", "-d", str(dd)], 1, [str(dd), "Permission denied"]),
        (["topics", "create", "fresh", "-d", str(dd)], 1, [str(dd), "Permission denied"]),
        (["consume", ORDERS_TOPIC, "-g", "newgroup", "-e", "-q", "-d", str(dd)], 1, [str(dd), "Permission denied"]),
        (["brokers", "stop", "1", "-d", str(dd)], 1, [str(dd), "Permission denied"]),
        (["init", "-d", str(ro / "data")], 1, [str(ro / "data"), "Permission denied"]),
        (["scan", "--mode", "search", "--value-contains", "x", "-o", str(ro / "out.jsonl"), "--output-format",
          "jsonl", "-q", str(kl / "__consumer_offsets-28")], 1, [str(ro / "out.jsonl"), "Permission denied"]),
        (["completions", "install", "bash", "--path", str(ro / "plog")], 1, [str(ro / "plog"), "Permission denied"]),
    ]
    for argv, expected, names in cases:
        code, err = unprivileged.run(argv, stdin=b"a\n" if argv[0] == "produce" else None)
        check(expected, names, code, err, "plog " + shlex.join(argv))
    assert sorted(os.listdir(ro)) == []  # nothing half-written where writing was refused


# -- stdout on /dev/full ------------------------------------------------------------------------------

DEV_FULL_CASES = [
    "dump --deep-iteration {seg}",
    "dump --format jsonl {seg}",
    f"consume {ORDERS_TOPIC} -e -q {D}",
    f"consume {ORDERS_TOPIC} -e -q -f jsonl {D}",
    f"topics list {D}",
    f"topics describe {ORDERS_TOPIC} --format json {D}",
    f"groups list {D}",
    f"brokers list {D}",
    f"assign report {D}",
    "ls --segments {kl}",
    "lookup {part} -o 1",
    "verify --format jsonl {trunc}",
    "scan -q {kl}",
    "recover -n {kl}",
    "simulate {scenario}",
    "completions show bash",
    "--help",
]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
@pytest.mark.parametrize("line", DEV_FULL_CASES)
def test_stdout_on_dev_full(line, world):
    """`plog ... > /dev/full`: exit 1 and one line saying that stdout is full, no traceback."""
    argv = [a.format(**world) for a in shlex.split(line)]
    with open("/dev/full", "wb") as full:
        p = subprocess.run([plog_exe(), *argv], stdout=full, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                           env=child_env(), timeout=120)
    err = p.stderr.decode("utf-8", "replace")
    check(1, ["cannot write to standard output: No space left on device"], p.returncode, err,
          "plog " + shlex.join(argv) + " > /dev/full")


def test_a_reader_that_goes_away_is_not_an_error(world):
    """`plog dump ... | head -1`: the pipe closes under plog; that ends it quietly with exit 0
    (Typer itself would exit 1 here)."""
    big = segment_file(Path(world["kl"]), "__consumer_offsets-28")  # 4 MB of dump text: more than a pipe holds
    p = subprocess.Popen([plog_exe(), "dump", "--deep-iteration", "--print-data-log", str(big)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=child_env())
    p.stdout.readline()
    p.stdout.close()  # the reader goes away after one line
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 0 and err == "", err


# -- a full disk ---------------------------------------------------------------------------------------


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A 512 KiB tmpfs at tmp_path/full (root only), unmounted afterwards."""
    mnt = tmp_path / "full"
    mnt.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root and mount(8): cannot simulate a full disk here")
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mnt)], capture_output=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (no CAP_SYS_ADMIN?): {p.stderr.decode(errors='replace').strip()}")
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _fill(mnt: Path) -> Path:
    """Take every free byte of ``mnt`` with a filler file; returns it."""
    filler = mnt / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler


def _pin(tree: Path, pins: Path) -> None:
    """Hard-link every file under ``tree`` into ``pins`` (same file system): a file the command
    then deletes or renames over keeps its blocks, so "no free block" holds for the whole run,
    not only at its start. (Recovery first deletes the clean-shutdown marker and the producer
    snapshots past its starting point; how many snapshots there are depends on how often a piped
    ``produce`` found its input empty and released its log, so without pins the blocks a command
    frees could, on a loaded machine, cover every block it then writes: exit 0 on a "full" disk.)"""
    pins.mkdir()
    for n, path in enumerate(p for p in sorted(tree.rglob("*")) if p.is_file()):
        os.link(path, pins / str(n))


def _no_leftovers(root: Path) -> list[str]:
    return sorted(str(p) for p in root.rglob("*") if p.name.endswith((".tmp", ".cleaned", ".swap"))
                  or ".tmp-" in p.name)


def _lines(n: int, start: int = 0) -> str:
    return "".join(f"{i:06d} {'x' * 93}\n" for i in range(start, start + n))  # 101 bytes a line


def test_full_disk(tiny_tmpfs):
    """Writes that hit a full file system end with one line naming the file, exit 1; nothing
    half-written stays behind; once there is room again the data directory works and holds
    an unbroken prefix of what was produced, then the new records."""
    mnt = tiny_tmpfs
    dd = mnt / "dd"
    d = ["-d", str(dd)]
    assert run(["init", *d])[0] == 0 and run(["topics", "create", "t", *d])[0] == 0
    # 3 MB: the segment write of the first round runs out of room; later rounds are not sent.
    first = _lines(30000)
    code, _out, err = run(["produce", "t", "-q", *d], stdin=first)
    check(1, ["No space left on device", str(dd / "broker-1" / "t-0" / "00000000000000000000.log")],
          code, err.decode(), "produce onto a full disk")
    filler = _fill(mnt)
    # A topic that cannot fit is refused before anything is written, naming what is free.
    code, _out, err = run(["topics", "create", "u", *d])
    check(1, ["creating 1 partition of topic u needs", "where 0 bytes are free", str(dd), "nothing was written"],
          code, err.decode(), "plog topics create u")
    cases = [
        (["init", "-d", str(mnt / "new")], [str(mnt / "new")]),
        (["consume", "t", "-g", "g", "-e", "-q", *d], [str(dd / "groups")]),
        (["scan", "--mode", "search", "--value-contains", "0", "-o", str(mnt / "out.jsonl"), "--output-format",
          "jsonl", "-q", "-j", "1", str(dd)], [str(mnt / "out.jsonl")]),
    ]
    for argv, names in cases:
        code, _out, err = run(argv)
        check(1, ["No space left on device", *names], code, err.decode(), "plog " + shlex.join(argv))
    assert not (mnt / "new").exists(), "a failed plog init left a directory the next plog init refuses"
    assert not (mnt / "out.jsonl").exists()
    assert _no_leftovers(mnt) == []
    # Room again: the next commands work and nothing acknowledged is lost or out of order.
    filler.unlink()
    assert subprocess.run(["mount", "-o", "remount,size=16m", str(mnt)], capture_output=True).returncode == 0
    code, _out, err = run(["produce", "t", "-q", *d], stdin=_lines(10, start=900000))
    assert code == 0, err
    code, out, err = run(["consume", "t", "-e", "-q", *d])
    assert code == 0, err
    got = out.decode().splitlines()
    want_first = first.splitlines()
    assert got[-10:] == _lines(10, start=900000).splitlines()
    assert got[:-10] == want_first[:len(got) - 10], "records before the failure are not a prefix of the input"
    code, out, err = run(["verify", str(dd)])
    assert code == 0, out + err


@pytest.mark.parametrize("path", ["native", "python"])
@pytest.mark.parametrize("keyed", [False, True], ids=["plain", "keyed"])
def test_full_disk_after_some_rounds(tiny_tmpfs, path, keyed):
    """A produce that fills the disk after some of its records were acknowledged: one line
    that names the segment the disk refused (not a file closing wrote later, not an input
    line: a full disk is no line's doing) and says how many records were produced before it;
    a consumer then reads those first, then at most more of the input in order (batches of
    the failed request written before the one refused: at least once, as Kafka)."""
    mnt = tiny_tmpfs
    assert subprocess.run(["mount", "-o", "remount,size=8m", str(mnt)], capture_output=True).returncode == 0
    dd = mnt / "dd"
    d = ["-d", str(dd)]
    env = child_env({"PLOG_NATIVE": "0" if path == "python" else None})
    assert run(["init", *d])[0] == 0 and run(["topics", "create", "t", *d])[0] == 0
    lines = _lines(120_000)  # 12 MB
    data = ("".join(f"k{i % 7}\t{line}" for i, line in enumerate(lines.splitlines(keepends=True)))
            if keyed else lines).encode()
    first = len(data) // 6  # 2 MB, then a pause: that round is acknowledged before more comes
    first_lines = data[:first].count(b"\n")
    hw_file = dd / "broker-1" / "replication-offset-checkpoint"
    p = subprocess.Popen([plog_exe(), "produce", "t", *(["-K"] if keyed else []), *d], stdin=subprocess.PIPE,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    p.stdin.write(data[:first])
    p.stdin.flush()
    # The input pauses here: produce sends what it holds and checkpoints the high watermark.
    # Waited for, not slept on, so a loaded machine cannot merge both parts into one round.
    deadline = time.monotonic() + 60
    while parse_offset_checkpoint(hw_file.read_bytes()).get(("t", 0), 0) < first_lines:
        assert time.monotonic() < deadline and p.poll() is None, "the first part was never acknowledged"
        time.sleep(0.01)
    try:
        p.stdin.write(data[first:])
        p.stdin.close()
    except BrokenPipeError:  # plog stopped at the full disk before reading all of it: expected
        with contextlib.suppress(BrokenPipeError):
            p.stdin.close()  # (closes the pipe even though its unflushed rest cannot go)
    with p.stderr:
        err = p.stderr.read().decode()
    code = p.wait(timeout=120)
    segment = str(dd / "broker-1" / "t-0" / "00000000000000000000.log")
    check(1, [f"Error while appending to {segment}: No space left on device", "before it"],
          code, err, "produce onto a disk that fills up")
    assert "plog: error: line " not in err
    produced = re.search(r"produced (\d+) record\(s\) to t", err)
    assert produced and int(produced.group(1)) >= first_lines, err
    code, out, err = run(["consume", "t", "-e", "-q", *d])
    assert code == 0, err
    got = out.decode().splitlines()
    assert len(got) >= int(produced.group(1)) and got == lines.splitlines()[:len(got)]
    # The torn batch the disk refused is what verify reports until the next writer (or plog
    # recover, with room again) recovers the log; then it verifies, holding what was read.
    code, out, err = run(["verify", str(dd)])
    assert code == 3 and b"torn-tail" in out + err, out + err
    assert subprocess.run(["mount", "-o", "remount,size=32m", str(mnt)], capture_output=True).returncode == 0
    assert run(["recover", str(dd)])[0] == 0
    code, out, err = run(["verify", str(dd)])
    assert code == 0, out + err
    code, out, err = run(["consume", "t", "-e", "-q", *d])
    assert out.decode().splitlines() == got


def test_full_disk_during_a_catch_up(tiny_tmpfs):
    """``plog brokers start`` whose follower's fetches fill the disk: one line naming the
    follower's segment the disk refused (then what closing failed on too), exit 1; nothing
    acknowledged is lost, and with room again the next produce brings the follower back
    into the ISR with every record."""
    mnt = tiny_tmpfs
    assert subprocess.run(["mount", "-o", "remount,size=24m", str(mnt)], capture_output=True).returncode == 0
    dd = mnt / "dd"
    d = ["-d", str(dd)]
    assert run(["init", "--brokers", "3", *d])[0] == 0
    assert run(["topics", "create", "t", "--replica-assignment", "1:2:3", *d])[0] == 0
    assert run(["brokers", "stop", "3", *d])[0] == 0
    lines = _lines(60_000)  # 6 MB on brokers 1 and 2
    assert run(["produce", "t", "-q", *d], stdin=lines)[0] == 0
    filler = mnt / "filler"
    with open(filler, "wb") as f:
        f.write(b"\0" * (os.statvfs(mnt).f_bavail * os.statvfs(mnt).f_frsize - (2 << 20)))  # 2 MiB left
    code, _out, err = run(["brokers", "start", "3", *d])
    check(1, [f"Error while appending to {dd / 'broker-3' / 't-0' / '00000000000000000000.log'}: "
              "No space left on device"], code, err.decode(), "plog brokers start 3 onto a full disk")
    filler.unlink()
    code, out, err = run(["consume", "t", "-e", "-q", *d])
    assert code == 0 and out.decode() == lines, err
    assert run(["produce", "t", "-q", *d], stdin="one more\n")[0] == 0
    code, out, err = run(["topics", "describe", "t", "-f", "json", *d])
    assert code == 0, err
    assert sorted(json.loads(out)[0]["isr"]) == [1, 2, 3], out
    code, out, err = run(["consume", "t", "-e", "-q", *d])
    assert out.decode() == lines + "one more\n"
    code, out, err = run(["verify", str(dd)])
    assert code == 0, out + err


@pytest.mark.parametrize("argv", [
    ["recover"],
    ["retention", "--retention-ms", "1"],
    ["compact", "--force", "--delete-delay-ms", "0"],
    ["brokers", "stop", "1"],
    ["groups", "reset-offsets", "g", "--all-topics", "--to-earliest", "--execute"],
], ids=lambda a: a[0])
def test_full_disk_when_a_log_is_opened_for_writing(tiny_tmpfs, argv):
    """Commands that open a log for writing (its indexes are preallocated sparse files,
    written through mmap) on a file system with no free block: one line naming the file
    system's complaint, exit 1, never SIGBUS; with room again the same command works and
    the data directory verifies."""
    mnt = tiny_tmpfs
    # Room for the set-up (a topic, then the group's 50 __consumer_offsets partitions, which
    # topic creation checks there is room for); _fill takes whatever is left.
    assert subprocess.run(["mount", "-o", "remount,size=2m", str(mnt)], capture_output=True).returncode == 0
    dd = mnt / "dd"
    d = ["-d", str(dd)]
    assert run(["init", *d])[0] == 0
    assert run(["topics", "create", "t", "-c", "cleanup.policy=compact", *d])[0] == 0
    keyed = [f"k{i % 50}\t{i:06d} {'x' * 90}\n" for i in range(2000)]  # 200 KB: fits
    # Two writer sessions, so two producer snapshots, as a piped produce that pauses leaves: the
    # stale one is what recovery deletes first (see _pin).
    for part in (keyed[:1000], keyed[1000:]):
        assert run(["produce", "t", "-K", "-q", *d], stdin="".join(part))[0] == 0
    code, before, err = run(["consume", "t", "-g", "g", "-e", "-q", "-f", "jsonl", *d])
    assert code == 0 and len(before.splitlines()) == 2000, err
    # Without its indexes, opening the log for writing rebuilds them: new index pages to store
    # (an operator's "delete the indexes and let it rebuild" after a corruption).
    for index in (dd / "broker-1" / "t-0").glob("*index"):
        index.unlink()
    _pin(dd, mnt / "pins")
    filler = _fill(mnt)
    argv = [*argv, str(dd)] if argv[0] in ("recover", "retention", "compact") else [*argv, *d]
    code, _out, err = run(argv)
    check(1, ["No space left on device", str(dd)], code, err.decode(), "plog " + shlex.join(argv))
    assert _no_leftovers(mnt) == []
    shutil.rmtree(mnt / "pins")
    filler.unlink()
    assert subprocess.run(["mount", "-o", "remount,size=16m", str(mnt)], capture_output=True).returncode == 0
    code, out, err = run(argv)
    assert code in (0, 3), (argv, out, err)
    code, out, err = run(["verify", str(dd)])
    assert code == 0, out + err
    if argv[0] == "brokers":
        code, out, err = run(["brokers", "start", "1", *d])
        assert code == 0, out + err
    if argv[0] not in ("retention", "compact"):
        code, out, err = run(["consume", "t", "-e", "-q", "-f", "jsonl", *d])
        assert code == 0 and out == before, err
