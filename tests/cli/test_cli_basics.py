"""plog --version/--help, dump on a corpus file, and one-line errors (real subprocesses)."""

from __future__ import annotations

import subprocess
import sys

from conftest import CORPUS

PLOG = [sys.executable, "-m", "plog.cli"]
SEGMENT = CORPUS / "BiggerBrain__kafka/data/lsx1-0/00000000000000000000.log"


def run(*args, **kw):
    return subprocess.run([*PLOG, *args], capture_output=True, text=True, timeout=60, **kw)


def test_version_and_help():
    r = run("--version")
    assert r.returncode == 0 and r.stdout.startswith("plog ")
    r = run("--help")
    assert r.returncode == 0 and "dump" in r.stdout and "Example:" in r.stdout


def test_help_does_not_import_pyspark():
    code = "import sys; from plog.cli.main import main\ntry:\n main(['--help'])\nexcept SystemExit: pass\nprint('pyspark' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip().endswith("False")


def test_produce_does_not_import_what_it_does_not_use(tmp_path):
    """`plog produce` (of a topic that exists) through the console script's path leaves out
    what only other commands need: the protocol codec (KRaft control values), shutil (and its bz2/lzma), csv,
    datetime, the offset language, replica placement (topic creation and reassignment only); each cost
    start-up on every produce (~1-3 ms)."""
    values = tmp_path / "values.txt"
    values.write_bytes(b"a\nb\n")
    # The topic made first, as for a user who made it once (creating a data directory
    # writes a dated meta.properties: that run needs datetime).
    assert run("topics", "create", "t", "--data-dir", str(tmp_path / "dd")).returncode == 0
    code = ("import sys\nsys.argv = ['plog', 'produce', 't', '--file', sys.argv[1], '--data-dir', sys.argv[2]]\n"
            "from plog.cli.entry import main\nimport os\nexit_ = os._exit\n"
            "def seen(code):\n    print('LOADED', sorted(sys.modules), flush=True)\n    exit_(code)\n"
            "os._exit = seen\ntry:\n    main()\nfinally:\n    seen(0)\n")
    r = subprocess.run([sys.executable, "-c", code, str(values), str(tmp_path / "dd")], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    loaded = set(eval(r.stdout.rsplit("LOADED", 1)[1]))
    assert "plog.engine.clients.producer" in loaded
    unused = {"plog.formats.protocol", "shutil", "csv", "datetime", "plog.engine.offset_spec",
              "plog.engine.cluster.placement"}
    assert not unused & loaded, unused & loaded


def test_dump_corpus_segment(corpus):
    r = run("dump", "--print-data-log", str(SEGMENT))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"Dumping {SEGMENT}" and lines[1] == "Log starting offset: 0"
    assert lines[2].startswith("baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 ")
    assert lines[2].endswith("position: 0 CreateTime: 1721034021890 size: 97 magic: 2 compresscodec: none crc: 3896944751 isvalid: true")
    assert sum(1 for line in lines if line.startswith("baseOffset:")) == 14
    assert sum(1 for line in lines if line.startswith("| offset:")) == 14


def test_errors_are_one_line(tmp_path):
    r = run("dump", str(tmp_path / "missing.log"))
    assert r.returncode == 1 and r.stderr.strip().count("\n") == 0 and "missing.log" in r.stderr
    bad = tmp_path / "00000000000000000000.log"
    bad.write_bytes(b"\x00" * 8 + b"\x00\x00\x00\x05" + b"\x00" * 20)
    r = run("dump", str(bad))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "Found record size 5 smaller than minimum record overhead (14)" in r.stderr
    r = run("dump", "--no-such-option")
    assert r.returncode == 2


def test_global_quiet_verbose_and_no_color(tmp_path, capsys, monkeypatch):
    """`plog --quiet` silences every status line (here topics create's), `--verbose` adds
    one cost line at the end, and neither outlives the run in an embedding process."""
    import os

    from cli_run import plog

    for k in ("PLOG_QUIET", "PLOG_VERBOSE", "NO_COLOR"):
        monkeypatch.delenv(k, raising=False)
    dd = str(tmp_path / "dd")
    code, _out, err = plog(capsys, "--quiet", "topics", "create", "a", "-d", dd)
    assert code == 0 and err == ""
    code, _out, err = plog(capsys, "topics", "create", "b", "-d", dd)
    assert code == 0 and "Created topic b" in err  # the earlier --quiet did not stick
    code, out, err = plog(capsys, "--verbose", "--no-color", "topics", "list", "-d", dd, "-f", "text")
    assert code == 0 and out.split() == ["a", "1", "1", "-", "b", "1", "1", "-"]
    assert err.startswith("plog topics list: ") and " s wall, " in err and "peak RSS" in err
    assert not any(os.environ.get(k) for k in ("PLOG_QUIET", "PLOG_VERBOSE", "NO_COLOR"))


def test_the_registry_names_each_commands_module():
    """`cli/registry.py` says which module registers each top-level command, so the console
    script can import just that one. Checked against reality: each module, imported alone in a
    fresh interpreter, registers exactly the commands the table gives it, and together they
    are the whole tree, listed in the table's order."""
    from plog.cli.registry import COMMAND_MODULES

    from plog.cli.command_tree import command_tree

    assert [c.path[0] for c in command_tree().subcommands] == list(COMMAND_MODULES)
    code = ("import importlib, sys\nfrom typer.main import get_command\nfrom plog.cli.app import app\n"
            "importlib.import_module('plog.cli.' + sys.argv[1])\n"
            "print(' '.join(sorted(get_command(app).commands)))")
    for module in sorted(set(COMMAND_MODULES.values())):
        r = subprocess.run([sys.executable, "-c", code, module], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        registered = set(r.stdout.split())
        own = {name for name, m in COMMAND_MODULES.items() if m == module}
        # A module may import another command module (recover uses maintain's options).
        assert own <= registered, (module, own, registered)
        assert all(COMMAND_MODULES[name] == module or name in _imported_by(module) for name in registered), \
            (module, registered)


def _imported_by(module: str) -> set[str]:
    """Commands a command module brings in by importing another command module."""
    return {"retention", "compact", "maintain"} if module == "recover" else set()


def test_command_module_routing():
    from plog.cli.registry import command_module

    assert command_module(["dump", "--print-data-log", "x.log"]) == "dump"
    assert command_module(["-q", "--no-color", "-qv", "retention", "x"]) == "maintain"
    assert command_module(["init"]) == "topics"
    assert command_module([]) is None
    assert command_module(["--help"]) is None
    assert command_module(["--version"]) is None
    assert command_module(["dmup"]) is None  # the whole tree: Click lists the commands there are
    assert command_module(["-x", "dump"]) is None


def test_one_command_runs_without_the_others():
    """`plog dump` through the console script's path builds only `dump`, and its help names
    values as the man pages do (`--max-bytes INT`, `[FILES]...`), not by Python type or name."""
    code = ("import sys\nsys.argv = ['plog', 'dump', '--help']\nfrom plog.cli.entry import main\n"
            "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
            "print('LOADED', sorted(m for m in sys.modules if m.startswith('plog.cli.')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    loaded = eval(r.stdout.rsplit("LOADED", 1)[1])
    assert "plog.cli.dump" in loaded
    assert not {"plog.cli.scan", "plog.cli.groups", "plog.cli.topics", "plog.cli.main"} & set(loaded), loaded
    assert "--max-bytes INT" in r.stdout and "<str>" not in r.stdout and "<int" not in r.stdout
    assert "Usage: plog dump [OPTIONS] [FILES]..." in r.stdout
    r = run("dmup")
    assert r.returncode == 2 and "No such command 'dmup'" in r.stderr and "Did you mean 'dump'" in r.stderr


def _help_commands(*args) -> dict[str, str]:
    """The Commands section of ``plog ARGS --help`` (an 80-column help, as without $COLUMNS):
    name -> its description, continuation lines joined."""
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    r = run(*args, "--help", env=env)
    assert r.returncode == 0, r.stderr
    section = r.stdout.split("\nCommands:\n", 1)[1].split("\n\n", 1)[0]
    out: dict[str, str] = {}
    for line in section.splitlines():
        name, _, text = line.strip().partition("  ")
        if line.startswith("  ") and not line.startswith("   "):
            out[name] = text.strip()
            last = name
        else:
            out[last] += " " + line.strip()
    return out


def test_help_lists_every_command_without_cutting_its_description():
    """issue 21, item 10: Click cut each description at about 45 characters with "...". The
    root lists each command's one-line summary (cli/registry.SUMMARIES) on one line; a group
    lists each subcommand's first sentence in full (wrapped)."""
    import os

    from plog.cli.command_tree import command_tree
    from plog.cli.registry import COMMAND_MODULES, SUMMARIES, SUMMARY_WIDTH

    assert list(SUMMARIES) == list(COMMAND_MODULES)
    assert all(len(s) <= SUMMARY_WIDTH and not s.endswith("...") for s in SUMMARIES.values())
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    root = run("--help", env=env).stdout
    lines = root.split("\nCommands:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    width = max(len(name) for name in SUMMARIES)
    assert lines == [f"  {name.ljust(width)}  {text}" for name, text in SUMMARIES.items()]
    for group in command_tree().subcommands:
        if not group.is_group:
            continue
        listed = _help_commands(*group.path)
        assert listed == {sub.path[-1]: sub.summary.split(". ")[0].rstrip(".") + "."
                          for sub in group.subcommands if not sub.hidden}, group.path
        assert not any(text.endswith("...") for text in listed.values())


def test_the_heavy_commands_keep_freed_heap_on_glibc():
    """cli/heap.py: produce and consume fix glibc's malloc thresholds (elsewhere: nothing to
    set, and nothing fails)."""
    import platform

    from plog.cli.heap import keep_freed_heap

    assert keep_freed_heap() is (platform.system() == "Linux" and platform.libc_ver()[0] == "glibc")
