"""Which optional extra an observer needs, asked where it is built (not only on import).

A module imported once stays imported, so an `ImportError` raised by its first import is
not raised again; a configuration that asks for OpenTelemetry must still be told, at every
build, that the package is missing and which extra brings it.
"""

from __future__ import annotations

__all__ = ["need_opentelemetry"]


def need_opentelemetry() -> None:
    """Raise ImportError naming the `otel` extra when opentelemetry-api is not importable."""
    try:
        import opentelemetry  # noqa: F401
    except ImportError:
        raise ImportError(
            "OTelObserver needs opentelemetry-api: pip install 'policy-router[otel]'"
        ) from None
