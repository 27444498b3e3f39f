"""The settings a `RedisStore` takes, checked before anything connects: each error names
the setting and what it takes."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from ...ground.errors import ConfigError
from ...ground.numbers import check_number
from .link import address

__all__ = ["checked_options"]


def checked_options(
    url: Any,
    namespace: Any,
    timeout: float,
    retry_every: float,
    probe_lease: float,
    keep_health: float,
    max_connections: Any,
    cluster: Any,
) -> dict[str, Any]:
    """redis-py's connection options for these settings; `ConfigError` for one that is
    wrong (redis-py not installed included)."""
    try:
        import redis  # noqa: F401
    except ImportError:
        raise ConfigError(
            "RedisStore needs redis-py: pip install 'policy-router[redis]'"
        ) from None
    if not isinstance(url, str) or urlsplit(url).scheme not in ("redis", "rediss", "unix"):
        raise ConfigError(
            "RedisStore url must start with redis://, rediss:// (TLS) or unix://, "
            f"got {address(url) if isinstance(url, str) else type(url).__name__!r}"
        )
    if namespace is not None and (not isinstance(namespace, str) or not namespace.strip()):
        raise ConfigError(f"RedisStore namespace must be a non-empty string, got {namespace!r}")
    if (
        isinstance(max_connections, bool)
        or not isinstance(max_connections, int)
        or (max_connections < 1)
    ):
        raise ConfigError(
            f"RedisStore max_connections must be a whole number >= 1, got {max_connections!r}"
        )
    for field, value in (
        ("timeout", timeout),
        ("retry_every", retry_every),
        ("probe_lease", probe_lease),
        ("keep_health", keep_health),
    ):
        check_number(value, f"RedisStore {field}")
    # A bounded pool whose callers queue for a free connection: waiting for one is
    # congestion in this process, not an outage, and a pool that refused or timed out
    # instead would turn a burst of concurrent calls into "budget store unreachable".
    options = {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "decode_responses": True,
        "max_connections": max_connections,
        "timeout": None,
    }
    if not isinstance(cluster, bool):
        raise ConfigError(f"RedisStore cluster must be True or False, got {cluster!r}")
    return options
