"""plog.engine: Kafka's storage layer, clients and operator tools over files.

Where a library user starts (the README's API section)::

    from plog.engine import DataDir, Producer, Consumer

    dd = DataDir.open("./plog-data", create=True)
    dd.create_topic("orders", 3, 1, if_not_exists=True)
    with Producer(dd) as producer:
        producer.send("orders", b"paid", key=b"order-17").get()

The folders, one concept each (DESIGN.md; the README's design section says why each exists):
``storage`` (segments, indexes, logs, the loader, log directories), ``maintenance``
(recovery, retention, the cleaner), ``cluster`` (the data directory, replication, brokers,
placement, reassignment), ``clients`` (producer, consumer and their loops), ``groups``
(consumer groups), ``inspect`` (dump, verify, lookup, inventory, scan), ``schemas``
(Schema Registry payloads).

The names below are imported on first use (PEP 562), so ``import plog.engine`` stays cheap
for the command line, which loads only what a command needs. Every name is also importable
from its own module; this list is the stable front door.
"""

from __future__ import annotations

import importlib

#: Public name -> the module that defines it.
_EXPORTS = {
    # the embedded cluster
    "DataDir": "plog.engine.cluster.data_dir",
    "Producer": "plog.engine.clients.producer",
    "Consumer": "plog.engine.clients.consumer",
    "ConsumeLoop": "plog.engine.clients.consumer_loop",
    "ProduceLoop": "plog.engine.clients.producer_loop",
    # the storage layer
    "LogManager": "plog.engine.storage.log_manager",
    "Log": "plog.engine.storage.log",
    "LogSegment": "plog.engine.storage.segment",
    # operator tools: what plog verify, recover, retention, compact, maintain, lookup, ls and scan run
    "verify_paths": "plog.engine.inspect.verify",
    "plan_recovery": "plog.engine.maintenance.recovery",
    "recover": "plog.engine.maintenance.recovery",
    "run_retention": "plog.engine.maintenance.runner",
    "run_compaction": "plog.engine.maintenance.runner",
    "run_maintenance": "plog.engine.maintenance.runner",
    "lookup_offset": "plog.engine.inspect.lookup",
    "lookup_timestamp": "plog.engine.inspect.lookup",
    "inventory": "plog.engine.inspect.inventory",
    "scan_stats": "plog.engine.inspect.scan",
    "scan_records": "plog.engine.inspect.scan",
    # the one offset/time language
    "parse_offset": "plog.engine.offset_spec",
    "parse_offset_range": "plog.engine.offset_spec",
    # errors: every engine error is an EngineError
    "EngineError": "plog.engine.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'plog.engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
