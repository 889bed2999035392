"""The one loader of plog's native core, ``plog._native`` (the Rust crate in ``native/``).

The pure-Python units of the formats layer are the reference; the native module holds
their twins (same arguments, same results, same typed errors). Which path runs is decided
once, here, when this module is first imported:

* ``PLOG_NATIVE=0`` in the environment selects the reference path;
* otherwise the native module is used when it was built (``pip install`` with a Rust
  toolchain), and the reference path runs where it was not (or does not load).

The formats modules that have a twin (``batches``, ``default_record``) read :func:`active`
at their own import and bind their public names to one path for the life of the process.
``plog --version`` prints :func:`describe`.

The native decoders raise ``plog._native.NativeFormatError(kind, reason, position)`` (or
return a fault tuple of those three from the batch walk); :func:`typed_error` turns either
into the :class:`~plog.formats.errors.FormatError` subclass the reference raises.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

from .errors import CorruptRecordError, FormatError, InvalidRecordError, VarintError

#: The environment variable that selects the reference path when it is ``0``.
ENV_VAR = "PLOG_NATIVE"

_FAULT_KINDS = {"corrupt": CorruptRecordError, "invalid": InvalidRecordError, "varint": VarintError}


def _load() -> tuple[ModuleType | None, str]:
    """``(module, why_not)``: the native module, or None and the reason it is not used."""
    if os.environ.get(ENV_VAR, "").strip() == "0":
        return None, f"{ENV_VAR}=0"
    try:
        return importlib.import_module("plog._native"), ""
    except ModuleNotFoundError as e:
        if e.name == "plog._native":
            return None, "native module not built"
        return None, f"native module does not load: {e}"
    except ImportError as e:  # built, but not loadable here (a build for another platform...)
        return None, f"native module does not load: {e}"


#: ``plog._native``, or None on the reference path.
module, _why_not = _load()

#: What the native decoders raise (a class that never matches on the reference path). It is
#: the native module's own class, never raised to a caller (:func:`typed_error` turns it into
#: plog's typed error), so its stand-in names that module, not this one.
NativeFormatError: type[Exception] = module.NativeFormatError if module is not None else type(
    "NativeFormatError", (Exception,), {"__module__": "plog._native"})


def active() -> bool:
    """True when the native twins run in this process."""
    return module is not None


def describe() -> str:
    """One short line naming the active path, e.g. ``native (Rust, plog._native 0.1.0)``
    or ``pure Python (PLOG_NATIVE=0)``."""
    if module is None:
        return f"pure Python ({_why_not})"
    return f"native (Rust, plog._native {module.__version__})"


def typed_error(fault) -> FormatError:
    """The typed error for a native fault: a ``NativeFormatError`` or the walk's
    ``(kind, reason, position)`` tuple."""
    kind, reason, position = fault.args if isinstance(fault, BaseException) else fault
    return _FAULT_KINDS[kind](reason, position)
