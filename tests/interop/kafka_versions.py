"""The Apache Kafka releases the interop suite runs against, and what differs between them.

One place for the versions: the fetch script, the fixtures and the tests all read
:data:`KAFKA_VERSIONS`.

* ``"4"``: the newest 4.x whose broker *and* tools jars are on Maven Central. 4.4.0 has
  ``kafka_2.13`` but not ``org.apache.kafka:kafka-tools`` (404), and since 4.0
  DumpLogSegments lives in kafka-tools, so 4.3.1 it is.
* ``"3"``: the newest 3.9.x (the last line with ZooKeeper; we run it in KRaft mode).
"""

from __future__ import annotations

KAFKA_VERSIONS: dict[str, str] = {"4": "4.3.1", "3": "3.9.2"}

#: The versions in the order tests are parametrized (newest first).
VERSIONS: list[str] = list(KAFKA_VERSIONS.values())


def major(version: str) -> int:
    return int(version.split(".", 1)[0])


def dump_log_segments_class(version: str) -> str:
    """DumpLogSegments' main class: Scala ``kafka.tools`` up to 3.x, Java kafka-tools from 4.0."""
    return "org.apache.kafka.tools.DumpLogSegments" if major(version) >= 4 else "kafka.tools.DumpLogSegments"


def storage_tool_class(version: str) -> str:
    return "kafka.tools.StorageTool"


def small_segment_config(version: str) -> str:
    """The topic config that sets a segment size below 1 MiB.

    Kafka 4.0 raised the minimum of ``segment.bytes`` to 1048576 (KIP-1030) and kept the
    old range for tests under ``internal.segment.bytes`` (accepted as a topic config by
    4.3.1). 3.9 accepts ``segment.bytes`` down to 14 and does not know the internal name.
    """
    return "internal.segment.bytes" if major(version) >= 4 else "segment.bytes"


def java_major_required(version: str) -> int:
    """The oldest Java the broker runs on: 17 for 4.x, 11 for 3.9."""
    return 17 if major(version) >= 4 else 11


def once_per_version(build, what: str):
    """``get(version)`` that runs ``build(version)`` once per version and keeps the result;
    a failure is kept too, so every later test of that version fails at once naming it
    (``what``: "serving plog's files", ...) instead of rebuilding a broken scenario."""
    import pytest

    done: dict = {}

    def get(version: str):
        if version not in done:
            try:
                done[version] = build(version)
            except (pytest.skip.Exception, pytest.fail.Exception):
                raise
            except Exception as e:  # noqa: BLE001
                done[version] = e
                raise
        got = done[version]
        if isinstance(got, Exception):
            pytest.fail(f"{what} with Kafka {version} failed earlier: {type(got).__name__}: {got}", pytrace=False)
        return got

    return get
