"""Observation: observers of frozen records, the attempt log, reports, the router's overview.

May import `core`, `policies`, `state` and `ground`; never the router or the drivers
(OpenTelemetry's observer reads a router through a small protocol, not its class).
"""

from .observers import (
    AttemptLog,
    LogObserver,
    Observer,
    fan_out,
    read_attempts,
    read_skips,
    to_pandas,
)

__all__ = [
    "AttemptLog",
    "LogObserver",
    "Observer",
    "fan_out",
    "read_attempts",
    "read_skips",
    "to_pandas",
]
