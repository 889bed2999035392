"""Man pages for ``plog``, generated from the command tree (``cli/command_tree.py``).

``render_pages(tree, version)`` returns ``{file name: roff text}``: ``plog.1`` (the
overview: commands, global options, exit status, environment, files) and one page per
top-level command or command group (``plog-dump.1``, ``plog-topics.1`` with every
subcommand as a subsection). ``python -m plog.cli.gendocs`` writes them to ``man/``.

Invariants:

* Everything a page says about a command comes from the Typer app (help, epilog, options),
  plus the fixed tables below (exit codes from :class:`ExitCode`, environment, files), so a
  page can only drift from the code by not being regenerated, which the tests check.
* Output is deterministic: no date from the clock (``.TH`` carries the package version and
  no date), commands in registration order, options in declaration order.
* Every piece of text goes through :func:`roff_escape`: backslashes become ``\\e``, every
  hyphen ``\\-`` (options and paths copy-paste as ASCII), characters outside ASCII
  ``\\[uXXXX]`` (groff reads its input as Latin-1 unless preconv runs), and a line that
  would start with ``.`` or ``'`` is protected with ``\\&`` so it is never taken as a
  request.

The help texts are parsed by :func:`doc_parts` (shared with the README reference in
``gendocs``): "Example:" lines and the indented lines of an "Examples:" block are
examples, the "Exit status:" paragraph is the command's exit status, a paragraph Click
keeps verbatim (``\\b``) is a preformatted block, and every other paragraph is prose.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from .command_tree import CommandDoc, ParamDoc
from .exit_codes import ExitCode

# Click adds the help option to every command (main.py: context_settings); it is not a
# parameter of the command, so the tree does not list it.
HELP_OPTS = ("-h", "--help")
HELP_TEXT = "Show the help (with examples) and exit."

# What each exit code means; every member of ExitCode must be here (a KeyError when a code
# is added without documentation is the point).
EXIT_MEANINGS = {
    ExitCode.OK: "Success.",
    ExitCode.ERROR: ("Error: the command could not do its work (a missing or unreadable file, an I/O error, "
                     "corrupt input it cannot skip, an unknown topic or group). The one-line message on "
                     "standard error names the file, position or offset."),
    ExitCode.USAGE: "Usage error: an unknown option, a missing or malformed argument.",
    ExitCode.PROBLEMS_FOUND: ("The command ran and found problems (plog verify, plog scan, "
                              "plog dump --verify-index-only, plog recover --dry-run with work to do, "
                              "plog assign verify, expectations of plog simulate)."),
    ExitCode.INTERRUPTED: "Interrupted (Ctrl-C): no traceback, and no partial output file is left behind.",
    ExitCode.TERMINATED: ("Terminated (SIGTERM, from kill, systemd or a container runtime): the same clean stop "
                          "as Ctrl-C (logs closed, clean-shutdown marker written, no partial output file); "
                          "128 + 15, as shells report it."),
}


@dataclass(frozen=True)
class EnvVar:
    name: str
    text: str
    scope: str  # "all": every page; "data_dir": commands with --data-dir; "spark": commands with --spark; a command name


# The environment variables plog reads (os.environ in cli/, engine/, spark_tasks/) that a user
# sets; the tests check that every name the code reads is here or in INTERNAL_ENVIRONMENT.
ENVIRONMENT = (
    EnvVar("PLOG_DATA_DIR", "The data directory of the commands that take --data-dir, when the option is not "
           "given (default: ./plog-data).", "data_dir"),
    EnvVar("PLOG_DEBUG", "When set (as plog --debug sets it), errors show a Python traceback instead of the "
           "one-line message.", "all"),
    EnvVar("PLOG_QUIET", "When set to anything but empty, 0 or false (as plog --quiet sets it): no progress bars "
           "and no status lines on standard error.", "all"),
    EnvVar("PLOG_VERBOSE", "When set to anything but empty, 0 or false (as plog --verbose sets it): the "
           "command's wall time, CPU time and peak memory on standard error at the end.", "all"),
    EnvVar("PLOG_NO_PROGRESS", "When set, no progress bars (they appear only when standard error is a terminal).",
           "all"),
    EnvVar("PLOG_NATIVE", "Set to 0 to run the pure-Python reference code instead of the native (Rust) core; "
           "plog --version names the one in use. The results are the same; only the speed differs.", "all"),
    EnvVar("NO_COLOR", "When present (any value, as plog --no-color sets it), output is never coloured. Colour is "
           "used only when standard output is a terminal.", "all"),
    EnvVar("TERM", "When dumb, no colour and no progress bars.", "all"),
    EnvVar("COLUMNS", "The terminal width plog scan fits its table to (default: the terminal's own; output that "
           "is not a terminal gets every column).", "scan"),
    EnvVar("SHELL", "plog completions install without a SHELL argument installs for this shell (its base name: "
           "bash, zsh or fish).", "completions"),
    EnvVar("XDG_DATA_HOME", "Where plog completions install puts the bash script (default: ~/.local/share).",
           "completions"),
    EnvVar("XDG_CONFIG_HOME", "Where plog completions install puts the fish script (default: ~/.config).",
           "completions"),
    EnvVar("ZDOTDIR", "Where plog completions install looks for .zshrc (default: the home directory).",
           "completions"),
    EnvVar("JAVA_HOME", "The Java 17+ installation Spark runs on (--spark); otherwise java is looked up on PATH.",
           "spark"),
    EnvVar("PYSPARK_PYTHON", "The Python the Spark executors run (--spark); default: the Python running plog.",
           "spark"),
)

# Read by the code but not for users to set: name -> why.
INTERNAL_ENVIRONMENT = {
    "PYSPARK_GATEWAY_PORT": "set by spark-submit; tells plog it runs inside a submitted application",
    "PYDANTIC_DISABLE_PLUGINS": "set by plog itself to keep start-up fast",
}

# The data directory layout (engine/cluster/data_dir.py), the files of a Kafka log directory, and where
# plog completions install writes (cli/completions.py). Scopes as for ENVIRONMENT; "kafka":
# every page except those of commands that never touch log files (NO_LOG_FILES).
FILES = (
    ("./plog-data/", "The default data directory (--data-dir, $PLOG_DATA_DIR): a small Kafka cluster on one disk.",
     "data_dir"),
    ("DATA_DIR/cluster.json", "plog's metadata: brokers (id, rack, state), topics (id, configs, replica assignment, "
     "leaders, leader epochs, ISRs), the next producer id. Kafka never reads it. Replaced atomically.", "data_dir"),
    ("DATA_DIR/.plog-meta.lock", "Locked while cluster.json is read, modified and written.", "data_dir"),
    ("DATA_DIR/broker-N/", "One Kafka log directory per broker, as Kafka lays it out: hand it to a broker as a "
     "log.dirs entry. Holds meta.properties, .lock (locked by the process writing it), "
     "recovery-point-offset-checkpoint, replication-offset-checkpoint, log-start-offset-checkpoint, "
     "cleaner-offset-checkpoint, .kafka_cleanshutdown (a clean shutdown) and one folder per partition replica.",
     "data_dir"),
    ("DATA_DIR/groups/", "Live consumer-group membership, one file per group (committed offsets are in "
     "__consumer_offsets, as in Kafka).", "data_dir"),
    ("TOPIC-PARTITION/", "A partition folder (Kafka's layout): segments named by their base offset (20 digits), "
     "each 00000000000000000000.log (record batches) with its .index (offset index), .timeindex (time index) and "
     ".txnindex (aborted transactions); NNN.snapshot (producer state); leader-epoch-checkpoint; "
     "partition.metadata (topic id). Transient: .cleaned, .swap, .deleted files (compaction, retention), "
     "TOPIC-PARTITION.UUID-delete folders (deleted topics).", "kafka"),
    ("~/.local/share/bash-completion/completions/plog", "The bash completion script plog completions install writes "
     "($XDG_DATA_HOME instead of ~/.local/share when set).", "completions"),
    ("~/.zfunc/_plog", "The zsh completion script plog completions install writes.", "completions"),
    ("~/.config/fish/completions/plog.fish", "The fish completion script plog completions install writes "
     "($XDG_CONFIG_HOME instead of ~/.config when set).", "completions"),
)
NO_LOG_FILES = ("completions",)


# -- parsing help texts --------------------------------------------------------------------

@dataclass(frozen=True)
class Example:
    command: str  # a shell command line
    comment: str  # what it does ("" when the help text says nothing)


@dataclass
class DocParts:
    """A command's help and epilog, split by purpose."""

    blocks: list[tuple[str, str]] = field(default_factory=list)  # ("text", paragraph) or ("pre", lines)
    examples: list[Example] = field(default_factory=list)
    exit_status: str = ""


def _split_example(line: str) -> Example:
    """``plog x --y   (what it does)``: the comment starts at the first run of two or more
    spaces outside quotes."""
    quote = ""
    i = 0
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif line.startswith("  ", i):
            comment = line[i:].strip()
            if comment.startswith("(") and comment.endswith(")"):
                comment = comment[1:-1]
            return Example(line[:i].strip(), comment)
        i += 1
    return Example(line.strip(), "")


def doc_parts(cmd: CommandDoc) -> DocParts:
    """Split ``cmd``'s help and epilog into prose blocks, examples and the exit status."""
    parts = DocParts()
    text = (cmd.help or "").strip() + "\n\n" + (cmd.epilog or "").strip()
    in_examples = False
    for para in re.split(r"\n[ \t]*\n", text):
        if not para.strip():
            continue
        lines = para.split("\n")
        if lines[0].strip() == "\b":
            body = [ln.rstrip() for ln in lines[1:] if ln.strip()]
            indent = min((len(ln) - len(ln.lstrip()) for ln in body), default=0)
            parts.blocks.append(("pre", "\n".join(ln[indent:] for ln in body)))
            in_examples = False
            continue
        first = lines[0].strip()
        if first.lower() == "examples:":
            in_examples = True
            lines = lines[1:]
            if not any(ln.strip() for ln in lines):
                continue
        if in_examples and all(ln.startswith(" ") for ln in lines if ln.strip()):
            parts.examples.extend(_split_example(ln.strip()) for ln in lines if ln.strip())
            continue
        in_examples = False
        joined = " ".join(" ".join(lines).split())
        if first.lower().startswith("example:"):
            parts.examples.append(_split_example(para.strip().split(":", 1)[1].strip().replace("\n", " ")))
        elif first.lower().startswith("exit status:"):
            parts.exit_status = joined.split(":", 1)[1].strip()
        else:
            parts.blocks.append(("text", joined))
    return parts


def example_commands(example: Example) -> list[list[str]]:
    """The ``plog ...`` commands of an example line (a pipeline, a list or a process
    substitution may hold several), as argv lists without the leading ``plog``; shell
    operators (``|``, ``;``, ``<(``, ``>``...) end a command."""
    lexer = shlex.shlex(example.command.replace("$(", "<("), posix=True, punctuation_chars=True)
    try:
        words = list(lexer)
    except ValueError:
        words = example.command.split()
    out: list[list[str]] = []
    current: list[str] | None = None
    for w in words:
        if w and all(c in "();<>|&" for c in w):
            current = None
            continue
        if current is None:
            if w == "plog":
                current = []
                out.append(current)
            continue
        current.append(w)
    return out


# -- roff ----------------------------------------------------------------------------------

def roff_escape(text: str) -> str:
    """``text`` as roff text (not a request): see the module docstring."""
    out = []
    for ch in text.replace("\b", ""):
        if ch == "\\":
            out.append("\\e")
        elif ch == "-":
            out.append("\\-")
        elif ord(ch) > 126 or (ord(ch) < 32 and ch not in "\n\t"):
            out.append(f"\\[u{ord(ch):04X}]")
        else:
            out.append(ch)
    return "".join(out)


def _protect(line: str) -> str:
    """A line that starts with a control character (after escaping) is text, not a request."""
    return "\\&" + line if line.startswith((".", "'")) else line


_OPTION_TOKEN = re.compile(r"(?<![\w-])(--[A-Za-z][A-Za-z0-9-]*)")


def _inline(text: str) -> str:
    """Prose with long options in bold, escaped; one output line."""
    words = []
    for word in text.split():
        pieces = _OPTION_TOKEN.split(word)
        out = "".join(f"\\fB{roff_escape(p)}\\fR" if i % 2 else roff_escape(p) for i, p in enumerate(pieces))
        if len(word) > 40:
            # A long JSON or path token: allow breaks after ',' and '/' (\: breaks without a
            # hyphen), or troff cannot fit it on an 80-column line.
            out = out.replace(",", ",\\:").replace("/", "/\\:")
        words.append(out)
    return _protect(" ".join(words))


def _bold(text: str) -> str:
    return f"\\fB{roff_escape(text)}\\fR"


def _ital(text: str) -> str:
    return f"\\fI{roff_escape(text)}\\fR"


def visible_walk(cmd: CommandDoc):
    """``cmd`` and every command under it that is not hidden (nor under a hidden group)."""
    if cmd.hidden:
        return
    yield cmd
    for sub in cmd.subcommands:
        yield from visible_walk(sub)


def page_name(cmd: CommandDoc) -> str:
    """The man page (without section) documenting ``cmd``: plog, plog-dump, plog-topics."""
    return "plog" if not cmd.path else f"plog-{cmd.path[0]}"


def _visible(params) -> list[ParamDoc]:
    return [p for p in params if not p.hidden]


def sorted_opts(p: ParamDoc) -> list[str]:
    """Short spellings first, as man pages list them, then the rest in declaration order."""
    short = [o for o in p.opts if len(o) == 2 and o.startswith("-") and o != "--"]
    return short + [o for o in p.opts if o not in short]


def usage_words(cmd: CommandDoc) -> list[tuple[str, str]]:
    """The usage line of ``cmd`` as (kind, text) words: kind is "cmd", "opt" (literal) or
    "meta" (a placeholder), so man (bold/italic) and Markdown (plain) render it alike."""
    words: list[tuple[str, str]] = [("cmd", cmd.name)]
    if cmd.is_group:
        return words + [("meta", "[OPTIONS]"), ("meta", "COMMAND"), ("meta", "[ARGS]...")]
    if any(not p.is_argument for p in _visible(cmd.params)):
        words.append(("meta", "[OPTIONS]"))
    for p in _visible(cmd.params):
        if p.is_argument:
            word = p.metavar + ("..." if p.multiple else "")
            words.append(("meta", word if p.required else f"[{p.metavar}]" + ("..." if p.multiple else "")))
    return words


def _synopsis_line(cmd: CommandDoc) -> str:
    out = []
    for kind, text in usage_words(cmd):
        if kind == "cmd":
            out.append(_bold(text))
        else:
            # Brackets and dots stay roman; the placeholder itself is italic.
            m = re.fullmatch(r"(\[?)([A-Z_]+)(\]?)(\.\.\.)?", text)
            if m:
                out.append(roff_escape(m.group(1)) + _ital(m.group(2)) + roff_escape(m.group(3) + (m.group(4) or "")))
            else:
                out.append(roff_escape(text))
    return _protect(" ".join(out))


def param_notes(p: ParamDoc) -> list[str]:
    """What the help text of ``p`` does not say already: choices, default, repetition,
    environment variable, requiredness (plain text)."""
    help_lower = p.help.lower()
    notes = []
    if p.required and not p.is_argument:
        notes.append("Required.")
    if p.choices and not all(re.search(rf"\b{re.escape(c)}\b", p.help) for c in p.choices):
        notes.append("One of: " + ", ".join(p.choices) + ".")
    if p.default is not None and "default" not in help_lower:
        notes.append(f"Default: {p.default}.")
    if p.multiple and not p.is_argument and "repeat" not in help_lower:
        notes.append("May be repeated.")
    if p.envvar and p.envvar not in p.help:
        notes.append(f"Environment: {p.envvar}.")
    return notes


def _param_tag(p: ParamDoc) -> str:
    if p.is_argument:
        return _ital(p.metavar) + ("..." if p.multiple else "")
    spellings = ", ".join(_bold(o) for o in sorted_opts(p))
    return spellings if p.is_flag else f"{spellings} {_ital(p.metavar)}"


def _options(cmd: CommandDoc, with_help: bool = True) -> list[str]:
    out = []
    for p in _visible(cmd.params):
        out += [".TP", _protect(_param_tag(p)), _inline(" ".join([p.help or ""] + param_notes(p)).strip())]
    if with_help:
        out += [".TP", ", ".join(_bold(o) for o in HELP_OPTS), _inline(HELP_TEXT)]
    return out


def _blocks(blocks) -> list[str]:
    out = []
    for kind, text in blocks:
        if kind == "pre":
            out += [".PP", ".RS 4", ".nf"] + [_protect(roff_escape(ln)) for ln in text.split("\n")] + [".fi", ".RE"]
        else:
            out += [".PP", _inline(text)]
    return out


def _examples(examples: list[Example]) -> list[str]:
    out = []
    for ex in examples:
        out.append(".PP")
        if ex.comment:
            # Capitalised as a sentence, unless it starts with a name typed as is (plog, --x).
            literal = ex.comment.startswith(("plog", "-", "$"))
            comment = ex.comment if literal else ex.comment[0].upper() + ex.comment[1:]
            out.append(_inline(comment.rstrip(".") + ":"))
        out += [".RS 4", ".nf", _protect(roff_escape(ex.command)), ".fi", ".RE"]
    return out


def _exit_status(specific: list[tuple[str, str]]) -> list[str]:
    out = []
    for code in ExitCode:
        out += [".TP", _bold(str(int(code))), _inline(EXIT_MEANINGS[code])]
    for name, text in specific:
        out += [".PP", _protect(f"{_bold(name)}: {_inline(text)}")]
    return out


def _env_applies(var: EnvVar, cmds: list[CommandDoc]) -> bool:
    if var.scope == "all":
        return True
    names = {p.name for c in cmds for p in c.params}
    if var.scope == "data_dir":
        return any(p.envvar == var.name for c in cmds for p in c.params)
    if var.scope == "spark":
        return "spark" in names
    return any(c.path[:1] == (var.scope,) for c in cmds)


def _environment(cmds: list[CommandDoc], everything: bool = False) -> list[str]:
    out = []
    for var in ENVIRONMENT:
        if everything or _env_applies(var, cmds):
            out += [".TP", _bold(var.name), _inline(var.text)]
    # An option's environment variable the table above does not know yet still gets a line.
    known = {v.name for v in ENVIRONMENT}
    for c in cmds:
        for p in _visible(c.params):
            if p.envvar and p.envvar not in known and p.opts:
                known.add(p.envvar)
                out += [".TP", _bold(p.envvar), _inline(f"The value of {p.opts[0]} when it is not given.")]
    return out


def _files(cmds: list[CommandDoc], everything: bool = False) -> list[str]:
    out = []
    for name, text, scope in FILES:
        if scope == "kafka":
            applies = any(c.path[:1] not in [(n,) for n in NO_LOG_FILES] for c in cmds)
        else:
            applies = _env_applies(EnvVar(name, text, scope), cmds) if scope != "data_dir" else \
                any(p.name == "data_dir" for c in cmds for p in c.params)
        if everything or applies:
            tag = _ital(name) if name.isupper() else _bold(name)
            out += [".TP", _protect(tag), _inline(text)]
    return out


def _see_also(own: str, texts: list[str], tree: CommandDoc, everything: bool = False) -> list[str]:
    """plog(1), and the pages of the commands a page's text mentions (every page for plog.1)."""
    tops = [c for c in tree.subcommands if not c.hidden]
    if everything:
        names = [page_name(c) for c in tops]
    else:
        joined = " ".join(texts)
        names = ["plog"] + [page_name(c) for c in tops if re.search(rf"\bplog {re.escape(c.path[0])}\b", joined)]
    names = [n for n in dict.fromkeys(names) if n != own]
    return [",\n".join(f"{_bold(n)}(1)" for n in names)] if names else []


def _header(name: str, version: str) -> list[str]:
    return [
        '.\\" Generated by python -m plog.cli.gendocs from the plog command tree; do not edit.',
        f'.TH {roff_escape(name.upper())} 1 "" "plog {roff_escape(version)}" "plog manual"',
        # No hyphenation (option names, paths and page names must read as typed) and ragged
        # right (no stretched spaces in long technical sentences).
        ".nh",
        ".ad l",
    ]


def _name_line(name: str, summary: str) -> str:
    summary = summary.removeprefix("plog: ").rstrip(".")
    return _protect(f"{roff_escape(name)} \\- {_inline(summary)}")


def _all_texts(cmds) -> list[str]:
    return [(c.help or "") + "\n" + (c.epilog or "") for c in cmds]


def _command_page(top: CommandDoc, tree: CommandDoc, version: str) -> str:
    name = page_name(top)
    subs = list(visible_walk(top))[1:]  # a nested group's commands are subsections too
    cmds = [top] + subs
    own = doc_parts(top)
    lines = _header(name, version) + [".SH NAME", _name_line(name, top.summary), ".SH SYNOPSIS"]
    if subs:
        for i, sub in enumerate(subs):
            lines += ([".br"] if i else []) + [_synopsis_line(sub)]
    else:
        lines.append(_synopsis_line(top))
    lines += [".SH DESCRIPTION"] + _blocks(own.blocks)[1:]  # the first .PP is implied after .SH
    examples = list(own.examples)
    exits = [(top.name, own.exit_status)] if own.exit_status else []
    if subs:
        lines += [".PP", "Commands:"]
        for sub in subs:
            lines += [".TP", _bold(" ".join(sub.path[1:])), _inline(sub.summary)]
        for sub in subs:
            parts = doc_parts(sub)
            lines += [f'.SS "{roff_escape(sub.name)}"', _synopsis_line(sub)] + _blocks(parts.blocks)
            examples += [e for e in parts.examples if e not in examples]
            if parts.exit_status:
                exits.append((sub.name, parts.exit_status))
        lines += [".SH OPTIONS", _inline(f"Every command takes {HELP_OPTS[0]}, {HELP_OPTS[1]}: {HELP_TEXT}")]
        for sub in subs:
            lines += [f'.SS "{roff_escape(sub.name)}"'] + (_options(sub, with_help=False)
                                                           or [_inline("No options.")])
    else:
        lines += [".SH OPTIONS"] + _options(top)
    lines += [".SH EXIT STATUS"] + _exit_status(exits)
    lines += [".SH ENVIRONMENT"] + _environment(cmds)
    lines += [".SH FILES"] + _files(cmds)
    lines += [".SH EXAMPLES"] + _examples(examples)[1:]
    lines += [".SH SEE ALSO"] + _see_also(name, _all_texts(cmds), tree)
    return "\n".join(lines) + "\n"


def _root_page(tree: CommandDoc, version: str) -> str:
    tops = [c for c in tree.subcommands if not c.hidden]
    own = doc_parts(tree)
    lines = _header("plog", version) + [".SH NAME", _name_line("plog", tree.summary), ".SH SYNOPSIS"]
    globals_ = " ".join(f"[{_bold(p.opts[0])}]" for p in _visible(tree.params))
    lines.append(_protect(f"{_bold('plog')} {globals_} {_ital('COMMAND')} [{_ital('ARGS')}]..."))
    lines += [".br", _protect(f"{_bold('plog')} {_ital('COMMAND')} {_bold(HELP_OPTS[1])}")]
    lines += [".SH DESCRIPTION"] + _blocks(own.blocks)[1:]
    lines += [".PP", _inline("Each command has its own page, plog-COMMAND(1), and its --help shows examples. "
                             "Output goes to standard output (data only); status, warnings and progress go to "
                             "standard error. Errors are one line: plog: error: MESSAGE.")]
    lines += [".SH COMMANDS"]
    for top in tops:
        tag = _bold(top.name) + (" " + _ital("COMMAND") if top.is_group else "")
        text = _inline(top.summary) + f" See {_bold(page_name(top))}(1)."
        lines += [".TP", _protect(tag), text]
        if top.is_group:
            lines += [".RS", ".PP", "Commands: " + ", ".join(_bold(s.path[-1]) for s in top.subcommands if not s.hidden)
                      + ".", ".RE"]
    lines += [".SH GLOBAL OPTIONS", _inline("Given before the command (plog --debug dump ...).")] + _options(tree)
    lines += [".SH EXIT STATUS", _inline("Every command exits with one of:")] + _exit_status([])
    lines += [".PP", _inline("Each command's page says which of these it uses and when.")]
    lines += [".SH ENVIRONMENT"] + _environment(list(tree.walk()), everything=True)
    lines += [".SH FILES"] + _files([], everything=True)
    examples = list(own.examples)
    for top in tops:
        first = doc_parts(top).examples[:1] or (doc_parts(top.subcommands[0]).examples[:1] if top.is_group else [])
        examples += [e for e in first if e not in examples]
    lines += [".SH EXAMPLES"] + _examples(examples)[1:]
    lines += [".SH SEE ALSO"] + _see_also("plog", [], tree, everything=True)
    return "\n".join(lines) + "\n"


def render_pages(tree: CommandDoc, version: str) -> dict[str, str]:
    """File name -> roff text: ``plog.1`` and one page per visible top-level command or group."""
    pages = {"plog.1": _root_page(tree, version)}
    for top in tree.subcommands:
        if not top.hidden:
            pages[f"{page_name(top)}.1"] = _command_page(top, tree, version)
    return pages
