"""Every ``plog`` command, run as a real process, writes no terminal escape codes on stdout
when stdout is a pipe or when ``NO_COLOR`` is set, nor on a ``TERM=dumb`` terminal
(issue 10, acceptance item 2; DESIGN.md "CLI contract": colour only on a TTY, never with
``NO_COLOR``; cli/output.py ``use_color``: never with ``TERM=dumb`` either).

CASES holds one meaningful invocation of every leaf command of the command tree, plus
``plog --help`` and ``plog --version``; ``test_table_covers_every_command`` fails when a
command is added without an entry here (or an entry names a command that is gone). Each case
runs in three modes:

- ``pipe``: stdout a pipe, no ``NO_COLOR`` (what ``plog ... | jq`` sees);
- ``nocolor``: stdout a pseudo-terminal with ``TERM=xterm-256color`` and ``NO_COLOR=1``;
- ``dumb``: stdout a pseudo-terminal with ``TERM=dumb``.

and must exit with its documented code, print data on stdout where it prints data, and put no
ESC byte (0x1b) on stdout. Listing commands also run once per ``--format`` value their
``--format`` option offers (read from the command tree, so a new format is covered), and
consume and dump with jsonl, in the ``nocolor`` mode. Commands that modify data run on a
fresh copy of the data (``shutil.copytree``), so the cases are independent and the order does
not matter. Every run has its own scratch directory as cwd and $HOME.
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cli_fixtures import (  # noqa: E402
    CORPUS,
    GROUP,
    KAFKA_TOPIC_PARTITION,
    ORDERS_EXTRA_RECORDS,
    ORDERS_RECORDS,
    ORDERS_TOPIC,
    TTY_COLS,
    TTY_ROWS,
    USERS_RECORDS,
    USERS_TOPIC,
    kafka_log_dir,
    populated_data_dir,
    run,
    run_command,
    scenario_file,
    segment_file,
)
from plog.cli.command_tree import command_tree  # noqa: E402

ESC = b"\x1b"

PIPE, NOCOLOR, DUMB = "pipe", "nocolor", "dumb"
MODES = {
    PIPE: dict(tty=False, env={}),
    NOCOLOR: dict(tty=True, env={"NO_COLOR": "1"}),
    DUMB: dict(tty=True, env={"TERM": "dumb"}),
}


@dataclass(frozen=True)
class Case:
    """One invocation. ``args`` may hold placeholders filled from :class:`Data`: {dd} the
    populated data dir, {stopped} the same with broker 3 stopped, {kd} a real Kafka log dir,
    {part} its partition folder, {seg} its first segment, {scenario}, {topics_json},
    {plan_json} (a move), {in_place_json} (the current placement), {home} the run's own $HOME,
    {new} a path that does not exist yet."""

    leaf: tuple[str, ...]  # the command's path in the tree; () for plog itself
    args: tuple[str, ...]
    prints: bool = True  # stdout carries data (non-empty)
    codes: tuple[int, ...] = (0,)
    mutates: bool = False  # run on a fresh copy of the data
    stdin: bytes | None = None
    formats: tuple[str, ...] | None = None  # extra --format values; None: from the tree
    label: str = ""

    @property
    def id(self) -> str:
        return self.label or " ".join(self.leaf) or " ".join(self.args)


D = ("-d", "{dd}")
CASES: list[Case] = [
    Case((), ("--help",), label="--help"),
    Case((), ("--version",), label="--version"),
    # engine front: data directory commands
    Case(("init",), ("init", "-d", "{new}", "--brokers", "2"), prints=False),
    Case(("topics", "create"), ("topics", "create", "payments", "-p", "2", "-r", "2", *D),
         prints=False, mutates=True),
    Case(("topics", "list"), ("topics", "list", *D)),
    Case(("topics", "describe"), ("topics", "describe", "orders", "users", *D)),
    Case(("topics", "alter"), ("topics", "alter", "orders", "--partitions", "4", "-c",
                               "retention.ms=3600000", *D), prints=False, mutates=True),
    Case(("topics", "delete"), ("topics", "delete", "users", *D), prints=False, mutates=True),
    Case(("produce",), ("produce", "orders", "--key-separator", ":", *D), prints=False,
         mutates=True, stdin=b"k9000:hello\nk9001:world\n"),
    Case(("consume",), ("consume", "orders", "-e", *D), formats=("jsonl", "%p %o %k=%v\\n")),
    Case(("groups", "list"), ("groups", "list", *D)),
    Case(("groups", "describe"), ("groups", "describe", GROUP, *D)),
    Case(("groups", "reset-offsets"), ("groups", "reset-offsets", GROUP, "--all-topics",
                                       "--to-earliest", *D)),
    Case(("groups", "reset-offsets"), ("groups", "reset-offsets", GROUP, "--topic", "orders",
                                       "--shift-by", "-10", "--execute", *D),
         mutates=True, formats=(), label="groups reset-offsets --execute"),
    Case(("groups", "delete"), ("groups", "delete", GROUP, *D), prints=False, mutates=True),
    Case(("brokers", "list"), ("brokers", "list", *D)),
    Case(("brokers", "stop"), ("brokers", "stop", "3", *D), mutates=True),
    Case(("brokers", "start"), ("brokers", "start", "3", "-d", "{stopped}"), mutates=True),
    Case(("assign", "generate"), ("assign", "generate", "--topics-to-move-json-file",
                                  "{topics_json}", "--broker-list", "1,2", *D)),
    Case(("assign", "execute"), ("assign", "execute", "--reassignment-json-file", "{plan_json}",
                                 "-q", *D), mutates=True),
    Case(("assign", "verify"), ("assign", "verify", "--reassignment-json-file", "{in_place_json}",
                                *D)),
    Case(("assign", "preferred-leaders"), ("assign", "preferred-leaders", "--dry-run", "--topic",
                                           "orders", *D)),
    Case(("assign", "report"), ("assign", "report", *D)),
    Case(("simulate",), ("simulate", "{scenario}")),
    # maintenance (modify the data: fresh copies)
    Case(("retention",), ("retention", "{dd}", "--retention-ms", "0", "--delete-delay-ms", "0",
                          "--topic", "orders", "--explain"), mutates=True),
    Case(("compact",), ("compact", "{dd}", "--topic", "users", "--force", "--explain",
                        "--delete-delay-ms", "0"), mutates=True),
    Case(("maintain",), ("maintain", "-d", "{dd}", "--explain"), mutates=True),
    Case(("recover",), ("recover", "--all", "{kd}"), mutates=True),
    # offline toolkit on a real Kafka log directory (read-only)
    Case(("dump",), ("dump", "--print-data-log", "{seg}"), formats=("jsonl",)),
    Case(("lookup",), ("lookup", "{part}", "--offset", "5", "--explain")),
    Case(("ls",), ("ls", "{kd}", "--segments")),
    Case(("verify",), ("verify", "-j", "1", "{kd}")),
    Case(("scan",), ("scan", "-j", "1", "{kd}")),
    Case(("scan",), ("scan", "-j", "1", "{dd}", "--key", "k42"), formats=(),
         label="scan search"),
    # a real Schema Registry's _schemas topic (read-only)
    Case(("schemas", "ls"), ("schemas", "ls", str(CORPUS / "rjmfernandes__flink-on-prem" / "data"))),
    Case(("schemas", "show"), ("schemas", "show", str(CORPUS / "rjmfernandes__flink-on-prem" / "data"), "orders-value")),
    Case(("schemas", "export"), ("schemas", "export", str(CORPUS / "rjmfernandes__flink-on-prem" / "data"), "{new}"),
         prints=False),
    # shell integration ({home} is the run's own $HOME: install writes there)
    Case(("completions", "show"), ("completions", "show", "bash"), label="completions show bash"),
    Case(("completions", "show"), ("completions", "show", "zsh"), label="completions show zsh"),
    Case(("completions", "show"), ("completions", "show", "fish"), label="completions show fish"),
    Case(("completions", "install"), ("completions", "install", "bash"), prints=False),
    Case(("completions", "values"), ("completions", "values", "topic", *D)),
]


@dataclass
class Data:
    """The module's data, built once; cases that mutate get copies."""

    root: Path
    paths: dict[str, str] = field(default_factory=dict)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Data:
    root = tmp_path_factory.mktemp("no-escapes")
    dd = populated_data_dir(root)
    stopped = root / "stopped" / "plog-data"
    shutil.copytree(dd, stopped)
    code, _out, err = run(["brokers", "stop", "3", "-d", stopped], cwd=root)
    assert code == 0, err
    kd = kafka_log_dir(root)
    topics_json = root / "topics.json"
    topics_json.write_text('{"version": 1, "topics": [{"topic": "orders"}]}\n')
    # Replica placement is randomised (Kafka's start index): plans are made from what is there.
    code, out, err = run(["topics", "describe", "orders", "--format", "json", "-d", dd], cwd=root)
    assert code == 0, err
    replicas = next(p["replicas"] for p in json.loads(out) if p["partition"] == 0)
    spare = next(b for b in (1, 2, 3) if b not in replicas)
    plan_json = root / "plan.json"  # move orders-0 off its second replica onto the spare broker
    plan_json.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "replicas": [replicas[0], spare]}]}))
    in_place_json = root / "in-place.json"  # what is already there: assign verify says complete
    in_place_json.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "replicas": replicas}]}))
    return Data(root, {
        "dd": str(dd), "stopped": str(stopped), "kd": str(kd),
        "part": str(kd / KAFKA_TOPIC_PARTITION), "seg": str(segment_file(kd)),
        "scenario": str(scenario_file(root)), "topics_json": str(topics_json),
        "plan_json": str(plan_json), "in_place_json": str(in_place_json),
    })


_COPIED = ("dd", "stopped", "kd")
_counter = iter(range(10**9))


def _paths_for(case: Case, data: Data) -> tuple[dict[str, str], Path]:
    """Placeholder values for one run: fresh copies of the directories a mutating case names,
    a fresh {new} path and a fresh {home}. Returns (paths, the run's own scratch directory)."""
    scratch = data.root / f"run-{next(_counter)}"
    (scratch / "home").mkdir(parents=True)
    paths = dict(data.paths, new=str(scratch / "new-data"), home=str(scratch / "home"))
    if case.mutates:
        joined = " ".join(case.args)
        for key in _COPIED:
            if "{" + key + "}" in joined:
                src = Path(data.paths[key])
                dst = scratch / key / src.name
                shutil.copytree(src, dst)
                paths[key] = str(dst)
        assert "{part}" not in joined and "{seg}" not in joined, "mutating cases name {kd}"
    return paths, scratch


_LEAVES = {leaf.path: leaf for leaf in command_tree().leaves()}


def _format_values(case: Case) -> tuple[str, ...]:
    """The extra --format values to run ``case`` with: given, else for a listing command
    (its --format offers ``table``) every other choice of that option, read from the tree."""
    if case.formats is not None:
        return case.formats
    leaf = _LEAVES.get(case.leaf)
    for p in leaf.params if leaf else ():
        if "--format" in p.opts and "table" in p.choices:
            return tuple(c for c in p.choices if c != p.default)
    return ()


def _runs():
    """(case, --format value or None, mode) for every run, as pytest params. Every case runs
    in the three modes; its --format variants run in ``nocolor`` only, the mode in which a
    styled renderer would leak (a pipe turns styling off before any format is chosen, and the
    json/jsonl/csv writers never style), to keep the file's run time in bounds (every run is a
    new process: about 0.4 s of CPU for start-up alone)."""
    out = []
    for case in CASES:
        for mode in MODES:
            out.append(pytest.param(case, None, mode, id=f"{case.id}-{mode}"))
        for fmt in _format_values(case):
            out.append(pytest.param(case, fmt, NOCOLOR, id=f"{case.id}-f {fmt}-{NOCOLOR}"))
    return out


def _describe(args, code, out, err) -> str:
    return (f"plog {' '.join(args)} -> exit {code}\nstdout: {out[:600]!r}\n"
            f"stderr: {err[-600:]!r}")


@pytest.mark.parametrize(("case", "fmt", "mode"), _runs())
def test_no_escape_codes_on_stdout(case: Case, fmt: str | None, mode: str, data: Data):
    paths, scratch = _paths_for(case, data)
    args = [a.format(**paths) for a in case.args]
    if fmt is not None:
        args += ["--format", fmt]
    # $HOME is the run's own (completions install writes there); no XDG_* dirs leak in
    env = dict(MODES[mode]["env"], HOME=paths["home"], XDG_DATA_HOME=None, XDG_CONFIG_HOME=None,
               SHELL="/bin/bash")
    code, out, err = run(args, tty=MODES[mode]["tty"], env=env, stdin=case.stdin, cwd=scratch)
    what = _describe(args, code, out, err)
    assert code in case.codes, what
    assert b"Traceback" not in err, what
    if case.prints:
        assert out.strip(), "no data on stdout: " + what
    assert ESC not in out, f"escape code on stdout ({mode}): " + what


def test_table_covers_every_command():
    """Every leaf command of the tree has a case, and every case names a real command."""
    leaves = set(_LEAVES)
    covered = {c.leaf for c in CASES if c.leaf}
    assert leaves - covered == set(), f"commands without a case in CASES: {sorted(leaves - covered)}"
    assert covered - leaves == set(), f"cases for commands that do not exist: {sorted(covered - leaves)}"
    assert {c.args[0] for c in CASES if not c.leaf} == {"--help", "--version"}


def test_format_sweep_reads_the_tree():
    """Listing commands run every --format their option offers (so the sweep cannot silently
    shrink to nothing): topics list is swept over table's siblings text, json, jsonl, csv."""
    case = next(c for c in CASES if c.leaf == ("topics", "list"))
    assert set(_format_values(case)) >= {"text", "json", "jsonl", "csv"}


def test_pty_harness_gives_a_terminal():
    """The ``nocolor``/``dumb`` runs really give the child a terminal (else every ESC check
    above would pass for the wrong reason): stdout is a TTY of TTY_ROWS x TTY_COLS, stderr a
    pipe, and the bytes come back unchanged (no ``\\r\\n``)."""
    probe = ("import os, sys; sz = os.get_terminal_size(1); "
             "print(os.isatty(1), os.isatty(2), sz.lines, sz.columns, os.environ.get('TERM'))")
    code, out, err = run_command([sys.executable, "-c", probe], tty=True, timeout=60)
    assert code == 0, err
    assert out == f"True False {TTY_ROWS} {TTY_COLS} xterm-256color\n".encode()


def test_empty_no_color_is_enough(data: Data):
    """``NO_COLOR`` set to the empty string still turns styling off (present is enough, as
    no-color.org first said; cli/output.py use_color), on a table a terminal would style."""
    code, out, err = run(["groups", "describe", GROUP, "-d", data.paths["dd"]], tty=True,
                         env={"NO_COLOR": ""})
    assert code == 0, err
    assert b"billing" in out and ESC not in out, out


def test_populated_data_dir_is_as_documented(data: Data):
    """cli_fixtures.populated_data_dir builds what its docstring says (other test files rely
    on it): the group's committed offsets cover the first 300 records of orders' 3 partitions,
    60 later records are its lag, and users is compacted with a closed segment."""
    code, out, err = run(["groups", "describe", GROUP, "--format", "json", "-d", data.paths["dd"]])
    assert code == 0, err
    rows = json.loads(out)
    assert sorted(r["partition"] for r in rows) == [0, 1, 2]
    assert {r["topic"] for r in rows} == {ORDERS_TOPIC}
    assert sum(r["current_offset"] for r in rows) == ORDERS_RECORDS
    assert sum(r["lag"] for r in rows) == ORDERS_EXTRA_RECORDS
    code, out, err = run(["topics", "describe", USERS_TOPIC, "--format", "json", "-d", data.paths["dd"]])
    assert code == 0, err
    (users,) = json.loads(out)
    assert users["configs"]["cleanup.policy"] == "compact"
    assert users["log_end_offset"] == USERS_RECORDS and users["segments"] >= 2
    assert len(users["replicas"]) == 2
