"""A plain ``plog produce`` run (cli/plain.py) reads its options as Click does, or leaves
them to Click: the option table against the Typer command, generated argument lists read
both ways, and the run itself without Typer."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import fields

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.main import get_command
from typer.testing import CliRunner

import plog.cli.produce as produce_command
from plog.cli.main import app
from plog.cli.plain import Choice, Flag, Int, Many, Text, plain_command, produce_args
from plog.cli.produce_run import PLAIN_OPTIONS, ProduceArgs, Prepared


def _click_produce():
    return get_command(app).commands["produce"]


def test_the_table_says_what_the_typer_command_declares():
    params = {p.name: p for p in _click_produce().params}
    table = {o.field: o for o in PLAIN_OPTIONS}
    assert set(params) == set(table) | {"topic"}
    assert type(params["topic"]).__name__.endswith("Argument")
    for name, option in table.items():
        p = params[name]
        assert set(p.opts) == set(option.opts), name
        assert p.envvar == option.envvar, name
        takes = option.takes
        if isinstance(takes, Flag):
            assert p.is_flag and set(p.secondary_opts) == set(takes.off), name
        else:
            assert not p.is_flag and not p.secondary_opts, name
            assert p.multiple == isinstance(takes, Many), name
        if isinstance(takes, Int):
            assert p.type.min == takes.minimum and not p.type.min_open and p.type.max is None, name
        elif isinstance(takes, Choice):
            assert list(p.type.choices) == [m.value for m in takes.enum] or \
                list(p.type.choices) == list(takes.enum), name
            assert p.type.case_sensitive, name
        elif isinstance(takes, (Text, Many)):
            assert type(p.type).__name__ == "StringParamType", name


def test_produce_args_defaults_are_the_typer_defaults():
    captured = _click_reads(["t"], {})
    assert captured == ProduceArgs(topic="t")
    assert {f.name for f in fields(ProduceArgs)} == {o.field for o in PLAIN_OPTIONS} | {"topic"}


def _click_reads(argv: list[str], env: dict) -> ProduceArgs | str:
    """What the Typer command hands ``prepare`` for ``plog produce ARGV`` (nothing is run),
    or "refused" when Click refuses the arguments."""
    got = []

    def capture(args):
        got.append(args)
        raise SystemExit(0)

    saved = produce_command.prepare
    produce_command.prepare = capture
    try:
        result = CliRunner().invoke(app, ["produce", *argv], env=env)
    finally:
        produce_command.prepare = saved
    if got:
        return got[0]
    assert result.exit_code == 2, (argv, result.output)
    return "refused"


VALUES = ["x", "t2", "-x", "-", "--quiet", "-q", "0", "-1", "7", " 7", "1_000", "0x10", "lines", "jsonl", "gzip",
          "zstd", "LZ4", "k=v", "a=1,b=2", "", "a b", "\\t", "all", "parse.key=true", "--help"]
OPTION_WORDS = sorted({s for o in PLAIN_OPTIONS for s in o.opts} |
                      {s for o in PLAIN_OPTIONS if isinstance(o.takes, Flag) for s in o.takes.off} |
                      {"-K:", "-K|", "--acks=1", "--partition=3", "--quiet=1", "-p3", "-qv", "--", "--nope", "-Z"})
ENVS = [{}, {"PLOG_QUIET": "1"}, {"PLOG_QUIET": "0"}, {"PLOG_QUIET": "yes"}, {"PLOG_QUIET": ""},
        {"PLOG_QUIET": "2"}, {"PLOG_DATA_DIR": "/tmp/elsewhere"}, {"PLOG_DATA_DIR": ""}]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(st.one_of(st.sampled_from(OPTION_WORDS), st.sampled_from(VALUES),
                                st.sampled_from(["t", "orders", "a.b-c_1"])), max_size=7),
       env=st.sampled_from(ENVS))
def test_a_plain_read_is_what_click_reads(words, env, monkeypatch):
    for k in ("PLOG_QUIET", "PLOG_DATA_DIR"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    plain = produce_args(["produce", *words])
    if plain is None:
        return  # Click reads it (and says what is wrong with it)
    clean = {k: v for k, v in env.items()}
    assert _click_reads(words, clean) == plain, words


def test_every_option_with_every_value_is_read_as_click_reads_it(monkeypatch):
    """Each option string once with each value (and alone, and as --opt=value): the pairs a
    generated list would rarely hit."""
    for k in ("PLOG_QUIET", "PLOG_DATA_DIR"):
        monkeypatch.delenv(k, raising=False)
    compared = 0
    for word in OPTION_WORDS:
        for argv in [["t", word]] + [["t", word, v] for v in VALUES] + [["t", f"{word}={v}"] for v in VALUES[:8]]:
            plain = produce_args(["produce", *argv])
            if plain is not None:
                assert _click_reads(argv, {}) == plain, argv
                compared += 1
    assert compared > 400  # most are plain: the comparison is not vacuous


@pytest.mark.parametrize("argv", [
    ["t", "--file", "in.txt"],
    ["t", "-F", "in.txt", "-d", "dir"],
    ["-t", "t", "--parse-key", "--partition", "3"],
    ["t", "-K:", "--acks", "1", "--compression", "lz4", "--batch-size", "65536", "--linger-ms=5"],
    ["t", "--header", "a=1", "-H", "b=2", "--property", "null.marker=N", "--no-idempotence", "-q"],
])
def test_the_usual_runs_are_plain(argv):
    assert produce_args(["produce", *argv]) is not None


@pytest.mark.parametrize("argv", [
    ["produce", "--help"], ["produce", "t", "-qv"], ["produce", "t", "-p3"], ["produce", "a", "b"],
    ["-q", "produce", "t"], ["consume", "t"], ["produce", "t", "--partition", "-1"], ["produce", "t", "--"],
])
def test_the_rest_is_clicks(argv):
    assert plain_command(argv) is None


def test_a_plain_run_imports_no_typer(tmp_path):
    src = tmp_path / "in.txt"
    src.write_bytes(b"a\nb\n")
    code = ("import sys\n"
            f"sys.argv = ['plog', 'produce', 't', '--file', {str(src)!r}, '--data-dir', {str(tmp_path / 'd')!r}]\n"
            "from plog.cli.entry import main\n"
            "try:\n    main()\n"
            "finally:\n"
            "    print(sorted(m for m in sys.modules if m.split('.')[0] in ('typer', 'click', 'rich')))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
    assert "produced 2 record(s) to t" in r.stderr


def test_a_value_only_the_command_refuses_is_said_as_click_says_it(tmp_path):
    """--acks x passes the option parser and is refused by the command's own check: the
    plain run hands it to Click, before anything is opened or created."""
    d = tmp_path / "d"
    r = subprocess.run([sys.executable, "-m", "plog.cli", "produce", "t", "--acks", "x", "--data-dir", str(d)],
                       input=b"", capture_output=True, timeout=120)
    assert r.returncode == 2
    assert b"Usage: plog produce [OPTIONS] [TOPIC]" in r.stderr
    assert b"Invalid value for --acks: must be 0, 1, all or -1" in r.stderr
    assert not d.exists()


def test_prepare_reads_the_topic_the_headers_and_acks():
    args = ProduceArgs(topic="t", header=["a=1"], acks="1")
    from plog.cli.produce_run import prepare

    prepared = prepare(args)
    assert isinstance(prepared, Prepared)
    assert prepared.topic == "t" and prepared.headers == [("a", b"1")]
