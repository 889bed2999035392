"""One error hierarchy (issue 22): every error class plog defines is a ``PlogError`` with the
fields ``path``, ``position``, ``offset`` and ``kind``; the engine's are defined in one place;
``kind`` alone decides the CLI's exit status."""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil

import pytest

from plog.cli.app import exit_code_of
from plog.cli.errors import CliUsageError, PlogCliError
from plog.cli.exit_codes import KIND_EXIT_CODES, ExitCode
from plog.engine.errors import (
    DecoderError,
    EngineError,
    OffsetOverflowError,
    PropertyError,
    ScenarioError,
)
from plog.formats.errors import KINDS, CorruptRecordError, FormatError, PlogError
from plog.spark_tasks.errors import SparkError, SparkQueryError

LAYERS = ("plog.formats", "plog.engine", "plog.cli", "plog.spark_tasks")

#: The modules allowed to define engine error classes: engine/errors.py, and the schemas
#: family (sources, codecs), which only engine/schemas raises and catches.
ENGINE_ERROR_MODULES = {"plog.engine.errors", "plog.engine.schemas.errors"}


def _modules():
    for layer in LAYERS:
        package = importlib.import_module(layer)
        yield package
        for info in pkgutil.walk_packages(package.__path__, layer + "."):
            if info.name.endswith("__main__"):
                continue  # runs the CLI when imported
            yield importlib.import_module(info.name)


def _error_classes():
    """Every public error class defined (not imported) in a module of plog's four layers.
    Private ones (``_Bad``: a parser's internal signal, caught in its module and turned into a
    typed error there) never reach a caller; BaseExceptions that are not Exceptions are
    stops, not errors (Ctrl-C/SIGTERM, a test hook's simulated kill)."""
    seen = {}
    for module in _modules():
        for name, obj in vars(module).items():
            if (inspect.isclass(obj) and issubclass(obj, Exception) and not name.startswith("_")
                    and obj.__module__ == module.__name__):
                seen[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return seen


ERRORS = _error_classes()


def test_the_walk_finds_the_errors_of_every_layer():
    assert {name.split(".")[1] for name in ERRORS} == {"formats", "engine", "cli", "spark_tasks"}
    assert len(ERRORS) > 80


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_every_error_class_is_a_plog_error(name):
    cls = ERRORS[name]
    assert issubclass(cls, PlogError), f"{name} does not derive from PlogError"
    assert cls.kind in KINDS


def test_engine_errors_are_defined_in_one_place():
    stray = sorted(name for name, cls in ERRORS.items()
                   if issubclass(cls, EngineError) and cls.__module__ not in ENGINE_ERROR_MODULES)
    assert stray == []


def test_the_layers_bases_share_the_root():
    for cls in (FormatError, EngineError, SparkError, PlogCliError):
        assert issubclass(cls, PlogError)


def test_fields_default_to_none_and_kind_to_error():
    for e in (PlogError("x"), EngineError("x"), FormatError("x"), SparkError("x"), PlogCliError("x")):
        assert (e.path, e.position, e.offset, e.kind) == (None, None, None, "error")
        assert str(e) == "x"


def test_fields_are_keywords_and_leave_the_message_alone():
    e = EngineError("segment 7 is bad", path="/k/t-0/07.log", position=12, offset=7)
    assert (str(e), e.path, e.position, e.offset, e.kind) == ("segment 7 is bad", "/k/t-0/07.log", 12, 7, "error")
    f = CorruptRecordError("bad CRC", 5, path="/k/t-0/0.log", offset=3)
    assert (str(f), f.reason, f.position, f.path, f.offset) == ("bad CRC (at byte 5)", "bad CRC", 5, "/k/t-0/0.log", 3)
    assert str(f.at(100)) == "bad CRC (at byte 105)"
    o = OffsetOverflowError("too far", 10, 1 << 40)
    assert (o.segment_base, o.offset, str(o)) == (10, 1 << 40, "too far")
    assert PlogCliError("x", "usage").kind == "usage"


def test_fields_survive_a_process_boundary():
    e = pickle.loads(pickle.dumps(EngineError("m", path="p", position=1, offset=2, kind="problems_found")))
    assert (str(e), e.path, e.position, e.offset, e.kind) == ("m", "p", 1, 2, "problems_found")


def test_every_kind_has_an_exit_code():
    assert set(KIND_EXIT_CODES) == set(KINDS)


@pytest.mark.parametrize("error,code", [
    (EngineError("x"), ExitCode.ERROR),
    (EngineError("x", kind="usage"), ExitCode.USAGE),
    (EngineError("x", kind="problems_found"), ExitCode.PROBLEMS_FOUND),
    (FormatError("x", 3), ExitCode.ERROR),
    (ScenarioError("step 1: x"), ExitCode.USAGE),
    (DecoderError("unknown decoder 'x'"), ExitCode.USAGE),
    (PropertyError("unknown property 'x'"), ExitCode.USAGE),
    (SparkQueryError("SQL: x"), ExitCode.USAGE),
    (CliUsageError("x"), ExitCode.USAGE),
])
def test_kind_decides_the_exit_code(error, code):
    assert exit_code_of(error) == code

