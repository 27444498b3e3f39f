"""OpenTelemetry for the router (`otel` extra): `OTelObserver`, traces and metrics per
request and attempt under the GenAI semantic conventions.

The observer itself lives in `policy_router.observe.otel`, beside the other observers, so
that a policy file's `observers: {otel: true}` can build it without the configuration
importing an integration; this is its public import path.
"""

from ..observe.extras import need_opentelemetry

need_opentelemetry()

from ..observe.otel import OTelObserver  # noqa: E402

__all__ = ["OTelObserver"]
