"""The files generated from the command tree (completions/, man/, the README's CLI
reference) are current, every command documents itself with examples that name real
commands and options, and the man pages render without warnings."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_run import plog
from conftest import ROOT

from plog.cli import gendocs
from plog.cli.command_tree import CommandDoc, ParamDoc, command_tree
from plog.cli.manpages import (
    ENVIRONMENT,
    HELP_OPTS,
    INTERNAL_ENVIRONMENT,
    doc_parts,
    example_commands,
    page_name,
    render_pages,
)

TREE = command_tree()
COMMANDS = [c for c in TREE.walk() if not c.hidden]
BY_PATH = {c.path: c for c in COMMANDS}
ROOT_OPTS = {o for p in TREE.params for o in p.opts}


def _ids(cmds):
    return [c.name for c in cmds]


# -- (a), (b): the checked-in files are what the code generates ------------------------------

def test_checked_in_files_are_current(capsys):
    code = gendocs.main(["--check", "--root", str(ROOT)])
    err = capsys.readouterr().err
    assert code == 0, err  # names the stale files and says: run python -m plog.cli.gendocs


def _copy_repo_docs(dest: Path) -> None:
    shutil.copy2(ROOT / "README.md", dest / "README.md")
    for folder in ("man", "completions"):
        shutil.copytree(ROOT / folder, dest / folder)


def _gendocs(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "plog.cli.gendocs", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_stale_files_are_named_then_regenerated(tmp_path):
    _copy_repo_docs(tmp_path)
    page = tmp_path / "man" / "plog-dump.1"
    page.write_text(page.read_text().replace("Print keys and payloads", "Print the keys"))
    (tmp_path / "completions" / "_plog").unlink()
    (tmp_path / "man" / "plog-gone.1").write_text(".TH PLOG-GONE 1\n")
    readme = (tmp_path / "README.md").read_text()
    begin, end = readme.index(gendocs.BEGIN), readme.index(gendocs.END)
    (tmp_path / "README.md").write_text(readme[:end] + "hand edit\n" + readme[end:])

    check = _gendocs("--check", "--root", str(tmp_path))
    assert check.returncode == 1
    assert check.stdout == ""
    named = check.stderr.split("out of date: ", 1)[1].split("; run:", 1)[0].split(", ")
    # Exactly what differs, nothing else.
    assert sorted(named) == ["README.md", "completions/_plog", "man/plog-dump.1",
                             "man/plog-gone.1 (no longer generated)"]
    assert check.stderr.strip().endswith("run: python -m plog.cli.gendocs")
    assert "hand edit" in (tmp_path / "README.md").read_text()  # --check wrote nothing
    assert (tmp_path / "man" / "plog-gone.1").exists()

    write = _gendocs("--root", str(tmp_path))
    assert write.returncode == 0, write.stderr
    assert not (tmp_path / "man" / "plog-gone.1").exists()
    assert page.read_text() == (ROOT / "man" / "plog-dump.1").read_text()
    assert (tmp_path / "completions" / "_plog").read_bytes() == (ROOT / "completions" / "_plog").read_bytes()
    new_readme = (tmp_path / "README.md").read_text()
    assert "hand edit" not in new_readme
    # Only the section between the markers changes.
    assert new_readme[:begin] == readme[:begin]
    assert new_readme[new_readme.index(gendocs.END):] == readme[end:]
    assert _gendocs("--check", "--root", str(tmp_path)).returncode == 0


def test_readme_without_markers_is_a_one_line_error(tmp_path):
    _copy_repo_docs(tmp_path)
    text = (tmp_path / "README.md").read_text().replace(gendocs.BEGIN + "\n", "")
    (tmp_path / "README.md").write_text(text)
    for args in (("--check",), ()):
        run = _gendocs(*args, "--root", str(tmp_path))
        assert run.returncode == 1
        assert len(run.stderr.strip().splitlines()) == 1
        assert "README.md" in run.stderr and "CLI REFERENCE" in run.stderr
    assert (tmp_path / "README.md").read_text() == text


def test_reference_links_resolve_to_headings():
    section = (ROOT / "README.md").read_text().split(gendocs.BEGIN)[1].split(gendocs.END)[0]
    headings = set(re.findall(r"^### `(plog[^`]*)`$", section, flags=re.M))
    assert headings == {c.name for c in COMMANDS}
    anchors = {h.replace(" ", "-") for h in headings}
    for link in re.findall(r"\]\(#([^)]+)\)", section):
        assert link in anchors
    assert "\n## " not in section  # the README's own level-2 structure stays the lead's


# -- (c), (d): every command documents itself ------------------------------------------------

def _resolve(argv: list[str]) -> tuple[CommandDoc, list[str]]:
    """The command an example's argv (after ``plog``) runs, and its remaining words."""
    i = 0
    while i < len(argv) and argv[i] in ROOT_OPTS:
        i += 1
    path: tuple[str, ...] = ()
    while i < len(argv) and path + (argv[i],) in BY_PATH:
        path += (argv[i],)
        i += 1
    return BY_PATH[path], argv[i:]


@pytest.mark.parametrize("cmd", COMMANDS, ids=_ids(COMMANDS))
def test_help_text_and_examples_name_real_commands_and_options(cmd):
    assert cmd.help.strip(), f"{cmd.name} has no help text"
    assert cmd.examples, f"{cmd.name}: no example (a line 'Example: plog ...' in its help or epilog)"
    examples = doc_parts(cmd).examples
    targets = []
    for ex in examples:
        runs = example_commands(ex)
        assert runs, f"{cmd.name}: example {ex.command!r} runs no plog command"
        for argv in runs:
            target, rest = _resolve(argv)
            assert not target.is_group, f"{cmd.name}: example {ex.command!r} names no command of {target.name}"
            known = {o for p in target.params for o in p.opts} | set(HELP_OPTS)
            for word in rest:
                if word.startswith("-") and len(word) > 1 and not re.match(r"-\d", word):
                    assert word.split("=", 1)[0] in known, f"{cmd.name}: {ex.command!r}: {target.name} has no {word}"
            targets.append(target.path)
    # The example shows this command (or, for a group, one of its commands).
    assert any(t[:len(cmd.path)] == cmd.path for t in targets), f"{cmd.name}: no example runs it"


@pytest.mark.parametrize("cmd", COMMANDS, ids=_ids(COMMANDS))
def test_help_output_shows_an_example(cmd, capsys):
    code, out, err = plog(capsys, *cmd.path, "--help")
    assert code == 0, err
    assert "Example" in out
    assert f"Usage: {cmd.name}" in out


def test_every_environment_variable_the_code_reads_is_documented():
    pattern = re.compile(
        r"""(?:environ(?:\.get|\.setdefault|\.pop)?\(\s*|environ\[\s*|getenv\(\s*|envvar\s*=\s*|_ENV\s*=\s*)"""
        r"""["']([A-Z][A-Z0-9_]+)["']|["']([A-Z][A-Z0-9_]+)["']\s+(?:not\s+)?in\s+os\.environ|["']((?:PLOG|XDG)_[A-Z0-9_]+)["']""")
    read = set()
    for folder in ("cli", "engine", "spark_tasks", "formats"):
        for path in (ROOT / folder).glob("*.py"):
            for m in pattern.finditer(path.read_text()):
                read.add(next(g for g in m.groups() if g))
    documented = {v.name for v in ENVIRONMENT} | set(INTERNAL_ENVIRONMENT)
    assert {"PLOG_DATA_DIR", "PLOG_DEBUG", "NO_COLOR"} <= read
    assert read - documented == set(), "add these to manpages.ENVIRONMENT (or INTERNAL_ENVIRONMENT)"


# -- (e): the man pages render ---------------------------------------------------------------

MAN_PAGES = sorted(p.name for p in (ROOT / "man").glob("*.1"))


def _plain(text: str) -> str:
    # groff may render \- as U+2212 and hyphens as U+2010 on some systems; compare as typed.
    return text.replace("\u2212", "-").replace("\u2010", "-")


@pytest.mark.skipif(shutil.which("man") is None, reason="man is not installed: cannot check that man -l renders")
def test_man_renders_the_overview():
    env = dict(os.environ, MANPAGER="cat", PAGER="cat", MANWIDTH="80", LC_ALL="C.UTF-8")
    run = subprocess.run(["man", "--warnings", "-l", str(ROOT / "man" / "plog.1")], capture_output=True,
                         text=True, env=env, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
    out = _plain(run.stdout)
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "GLOBAL OPTIONS", "EXIT STATUS", "ENVIRONMENT",
                    "FILES", "EXAMPLES", "SEE ALSO"):
        assert re.search(rf"^{section}$", out, flags=re.M), section
    for top in TREE.subcommands:
        assert f"{page_name(top)}(1)" in out.replace("\n", " ").replace("  ", " ")
    for var in ("PLOG_DATA_DIR", "PLOG_DEBUG", "NO_COLOR", "cluster.json", "--version", "--debug", "--help", "130"):
        assert var in out


@pytest.mark.skipif(shutil.which("groff") is None, reason="groff is not installed: cannot check the man pages")
@pytest.mark.parametrize("name", MAN_PAGES)
def test_page_renders_without_warnings(name):
    run = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-rLL=78n", str(ROOT / "man" / name)],
                         capture_output=True, timeout=60)
    assert run.returncode == 0
    assert run.stderr.decode() == ""
    out = _plain(re.sub(r".\x08", "", run.stdout.decode()))  # no overstrike (bold/underline)
    top = next((c for c in TREE.subcommands if f"{page_name(c)}.1" == name), TREE)
    sections = ("NAME", "SYNOPSIS", "DESCRIPTION", "EXIT STATUS", "ENVIRONMENT", "EXAMPLES", "SEE ALSO")
    sections += ("GLOBAL OPTIONS", "COMMANDS", "FILES") if top is TREE else ("OPTIONS",)
    for section in sections:
        assert re.search(rf"^{section}$", out, flags=re.M), section
    # Every visible option of every command the page covers, every spelling, as typed.
    for cmd in ([top] if top is TREE else [c for c in top.walk() if not c.hidden]):
        for p in cmd.params:
            for opt in ([] if p.hidden else p.opts):
                assert opt in out, f"{name}: {opt} of {cmd.name}"
        for ex in doc_parts(cmd).examples:
            assert ex.command in out, f"{name}: example {ex.command!r}"


def test_one_page_per_top_level_command():
    assert MAN_PAGES == sorted(["plog.1"] + [f"{page_name(c)}.1" for c in TREE.subcommands if not c.hidden])


@pytest.mark.skipif(shutil.which("groff") is None, reason="groff is not installed: cannot check roff escaping")
def test_roff_escaping_keeps_text_as_typed():
    """Text that roff would take as requests or escapes renders as written."""
    opt = ParamDoc(name="speed", opts=("--speed-limit", "-s"), help="A \\ backslash, 'quotes' and \"double\".",
                   is_argument=False, is_flag=False, multiple=False, required=False, choices=("fast", "slow"),
                   metavar="SPEED", default="fast", envvar=None, hidden=False, value_kind=None)
    leaf = CommandDoc(path=("demo",), help="Demo.\n\n.index and .timeindex start this line\n'quoted start, "
                      "caf\u00e9 \u2192 done", epilog="Example: plog demo -s slow   (a comment)\n\n"
                      "\b\n  .dot: 1\n  'tick: 2\n\nExit status: 0 success.", params=(opt,))
    tree = CommandDoc(path=(), help="Root.\n\nExample: plog demo", epilog="", params=(), subcommands=(leaf,))
    pages = render_pages(tree, "9.9")
    assert set(pages) == {"plog.1", "plog-demo.1"}
    text = pages["plog-demo.1"]
    macros = {".TH", ".SH", ".SS", ".PP", ".TP", ".RS", ".RE", ".nf", ".fi", ".br", ".nh", ".ad", '.\\"'}
    for line in text.splitlines():
        if line.startswith((".", "'")):
            assert line.split(" ")[0] in macros, line
    run = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-rLL=78n"], input=text.encode(), capture_output=True,
                         timeout=60)
    assert run.stderr.decode() == ""
    out = _plain(re.sub(r".\x08", "", run.stdout.decode()))
    flat = " ".join(out.split())
    for typed in (".index and .timeindex start this line", "'quoted start, caf\u00e9 \u2192 done",
                  "A \\ backslash, 'quotes' and \"double\".", "-s, --speed-limit SPEED", "One of: fast, slow",
                  "Default: fast", "plog demo -s slow", "A comment:", ".dot: 1", "'tick: 2", "plog demo: 0 success."):
        assert typed in flat, typed
    assert "9.9" in flat


def test_man_pages_are_installed_with_the_package():
    """pyproject's data-files entry covers every generated page (pip puts them in
    <prefix>/share/man/man1)."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["data-files"]["share/man/man1"]
    installed = sorted({p.name for pattern in patterns for p in ROOT.glob(pattern)})
    assert installed == MAN_PAGES
