"""Small protobuf helpers shared by every service's proto ↔ domain conversion."""

from __future__ import annotations

from google.protobuf import duration_pb2, timestamp_pb2


def duration(seconds: float) -> duration_pb2.Duration:
    """A Duration of ``seconds`` (nanosecond precision)."""
    d = duration_pb2.Duration()
    d.FromNanoseconds(int(seconds * 1e9))
    return d


def timestamp(seconds: float) -> timestamp_pb2.Timestamp:
    """A Timestamp ``seconds`` after the Unix epoch."""
    t = timestamp_pb2.Timestamp()
    t.FromNanoseconds(int(seconds * 1e9))
    return t
