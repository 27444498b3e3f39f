"""OpenTelemetry traces and metrics of every request and attempt: `OTelObserver`.

    from policy_router.integrations.otel import OTelObserver
    router = Router(routes, observers=[OTelObserver()])

Needs the `otel` extra (`pip install 'policy-router[otel]'`, which is `opentelemetry-api`
alone). The library configures no exporter: it uses the tracer and meter providers your
application set up (or the ones given), and without an SDK every call is a no-op.

**Traces.** One span per request, `policy_router.request` (kind INTERNAL), started in the
caller's current context, so a routed call nests inside the application's trace; one child
span per attempt, named `{gen_ai.operation.name} {gen_ai.request.model}` (kind CLIENT), with
the OpenTelemetry GenAI semantic conventions: `gen_ai.operation.name` (`chat`, `embeddings`,
`text_completion`), `gen_ai.provider.name` (`openai`, `anthropic`, `aws.bedrock`,
`gcp.vertex_ai`, ...; LiteLLM's provider name otherwise), `gen_ai.request.model`, the
request's caps and sampling settings, `server.address`/`server.port`,
`gen_ai.usage.input_tokens`/`output_tokens`, and `error.type` on a failed attempt (the
router's fault kind: `rate_limited`, `server_error`, `timeout`, `connection`, `stream_cut`,
`access`, `bad_request`, `refused`, or `not_sent` for a request that never left the
process). The router's own attributes are under `policy_router.*`: `request_id` (the
journey's id), `group`, `route`, `attempt`, `cost_micros`, `currency`, `outcome`,
`answered_by`, `attempts`, and on an attempt `retry` (its retry number, when it is one) and
`probe` (when it is a resting route's half-open probe). Skips are events on the request span (`policy_router.skip`, with
`policy_router.route`, `policy_router.check` and `policy_router.skip_reason`); a wait for
capacity is a `policy_router.wait` event. A stream's spans end when the stream ends.

**Metrics** (units in braces are counts): `policy_router.requests` {request} and
`policy_router.attempts` {attempt} counters by outcome (an attempt's outcome is "answered",
its fault kind, or "skipped" with `policy_router.check`), `policy_router.cost` {micro}
(millionths of `policy_router.currency`) by route, `policy_router.request.duration` and
`policy_router.attempt.duration` histograms (s), `policy_router.in_flight` {attempt} (an
up-down counter), the GenAI conventions' `gen_ai.client.operation.duration` (s) and
`gen_ai.client.token.usage` {token}, and, for each router the observer is given to, gauges
`policy_router.budget.spent` and `policy_router.budget.reserved` {micro} and
`policy_router.routes.resting` {route}, read from the router's store when collected.

Prompts and replies are never recorded.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

try:
    from opentelemetry import metrics as metrics_api
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError:  # pragma: no cover - exercised by a test that hides the package
    raise ImportError(
        "OTelObserver needs opentelemetry-api: pip install 'policy-router[otel]'"
    ) from None

from ..core.events import AttemptStarted, RequestEnded, RequestStarted
from ..core.journey import Attempt, Waited
from ..ground import catalog
from ..ground.records import Check, Skip
from ..policies.accounts import BudgetThreshold
from .genai import OPERATIONS, PROVIDERS, settings_attributes
from .otel_metrics import Instruments, Watched

if TYPE_CHECKING:
    from ..ground.route import Route
    from ..policies.requirements import Requirements

__all__ = ["OTelObserver"]


_MAX_OPEN = 10_000


@dataclass(kw_only=True, slots=True)
class _Open:
    """A request in progress: its span, its operation and settings, its open attempt."""

    span: Any
    operation: str
    settings: dict[str, Any]
    group: str
    started: float
    attempt: Any = None
    attempt_route: Route | None = None
    attempt_started: float = 0.0
    attempt_attrs: dict[str, Any] | None = None


class OTelObserver:
    """Observer that turns the router's records into OpenTelemetry spans and metrics.

    `tracer_provider` and `meter_provider` default to the global ones; `traces=False` or
    `metrics=False` leaves one signal out. Give the same observer to several routers if you
    like: each router it is given to gets its own gauges (by `policy_router.router`, the
    router's name). It never raises into a call (the router isolates observers anyway) and
    records no prompt or reply content.
    """

    def __init__(
        self,
        *,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        traces: bool = True,
        metrics: bool = True,
    ) -> None:
        package, version = "policy_router", _version()
        self._tracer = (
            trace.get_tracer(package, version, tracer_provider=tracer_provider) if traces else None
        )
        self._lock = threading.Lock()
        # Requests still open, by journey id (oldest first); bounded, so requests that
        # never end (a crash between start and end) cannot grow it without limit.
        self._open: dict[str, _Open] = {}
        self._described: dict[Requirements, str] = {}
        self._providers: dict[str, tuple[str, str | None, int | None]] = {}
        self._meter = (
            Instruments(metrics_api.get_meter(package, version, meter_provider=meter_provider))
            if metrics
            else None
        )

    def attach(self, router: Watched) -> None:
        """Called by `Router` when it is built with this observer: its gauges are read from
        the router's store when the metrics are collected."""
        if self._meter is not None:
            self._meter.attach(router)

    # -- records -----------------------------------------------------------------------------
    def __call__(self, record: object) -> None:
        if isinstance(record, Attempt):
            self._attempt_ended(record)
        elif isinstance(record, Skip):
            self._skipped(record)
        elif isinstance(record, AttemptStarted):
            self._attempt_started(record)
        elif isinstance(record, RequestStarted):
            self._request_started(record)
        elif isinstance(record, RequestEnded):
            self._request_ended(record)
        elif isinstance(record, Waited):
            with self._lock:
                request = self._open.get(record.journey_id)
            if request is not None and request.span is not None:
                request.span.add_event(
                    "policy_router.wait",
                    {"policy_router.wait_seconds": record.seconds, "policy_router.why": record.why},
                )
        elif isinstance(record, BudgetThreshold) and self._tracer is not None:
            # Told while the call that crossed it settles: an event of the span current then.
            from opentelemetry import trace as trace_api

            trace_api.get_current_span().add_event(
                "policy_router.budget_threshold",
                {
                    "policy_router.scope": record.scope,
                    "policy_router.fraction": record.fraction,
                    "policy_router.spent": str(record.spent.amount),
                    "policy_router.cap": str(record.cap.amount),
                    "policy_router.currency": record.cap.currency,
                },
            )

    def _request_started(self, record: RequestStarted) -> None:
        operation = OPERATIONS.get(record.operation, record.operation)
        settings = settings_attributes(record.settings)
        span = None
        if self._tracer is not None:
            # The caller's current context is the parent: this runs in its thread or task.
            span = self._tracer.start_span(
                "policy_router.request",
                kind=SpanKind.INTERNAL,
                attributes={"gen_ai.operation.name": operation},
            )
            if span.is_recording():  # a sampled-out span is not worth describing
                span.set_attributes(
                    {
                        "policy_router.request_id": record.journey_id,
                        "policy_router.group": record.group,
                        "policy_router.requirements": self._describe(record.needs),
                    }
                )
            else:
                span = None
        started = _Open(span=span, operation=operation, settings=settings, group=record.group, started=time.perf_counter())
        with self._lock:
            self._open[record.journey_id] = started
            if len(self._open) > _MAX_OPEN:
                del self._open[next(iter(self._open))]

    def _attempt_started(self, record: AttemptStarted) -> None:
        with self._lock:
            request = self._open.get(record.journey_id)
        if request is None:
            return
        route = record.route
        provider, host, port = self._where(route)
        model = route.model.split("/", 1)[1] if "/" in route.model else route.model
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": request.operation,
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model,
        }
        if host is not None:
            attrs["server.address"] = host
            if port is not None:
                attrs["server.port"] = port
        request.attempt_attrs = attrs
        request.attempt_route = route
        request.attempt_started = time.perf_counter()
        if self._meter is not None:
            self._meter.in_flight.add(1, {"policy_router.route": route.name})
        if request.span is not None and self._tracer is not None:
            # The conventions' sampling-relevant attributes go in at the start; the rest
            # only on a span that records.
            span = self._tracer.start_span(
                f"{request.operation} {model}",
                context=trace.set_span_in_context(request.span),
                kind=SpanKind.CLIENT,
                attributes=attrs,
            )
            if span.is_recording():
                more = {
                    **request.settings,
                    "policy_router.request_id": record.journey_id,
                    "policy_router.route": route.name,
                    "policy_router.attempt": record.attempt,
                }
                if record.number > 1:
                    more["policy_router.retry"] = record.number - 1
                if record.probe:
                    more["policy_router.probe"] = True
                span.set_attributes(more)
            request.attempt = span

    def _attempt_ended(self, record: Attempt) -> None:
        with self._lock:
            request = self._open.get(record.journey_id)
        if request is None or request.attempt_route is None:
            return
        self._close_attempt(request, record.route, record.outcome, record, sent=True)

    def _skipped(self, record: Skip) -> None:
        with self._lock:
            request = self._open.get(record.journey_id)
        if request is None:
            return
        if record.check is Check.SEND and request.attempt_route is not None:
            self._close_attempt(request, record.route, "not_sent", None, sent=False)
        if request.span is not None:
            request.span.add_event(
                "policy_router.skip",
                {
                    "policy_router.route": record.route,
                    "policy_router.check": record.check.value,
                    "policy_router.skip_reason": record.reason,
                },
            )
        if self._meter is not None:
            self._meter.attempts.add(
                1,
                {
                    "policy_router.route": record.route,
                    "policy_router.group": request.group,
                    "policy_router.outcome": "skipped",
                    "policy_router.check": record.check.value,
                },
            )

    def _close_attempt(
        self, request: _Open, route: str, outcome: str, record: Attempt | None, *, sent: bool
    ) -> None:
        elapsed = time.perf_counter() - request.attempt_started
        attrs = request.attempt_attrs or {}
        failed = outcome not in ("answered", "closed")  # closed early: no error
        usage = record.usage if record is not None else None
        cost = record.cost if record is not None else None
        span = request.attempt
        if span is not None:
            ended: dict[str, Any] = {"policy_router.outcome": outcome}
            if not sent:
                ended["policy_router.sent"] = False
            embedding = attrs.get("gen_ai.operation.name") == "embeddings"
            if usage is not None:
                ended["gen_ai.usage.input_tokens"] = usage.prompt
                if not embedding:
                    ended["gen_ai.usage.output_tokens"] = usage.completion
            if record is not None and record.response_model:
                ended["gen_ai.response.model"] = record.response_model
            if cost is not None:
                ended["policy_router.cost_micros"] = cost.micros
                ended["policy_router.currency"] = cost.currency
            if record is not None and record.streamed and not failed:
                ended["policy_router.time_to_first_chunk"] = record.elapsed
            if failed:
                ended["error.type"] = outcome
                if record is not None and record.status:
                    ended["http.response.status_code"] = record.status
                # The kind and the status only: a provider's text may quote the prompt (or a
                # key), and a span leaves the process for whatever backend collects it.
                status = f" {record.status}" if record is not None and record.status else ""
                span.set_status(Status(StatusCode.ERROR, f"{outcome}{status}"))
            span.set_attributes(ended)
            span.end()
        request.attempt = None
        request.attempt_route = None
        if self._meter is None:
            return
        where = {"policy_router.route": route}
        self._meter.in_flight.add(-1, where)
        labels = {**where, "policy_router.group": request.group, "policy_router.outcome": outcome}
        self._meter.attempts.add(1, labels)
        if not sent:
            return
        self._meter.attempt_duration.record(elapsed, labels)
        conv = {**attrs, "error.type": outcome} if failed else attrs
        self._meter.operation_duration.record(elapsed, conv)
        if usage is not None:
            self._meter.token_usage.record(usage.prompt, {**attrs, "gen_ai.token.type": "input"})
            if attrs.get("gen_ai.operation.name") != "embeddings":  # nothing is generated
                self._meter.token_usage.record(
                    usage.completion, {**attrs, "gen_ai.token.type": "output"}
                )
        if cost is not None:
            self._meter.cost.add(cost.micros, {**where, "policy_router.currency": cost.currency})

    def _request_ended(self, record: RequestEnded) -> None:
        with self._lock:
            request = self._open.pop(record.journey_id, None)
        if request is None:
            return
        journey = record.journey
        outcome = "answered" if record.ok else str(record.error_type)
        if request.attempt_route is not None:
            # The caller went away with an attempt open (a cancelled task): close it too.
            self._close_attempt(request, request.attempt_route.name, "cancelled", None, sent=True)
        span = request.span
        if span is not None:
            ended: dict[str, Any] = {
                "policy_router.outcome": outcome,
                "policy_router.attempts": len(journey.attempts),
                "policy_router.elapsed": journey.elapsed,
            }
            if journey.answered_by is not None:
                ended["policy_router.answered_by"] = journey.answered_by
            cost = journey.cost
            if cost is not None:
                ended["policy_router.cost_micros"] = cost.micros
                ended["policy_router.currency"] = cost.currency
            if not record.ok:
                ended["error.type"] = outcome
                span.set_status(Status(StatusCode.ERROR, outcome))
            span.set_attributes(ended)
            span.end()
        if self._meter is not None:
            labels = {
                "policy_router.group": request.group,
                "gen_ai.operation.name": request.operation,
                "policy_router.outcome": outcome,
            }
            self._meter.requests.add(1, labels)
            self._meter.request_duration.record(time.perf_counter() - request.started, labels)

    def _describe(self, needs: Requirements) -> str:
        described = self._described.get(needs)
        if described is None:
            described = self._described[needs] = needs.describe()
        return described

    def _where(self, route: Route) -> tuple[str, str | None, int | None]:
        """The route's provider (as the conventions name it) and server, looked up once."""
        found = self._providers.get(route.name)
        if found is None:
            provider = route.provider
            if not provider:
                provider = catalog.listed([route.model]) or "unknown"
            base = route.kwargs.get("api_base") or route.kwargs.get("base_url")
            host = port = None
            if isinstance(base, str):
                parts = urlsplit(base)
                host, port = parts.hostname, parts.port
            found = (PROVIDERS.get(provider, provider), host, port)
            self._providers[route.name] = found
        return found

    def __repr__(self) -> str:
        signals = [s for s, on in (("traces", self._tracer), ("metrics", self._meter)) if on]
        return f"OTelObserver({', '.join(signals) or 'nothing'})"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("policy-router")
    except PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        return "0"
