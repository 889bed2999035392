"""Shell completions: the checked-in scripts match the code, and TAB really completes.

bash is tested as a user's shell runs it: the checked-in ``completions/plog.bash`` is sourced
in ``bash --norc --noprofile`` (no bash-completion package) and ``_plog`` is called with
COMP_WORDS/COMP_CWORD/COMP_LINE/COMP_POINT set, with PATH making ``plog`` the venv's script,
so topic, group and broker names come from a real ``plog completions values`` run on a data
directory built with the real CLI. fish (``complete -C``) and zsh (a pseudo-terminal driving
an interactive zsh, the zsh-capture-completion technique) are tested the same way when they
are installed, and skipped with the reason otherwise.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cli_run import plog
from conftest import CORPUS, ROOT

from plog.cli.command_tree import command_tree
from plog.cli.completion_scripts import SHELLS, render
from plog.cli.completion_values import data_dir_values
from plog.cli.main import main

SCRIPTS = {"bash": ROOT / "completions" / "plog.bash", "zsh": ROOT / "completions" / "_plog",
           "fish": ROOT / "completions" / "plog.fish"}
VENV_BIN = Path(sys.executable).parent
BASH = shutil.which("bash")
TOPICS = ["__consumer_offsets", "orders", "payments"]


def _run_plog(*args: str) -> None:
    """``plog ARGS`` in this process (through the real entry point), which must succeed."""
    try:
        main(list(args))
    except SystemExit as e:
        assert e.code in (0, None), args


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A working directory holding ``plog-data`` (the default data directory): topics orders
    (2 partitions) and payments, and a group billing that committed offsets."""
    cwd = tmp_path_factory.mktemp("site")
    dd = cwd / "plog-data"
    records = cwd / "records.txt"
    records.write_text("a\nb\nc\n")
    _run_plog("init", "-d", str(dd))
    _run_plog("topics", "create", "orders", "--partitions", "2", "-d", str(dd))
    _run_plog("topics", "create", "payments", "-d", str(dd))
    _run_plog("produce", "orders", "-d", str(dd), "--file", str(records), "-q")
    _run_plog("consume", "orders", "-d", str(dd), "-g", "billing", "-e", "--commit", "-q")
    records.unlink()
    (cwd / "home").mkdir()
    return cwd


def _env(home: Path, *, path: str | None = None, **extra: str) -> dict[str, str]:
    env = {"PATH": path if path is not None else f"{VENV_BIN}{os.pathsep}/usr/bin{os.pathsep}/bin",
           "HOME": str(home), "LANG": "C.UTF-8"}
    env.update(extra)
    return env


# -- bash ------------------------------------------------------------------------------------------


def bash_complete(line: str, cwd: Path, *, words: list[str] | None = None, **env: str) -> list[str]:
    """COMPREPLY of ``_plog`` for ``line`` with the cursor at its end. ``words``: COMP_WORDS
    when bash would split them otherwise than at blanks (``--opt=value``)."""
    if words is None:
        words = line.split()
        if line.endswith(" "):
            words.append("")
    snippet = "\n".join([
        f"source {shlex.quote(str(SCRIPTS['bash']))}",
        f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)})",
        f"COMP_CWORD={len(words) - 1}",
        f"COMP_LINE={shlex.quote(line)}",
        f"COMP_POINT={len(line)}",
        "_plog",
        'if (( ${#COMPREPLY[@]} )); then printf "%s\\n" "${COMPREPLY[@]}"; fi',
    ])
    r = subprocess.run([BASH, "--norc", "--noprofile", "-c", snippet], cwd=cwd, env=_env(cwd, **env),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stderr == "", (line, r.returncode, r.stderr)
    return r.stdout.splitlines()


def test_bash_commands_and_subcommands(site):
    tree = command_tree()
    top = [c.path[-1] for c in tree.subcommands if not c.hidden]
    assert bash_complete("plog ", site) == top
    assert {"consume", "dump", "topics", "groups", "completions"} <= set(top)
    assert bash_complete("plog to", site) == ["topics"]
    assert bash_complete("plog topics ", site) == ["create", "list", "describe", "alter", "delete"]
    assert bash_complete("plog groups d", site) == ["describe", "delete"]
    # The hidden `completions values` is not offered.
    assert bash_complete("plog completions ", site) == ["show", "install"]
    assert bash_complete("plog --debug topics c", site) == ["create"]


def test_bash_options(site):
    create = bash_complete("plog topics create --", site)
    assert {"--partitions", "--replication-factor", "--config", "--data-dir", "--help"} <= set(create)
    assert all(o.startswith("--") for o in create)
    consume = bash_complete("plog consume orders -", site)
    assert {"-g", "--group", "-e", "--exit-at-end", "-d", "--data-dir", "-h"} <= set(consume)
    assert bash_complete("plog consume --exit", site) == ["--exit-at-end"]
    assert "--version" in bash_complete("plog --", site)


def test_every_command_completes_its_subcommands_and_long_options(site):
    """The script knows the whole tree: for every visible command, its subcommands (groups)
    or every long option (leaves), in one bash run."""
    tree = command_tree()
    checks = []
    for c in tree.walk():
        if c.hidden:
            continue
        if c.is_group:
            expected = [s.path[-1] for s in c.subcommands if not s.hidden]
            line = " ".join(("plog",) + c.path) + " "
        else:
            expected = sorted({o for p in c.params if not p.hidden and not p.is_argument for o in p.opts
                               if o.startswith("--")} | {"--help"})
            line = " ".join(("plog",) + c.path) + " --"
        checks.append((line, expected, c.is_group))
    assert len(checks) > 20
    for line, expected, is_group in checks:
        got = bash_complete(line, site)
        assert (got if is_group else sorted(got)) == expected, line


def test_bash_choices(site):
    assert bash_complete("plog topics list --format ", site) == ["table", "text", "json", "jsonl", "csv"]
    assert bash_complete("plog topics list -f j", site) == ["json", "jsonl"]
    # bash splits --format=j at '=' (COMP_WORDBREAKS): the value completes after the '='.
    assert bash_complete("plog topics list --format=j", site,
                         words=["plog", "topics", "list", "--format", "=", "j"]) == ["json", "jsonl"]
    assert bash_complete("plog topics list --format=", site,
                         words=["plog", "topics", "list", "--format", "="]) == ["table", "text", "json", "jsonl", "csv"]
    # Without '=' in COMP_WORDBREAKS the word stays whole and completes whole.
    assert bash_complete("plog topics list --format=js", site) == ["--format=json", "--format=jsonl"]
    assert bash_complete("plog produce orders -z ", site) == ["none", "gzip", "snappy", "lz4", "zstd"]
    assert bash_complete("plog completions show ", site) == ["bash", "zsh", "fish"]
    # An option that takes a plain value offers nothing, and its value is not an argument.
    assert bash_complete("plog consume orders --offset ", site) == []
    assert bash_complete("plog consume --offset -10 ", site) == TOPICS


def test_bash_topics_from_the_data_dir(site, tmp_path):
    dd = str(site / "plog-data")
    # -d/--data-dir on the line, in each spelling, before or after other options.
    assert bash_complete(f"plog consume -d {dd} ", tmp_path) == TOPICS
    assert bash_complete(f"plog consume -g billing --data-dir {dd} o", tmp_path) == ["orders"]
    assert bash_complete(f"plog topics describe -d{dd} p", tmp_path) == ["payments"]
    assert bash_complete(f"plog topics delete --data-dir={dd} ", tmp_path,
                         words=["plog", "topics", "delete", "--data-dir", "=", dd, ""]) == TOPICS
    # $PLOG_DATA_DIR, and ./plog-data by default.
    assert bash_complete("plog consume ", tmp_path, PLOG_DATA_DIR=dd) == TOPICS
    assert bash_complete("plog topics describe orders ", site) == TOPICS  # several topics
    assert bash_complete("plog consume orders ", site) == []  # consume takes one
    # The line's -d wins over $PLOG_DATA_DIR.
    assert bash_complete(f"plog consume -d {tmp_path} ", site, PLOG_DATA_DIR=dd) == []


def test_bash_groups_and_brokers(site):
    assert bash_complete("plog groups reset-offsets b", site) == ["billing"]
    assert bash_complete("plog consume orders --group ", site) == ["billing"]
    assert bash_complete("plog brokers stop ", site) == ["1"]


def test_bash_partition_folders(site, tmp_path):
    dd = site / "plog-data"
    # verify (PATH arguments): files, and the data directory's partition folders.
    got = bash_complete("plog verify ", tmp_path, PLOG_DATA_DIR=str(dd))
    assert got == [f"{dd}/broker-1/orders-0", f"{dd}/broker-1/orders-1", f"{dd}/broker-1/payments-0"]
    got = bash_complete("plog verify ", site)
    assert {"plog-data/broker-1/orders-0", "plog-data/broker-1/payments-0", "plog-data", "home"} <= set(got)
    assert not any("__consumer_offsets" in g for g in got)  # internal folders only as files
    # Found both as files and as partition folders: offered once.
    assert sorted(bash_complete("plog verify plog-data/broker-1/or", site)) == [
        "plog-data/broker-1/orders-0", "plog-data/broker-1/orders-1"]
    assert "plog-data/broker-1/__consumer_offsets-7" in bash_complete("plog verify plog-data/broker-1/__", site)
    # dump: segment files and folders, by path.
    assert sorted(bash_complete("plog dump plog-data/broker-1/or", site)) == [
        "plog-data/broker-1/orders-0", "plog-data/broker-1/orders-1"]
    got = bash_complete("plog dump plog-data/broker-1/orders-0/0", site)
    assert "plog-data/broker-1/orders-0/00000000000000000000.log" in got
    assert all(g.startswith("plog-data/broker-1/orders-0/0") for g in got)
    # --data-dir completes directories only.
    (tmp_path / "somefile").write_text("x")
    (tmp_path / "somedir").mkdir()
    assert bash_complete("plog topics list -d some", tmp_path) == ["somedir"]


def test_bash_without_data_dir_or_plog(site, tmp_path):
    missing = str(tmp_path / "missing")
    assert bash_complete(f"plog consume -d {missing} ", tmp_path) == []
    assert bash_complete("plog groups describe ", tmp_path) == []  # no ./plog-data here
    # plog not on PATH: static completions still work, dynamic ones offer nothing.
    no_plog = f"/usr/bin{os.pathsep}/bin"
    assert bash_complete("plog consume ", site, path=no_plog) == []
    assert bash_complete("plog topics ", site, path=no_plog) == ["create", "list", "describe", "alter", "delete"]
    # Not a data directory at all (a file, an unrelated directory).
    (tmp_path / "file").write_text("x")
    assert bash_complete(f"plog brokers stop -d {tmp_path / 'file'} ", tmp_path) == []


def test_bash_runs_the_plog_being_completed(site, tmp_path):
    """`./venv/bin/plog <TAB>` asks that plog, even when none is on PATH."""
    no_plog = f"/usr/bin{os.pathsep}/bin"
    assert bash_complete(f"{VENV_BIN / 'plog'} consume ", site, path=no_plog) == TOPICS


# -- values ----------------------------------------------------------------------------------------


def test_values_command(site, tmp_path, capsys, monkeypatch):
    dd = str(site / "plog-data")
    assert plog(capsys, "completions", "values", "topic", "-d", dd) == (0, "\n".join(TOPICS) + "\n", "")
    assert plog(capsys, "completions", "values", "group", "-d", dd) == (0, "billing\n", "")
    assert plog(capsys, "completions", "values", "broker", "-d", dd) == (0, "1\n", "")
    code, out, err = plog(capsys, "completions", "values", "partition", "-d", dd + "/")
    assert (code, err) == (0, "")
    assert out.splitlines() == [f"{dd}/broker-1/orders-0", f"{dd}/broker-1/orders-1", f"{dd}/broker-1/payments-0"]
    # Silent and successful without a data directory, or with a broken one.
    assert plog(capsys, "completions", "values", "topic", "-d", str(tmp_path / "nope")) == (0, "", "")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "cluster.json").write_text("{not json")
    assert plog(capsys, "completions", "values", "group", "-d", str(bad)) == (0, "", "")
    monkeypatch.setenv("PLOG_DATA_DIR", dd)
    assert plog(capsys, "completions", "values", "broker") == (0, "1\n", "")
    # Hidden from help, and an unknown kind is a usage error.
    assert "values" not in plog(capsys, "completions", "--help")[1]
    assert plog(capsys, "completions", "values", "nope", "-d", dd)[0] == 2


def test_values_of_a_kafka_log_dir(corpus):
    """A real Apache Kafka log directory: the same topics as DataDir reads."""
    from plog.engine.cluster.data_dir import DataDir

    log_dir = CORPUS / "BiggerBrain__kafka" / "data"
    topics = data_dir_values("topic", str(log_dir))
    assert topics and topics == DataDir.open(log_dir).topics()
    parts = data_dir_values("partition", str(log_dir))
    assert f"{log_dir}/lsx1-0" in parts
    assert all(Path(p).is_dir() and Path(p).parent == log_dir and not Path(p).name.startswith("__") for p in parts)
    assert len(data_dir_values("broker", str(log_dir))) == 1


# -- the scripts: generated, checked in, installable ------------------------------------------------


@pytest.mark.parametrize("shell", SHELLS)
def test_show_matches_checked_in_script(shell, capsys):
    code, out, err = plog(capsys, "completions", "show", shell)
    assert (code, err) == (0, "")
    assert out == SCRIPTS[shell].read_text(encoding="utf-8"), (
        f"completions/{SCRIPTS[shell].name} is stale: run python -m plog.cli.gendocs")
    assert "Generated by `python -m plog.cli.gendocs`" in out and "do not edit by hand" in out


def test_render_is_deterministic_and_rejects_other_shells():
    tree = command_tree()
    for shell in SHELLS:
        assert render(shell, tree) == render(shell, command_tree())
    with pytest.raises(ValueError, match="tcsh"):
        render("tcsh", tree)


def test_show_unknown_shell(capsys):
    code, out, err = plog(capsys, "completions", "show", "tcsh")
    assert code == 2 and out == "" and "tcsh" in err


def test_install(tmp_path, capsys, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "ZDOTDIR"):
        monkeypatch.delenv(var, raising=False)

    monkeypatch.setenv("SHELL", "/usr/bin/bash")
    code, out, err = plog(capsys, "completions", "install")
    target = home / ".local/share/bash-completion/completions/plog"
    assert (code, out) == (0, "") and str(target) in err
    assert target.read_text() == SCRIPTS["bash"].read_text()

    xdg = tmp_path / "xdg-config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    code, out, err = plog(capsys, "completions", "install", "fish")
    assert code == 0 and str(xdg / "fish/completions/plog.fish") in err
    assert (xdg / "fish/completions/plog.fish").read_text() == SCRIPTS["fish"].read_text()

    code, out, err = plog(capsys, "completions", "install", "zsh")
    assert code == 0 and (home / ".zfunc/_plog").read_text() == SCRIPTS["zsh"].read_text()
    assert "fpath+=~/.zfunc; autoload -Uz compinit; compinit" in err
    (home / ".zshrc").write_text("fpath+=~/.zfunc\nautoload -Uz compinit; compinit\n")
    code, out, err = plog(capsys, "completions", "install", "zsh")
    assert code == 0 and "fpath" not in err  # already set up: no hint

    # --path overrides; an existing file is replaced whole, no temporary file is left.
    custom = tmp_path / "deep" / "er" / "plog-completion"
    custom.parent.mkdir(parents=True)
    custom.write_text("old " * 10000)
    assert plog(capsys, "completions", "install", "bash", "--path", str(custom))[0] == 0
    assert custom.read_text() == SCRIPTS["bash"].read_text()
    assert sorted(p.name for p in custom.parent.iterdir()) == ["plog-completion"]

    # $SHELL that is none of the three: a usage error that says what to do.
    monkeypatch.setenv("SHELL", "/bin/tcsh")
    code, out, err = plog(capsys, "completions", "install")
    assert code == 2 and err.startswith("plog: error: ") and "tcsh" in err and "bash, zsh, fish" in err
    assert err.count("\n") == 1


def test_installed_bash_script_works(site, tmp_path, capsys, monkeypatch):
    """What install writes is what a shell sources: complete -F registers _plog."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    assert plog(capsys, "completions", "install", "bash")[0] == 0
    target = tmp_path / ".local/share/bash-completion/completions/plog"
    r = subprocess.run([BASH, "--norc", "--noprofile", "-c", f"source {shlex.quote(str(target))}; complete -p plog"],
                       env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "complete -F _plog plog", r.stderr


# -- zsh and fish (when installed) -----------------------------------------------------------------


def _need(shell: str) -> str:
    exe = shutil.which(shell)
    if exe is None:
        pytest.skip(f"{shell} is not installed on this machine (apt-get install {shell} to run this test)")
    return exe


def test_zsh_script_parses():
    zsh = _need("zsh")
    r = subprocess.run([zsh, "-n", str(SCRIPTS["zsh"])], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert SCRIPTS["zsh"].read_text().startswith("#compdef plog\n")


def test_fish_script_parses():
    fish = _need("fish")
    r = subprocess.run([fish, "--no-config", "-n", str(SCRIPTS["fish"])], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stderr == "", r.stderr


def fish_complete(fish: str, line: str, cwd: Path, **env: str) -> list[str]:
    """fish's own completions (``complete -C``) of ``line``, without their descriptions."""
    cmd = f"source {shlex.quote(str(SCRIPTS['fish']))}; complete -C {shlex.quote(line)}"
    r = subprocess.run([fish, "--no-config", "-c", cmd], cwd=cwd, env=_env(cwd / "home", **env),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stderr == "", (line, r.stderr)
    return [ln.split("\t")[0] for ln in r.stdout.splitlines()]


def test_fish_completes(site, tmp_path):
    fish = _need("fish")
    assert fish_complete(fish, "plog topics ", site) == ["alter", "create", "delete", "describe", "list"]
    assert "--replication-factor" in fish_complete(fish, "plog topics create --", site)
    assert fish_complete(fish, "plog topics list --format j", site) == ["json", "jsonl"]
    assert sorted(fish_complete(fish, "plog consume ", site)) == TOPICS
    assert fish_complete(fish, "plog groups describe ", site) == ["billing"]
    dd = str(site / "plog-data")
    assert fish_complete(fish, f"plog consume -d {dd} o", tmp_path) == ["orders"]
    assert fish_complete(fish, "plog consume ", tmp_path) == []  # no data directory here
    # A partition folder found as a file and from the data directory is offered once.
    got = fish_complete(fish, "plog verify plog-data/broker-1/or", site)
    assert got == ["plog-data/broker-1/orders-0/", "plog-data/broker-1/orders-1/"]


# The zsh-capture-completion technique (github.com/Valodim/zsh-capture-completion): an
# interactive zsh on a pseudo-terminal, TAB bound to complete-word, compadd wrapped to print
# each match; $1 is the line typed.
ZSH_CAPTURE = r"""
zmodload zsh/zpty || exit 3
zpty z zsh -f -i
local line
setopt rcquotes
() {
    zpty -w z source $1
    repeat 4; do
        zpty -r z line
        [[ $line == ok* ]] && return
    done
    echo 'error initializing.' >&2
    exit 2
} =( <<< '
PROMPT=
fpath=($PLOG_COMPLETIONS $fpath)
autoload -U compinit
compinit -u -d $HOME/.zcompdump
bindkey ''^M'' undefined
bindkey ''^J'' undefined
bindkey ''^I'' complete-word
null-line () { echo -E - $''\0'' }
compprefuncs=( null-line )
comppostfuncs=( null-line exit )
zstyle '':completion:*'' list-grouped false
zstyle '':completion:*'' insert-tab false
zstyle '':completion:*'' list-separator ''''
zmodload zsh/zutil
compadd () {
    if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then
        builtin compadd "$@"
        return $?
    fi
    typeset -a __hits __dscr __tmp
    if (( $@[(I)-d] )); then
        __tmp=${@[$[${@[(i)-d]}+1]]}
        if [[ $__tmp == \(* ]]; then
            eval "__dscr=$__tmp"
        else
            __dscr=( "${(@P)__tmp}" )
        fi
    fi
    builtin compadd -A __hits -D __dscr "$@"
    setopt localoptions norcexpandparam extendedglob
    typeset -A apre hpre hsuf asuf
    zparseopts -E P:=apre p:=hpre S:=asuf s:=hsuf
    [[ -n $__hits ]] || return
    for i in {1..$#__hits}; do
        echo -E - $IPREFIX$apre$hpre$__hits[$i]$hsuf$asuf
    done
}
echo ok')
zpty -w z "$*"$'\t'
integer tog=0
while zpty -r z; do :; done | while IFS= read -r line; do
    if [[ $line == *$'\0\r' ]]; then
        (( tog++ )) && return 0 || continue
    fi
    (( tog )) && echo -E - $line
done
return 2
"""


def test_zsh_completes(site, tmp_path):
    zsh = _need("zsh")
    capture = tmp_path / "capture.zsh"
    capture.write_text(ZSH_CAPTURE)
    home = tmp_path / "zhome"
    home.mkdir()

    def complete(line: str, cwd: Path = site, **env: str) -> list[str]:
        r = subprocess.run([zsh, "-f", str(capture), line], cwd=cwd,
                           env=_env(home, PLOG_COMPLETIONS=str(SCRIPTS["zsh"].parent), **env),
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, (line, r.returncode, r.stderr)
        return [ln.rstrip("\r") for ln in r.stdout.splitlines() if ln.strip("\r")]

    assert complete("plog topics ") == ["create", "list", "describe", "alter", "delete"]
    assert complete("plog topics list --format ") == ["table", "text", "json", "jsonl", "csv"]
    assert complete("plog consume ") == TOPICS
    dd = str(site / "plog-data")
    assert complete(f"plog groups describe -d {dd} ", tmp_path) == ["billing"]
    assert complete("plog brokers stop ", tmp_path, PLOG_DATA_DIR=dd) == ["1"]
    assert complete("plog consume ", tmp_path) == []
