"""plog's dump of the text files Kafka's DumpLogSegments ignores.

Offset checkpoints (``recovery-point-offset-checkpoint`` and friends), the
``leader-epoch-checkpoint``, ``partition.metadata``, ``meta.properties`` and the
``.kafka_cleanshutdown`` marker are parsed with Kafka's own rules (``formats/checkpoints``),
so a file Kafka would refuse on load is an error here too, and rendered one entry per line
in DumpLogSegments' ``name: value`` style. :func:`render_checkpoint` returns the text lines
and the same entries as JSON objects.
"""

from __future__ import annotations

import os

from plog.formats import checkpoints as cp

from plog.engine.storage.file_names import (
    CLEAN_SHUTDOWN,
    LEADER_EPOCH_CHECKPOINT,
    META_PROPERTIES,
    OFFSET_CHECKPOINT_FILE_NAMES,
    PARTITION_METADATA,
)

#: A checkpoint file is a few lines per partition; anything this big is not one.
READ_LIMIT = 64 << 20

OFFSET_CHECKPOINTS = OFFSET_CHECKPOINT_FILE_NAMES


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        data = f.read(READ_LIMIT + 1)
    if len(data) > READ_LIMIT:
        raise cp.CheckpointError(f"{path}: larger than {READ_LIMIT} bytes, not a checkpoint file")
    return data


def render_checkpoint(path: str) -> tuple[list[str], list[dict]]:
    name = os.path.basename(path)
    data = _read(path)
    where = os.path.abspath(path)
    if name in OFFSET_CHECKPOINTS:
        offsets = cp.parse_offset_checkpoint(data, where)
        lines = [f"Offset checkpoint version: 0 entries: {len(offsets)}"]
        entries = []
        for (topic, partition), offset in offsets.items():
            lines.append(f"topic: {topic} partition: {partition} offset: {offset}")
            entries.append({"type": "checkpoint-offset", "topic": topic, "partition": partition, "offset": offset})
        return lines, entries
    if name == LEADER_EPOCH_CHECKPOINT:
        epochs = cp.parse_leader_epoch_checkpoint(data, where)
        lines = [f"Leader epoch checkpoint version: 0 entries: {len(epochs)}"]
        entries = []
        for e in epochs:
            lines.append(f"epoch: {e.epoch} startOffset: {e.start_offset}")
            entries.append({"type": "leader-epoch", "epoch": e.epoch, "start_offset": e.start_offset})
        return lines, entries
    if name == PARTITION_METADATA:
        meta = cp.parse_partition_metadata(data, where)
        topic_id = cp.uuid_to_base64url(meta.topic_id)
        return [f"version: {meta.version} topicId: {topic_id}"], [
            {"type": "partition-metadata", "version": meta.version, "topic_id": topic_id}
        ]
    if name == META_PROPERTIES:
        props = cp.parse_properties(data)
        return [f"{k}={v}" for k, v in props.items()], [{"type": "meta-properties", "properties": props}]
    if name == CLEAN_SHUTDOWN:
        epoch = cp.parse_clean_shutdown(data, where)
        text = "no broker epoch (an empty marker, as Kafka <= 3.6 writes it)" if epoch is None else f"brokerEpoch: {epoch}"
        return [f"Clean shutdown marker: {text}"], [{"type": "clean-shutdown", "broker_epoch": epoch}]
    raise ValueError(f"not a text checkpoint file: {name}")


__all__ = ["OFFSET_CHECKPOINTS", "render_checkpoint"]
