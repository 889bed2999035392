#!/usr/bin/env bash
# Fetch the Apache Kafka jars of the interop suite (tests/interop/kafka_versions.py) into
# ${PLOG_KAFKA_CACHE:-<repo>/.kafka-cache}/<version>, reusing complete downloads.
# Usage: tests/interop/fetch_kafka.sh [VERSION ...]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
py="${PYTHON:-python3}"
exec "$py" "$here/kafka_fetch.py" "$@"
