"""The CLI's one place for each piece of terminal output and for exit codes: the streaming
JSON array writer (dump and consume ``--format json``), the progress helper and its null
object, and the mapping of outcomes and error kinds to exit codes in ``cli/app.py``."""

from __future__ import annotations

import io

import pytest
import typer
from typer.testing import CliRunner

from plog.cli.app import _outcome, exit_code_of
from plog.cli.errors import CliUsageError, PlogCliError
from plog.cli.exit_codes import ExitCode, Outcome
from plog.cli.output import JsonArrayWriter
from plog.cli.progress import NullProgress, Progress, progress
from plog.engine.errors import EngineError, InvalidOffsetSpecError
from plog.spark_tasks.errors import SparkJobError, SparkQueryError, SparkSetupError


# -- the streaming JSON array ------------------------------------------------------------------


@pytest.mark.parametrize("break_first,want", [(False, '[{"a":1},\n{"b":2}\n]\n'), (True, '[\n{"a":1},\n{"b":2}\n]\n')])
def test_json_array_streams_its_elements(break_first, want):
    out = io.StringIO()
    array = JsonArrayWriter(out.write, break_first=break_first)
    array.add('{"a":1}')
    assert out.getvalue() == ("[\n" if break_first else "[") + '{"a":1}'  # written as it comes
    array.add('{"b":2}')
    array.close()
    assert out.getvalue() == want and array.started


@pytest.mark.parametrize("binary", [False, True])
def test_an_empty_json_array_is_one_document(binary):
    out = io.BytesIO() if binary else io.StringIO()
    JsonArrayWriter(out.write, binary=binary).close()
    assert out.getvalue() == (b"[]\n" if binary else "[]\n")


# -- progress ----------------------------------------------------------------------------------


def test_progress_off_is_a_null_object(monkeypatch):
    """Off a terminal or with --quiet, nothing is drawn and the engine gets no callback, so
    it skips its progress bookkeeping."""
    monkeypatch.setattr("sys.stderr", io.StringIO())  # not a terminal
    for bar in (progress("scan", total=1 << 30), progress("scan", total=1 << 30, quiet=True),
                progress("reading…", spinner=True), progress("copy", unknown_total=True)):
        assert isinstance(bar, NullProgress) and not bar
        assert bar.callback is None and bar.update_callback is None
        with bar as same:  # every call is a no-op
            same.advance(10)
            same.update(5, 10)
            same.describe("x")
        bar.close()


def test_progress_on_a_terminal(monkeypatch):
    monkeypatch.setattr("plog.cli.progress.progress_enabled", lambda quiet=False: not quiet)
    assert isinstance(progress("scan", total=10), Progress)
    assert progress("scan", total=10).callback is not None
    # Nothing to show: no total, or less than min_total (a small dump).
    assert isinstance(progress("scan", total=0), NullProgress)
    assert isinstance(progress("dump", total=10, min_total=64 << 20), NullProgress)
    assert isinstance(progress("scan", total=10, quiet=True), NullProgress)
    # Work of unknown size, and spinners, show without a total.
    assert isinstance(progress("recover", unknown_total=True), Progress)
    assert isinstance(progress("reading…", spinner=True), Progress)


# -- exit codes --------------------------------------------------------------------------------


class _Scenario(EngineError):
    exit_code = 2  # an error that predates kinds (engine.cluster.simulation.ScenarioError)


@pytest.mark.parametrize("error,code", [
    (PlogCliError("x"), ExitCode.ERROR),
    (CliUsageError("x"), ExitCode.USAGE),
    (PlogCliError("x", "problems_found"), ExitCode.PROBLEMS_FOUND),
    (EngineError("x"), ExitCode.ERROR),
    (InvalidOffsetSpecError("x"), ExitCode.ERROR),
    (_Scenario("x"), ExitCode.USAGE),
    (PlogCliError("line 3: x", like=_Scenario("x")), ExitCode.USAGE),  # a reworded error exits as it
    (PlogCliError("x (3 records before it)", like=PlogCliError("line 3: x", like=CliUsageError("x"))),
     ExitCode.USAGE),
    (SparkSetupError("x"), ExitCode.ERROR),
    (SparkJobError("x"), ExitCode.ERROR),
    (SparkQueryError("SQL: x"), ExitCode.USAGE),
    (OSError(5, "I/O error"), ExitCode.ERROR),
])
def test_exit_code_of_an_error(error, code):
    assert exit_code_of(error) == code


def test_outcomes_become_exit_codes_for_every_command():
    """A command returns an Outcome; the root's result callback (cli/app.py) turns it into
    the exit code, also under Click's test runner and for a group's subcommand."""
    for outcome, code in ((None, 0), (Outcome.OK, 0), (Outcome.PROBLEMS_FOUND, 3), (Outcome.INCOMPLETE, 1)):
        if code == 0:
            assert _outcome(outcome) is None
            continue
        with pytest.raises(typer.Exit) as e:
            _outcome(outcome, quiet=False)
        assert e.value.exit_code == code

    app = typer.Typer(result_callback=_outcome)
    sub = typer.Typer()
    app.add_typer(sub, name="group")

    @app.command()
    def problems() -> Outcome:
        return Outcome.PROBLEMS_FOUND

    @sub.command()
    def incomplete() -> Outcome:
        return Outcome.INCOMPLETE

    runner = CliRunner()
    assert runner.invoke(app, ["problems"]).exit_code == 3
    assert runner.invoke(app, ["group", "incomplete"]).exit_code == 1
