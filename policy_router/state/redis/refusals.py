"""Which Redis errors are outages: every one the server or its client can give, but the
one that says a script of ours failed by itself.

An outage fails closed like a Redis that cannot be reached (a budgeted call is refused, a
settlement waits in the backlog); a bug is raised as it is. A connection refused or timed
out, a cluster with a slot uncovered or moving, and every refusal of a command, whatever
its prefix: OOM (maxmemory reached), READONLY (a replica after a failover), NOPERM (an
ACL), MISCONF (snapshots failing), BUSY (a script running), LOADING (a restart), also when
the refused command ran inside a script of ours (Redis 6 wraps it: "Error running script
... @user_script:74: -OOM command not allowed"; Redis 7 sends it under its own code, "OOM
command not allowed ... script: ..., on @user_script:74.").
"""

from __future__ import annotations

import functools
import re

__all__ = ["outage", "script_failed"]


def outage() -> tuple[type[BaseException], ...]:
    """The errors a Redis call can end with that are outages (but `script_failed`).
    redis-py is imported here: a store is the only part that needs it."""
    import redis

    return (
        redis.RedisError,
        OSError,
        redis.exceptions.RedisClusterException,  # no node could be reached (not a RedisError)
    )

# What Redis says when a script itself failed at run or compile time (Redis 6 and 7): a
# bug of ours, never an outage. Checked by text: redis-py gives these a plain ResponseError.
_SCRIPT_FAILURES = ("user_script:", "Error running script", "Error compiling script")
# A command the script ran that Redis refused carries the refusal's code after a dash
# ("@user_script:74: -OOM command not allowed", "-READONLY You can't write"): an outage.
_REFUSED_INSIDE = re.compile(r"(?:^|[\s:])-[A-Z]{3,}\b")


@functools.cache
def _refusals() -> tuple[type[BaseException], ...]:
    import redis.exceptions as errors

    names = ("OutOfMemoryError", "ReadOnlyError", "NoPermissionError", "BusyLoadingError",
             "MasterDownError", "TryAgainError", "ClusterDownError")
    return tuple(getattr(errors, n) for n in names if hasattr(errors, n))


def script_failed(error: BaseException) -> bool:
    """Whether Redis says a script of ours failed by itself (a bug), rather than that a
    command it ran was refused (out of memory, read-only, no permission: an outage)."""
    import redis

    if not isinstance(error, redis.ResponseError) or isinstance(error, redis.exceptions.NoScriptError):
        return False
    if isinstance(error, _refusals()):
        # Redis 7 sends a refusal inside a script under its own code ("OOM command not
        # allowed ... script: ..., on @user_script:74."): redis-py names its class.
        return False
    text = str(error)
    return any(marker in text for marker in _SCRIPT_FAILURES) and not _REFUSED_INSIDE.search(text)
